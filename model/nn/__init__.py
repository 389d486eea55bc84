"""The network: the config's GPT with named hook points, its layers, generation, and its parameters measured
as built."""
