"""Arithmetic on configs: parameters, FLOPs, memory, cost, presets, the budget table, sizing."""
