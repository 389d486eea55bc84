"""Arithmetic on configs: the calculator (parameters, FLOPs, memory, cost, reached through
:mod:`model.budget.arithmetic`), presets, the budget table and its renderings, sizing."""
