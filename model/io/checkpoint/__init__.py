"""Checkpoints: ours (JSON and safetensors in a directory), the starter model in assets/, and nanoGPT's."""
