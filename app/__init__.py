"""Attention Lab's desktop app and command line (Qt lives here, never in model/)."""

__version__ = "0.1.0"
