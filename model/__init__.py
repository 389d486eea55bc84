"""Attention Lab's headless core: pure PyTorch and numpy, no Qt."""

from model.config import ConfigError, GPTConfig

__all__ = ["ConfigError", "GPTConfig"]
