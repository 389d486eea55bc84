"""The limits beyond one field's declaration that the checks of :mod:`model.config.checks` hold a config
to: the RoPE bases and contexts, and the size of a config file. A field's own help, choices and range
are declared with it, in its part (:func:`model.config.parts.base.declare`). :mod:`model.config`
re-exports them all.
"""

from __future__ import annotations

#: A config file larger than this is not a config (refused before it is read).
MAX_CONFIG_BYTES = 1024 * 1024

#: The largest RoPE base θ (``rope_base``, ``rope_local_base``; both must exceed 1): Llama 3 uses
#: 500 000, Qwen and Gemma 3 1 000 000.
MAX_ROPE_BASE = 1e12
#: The longest ``rope_original_context`` (the context a model was first trained with: 4096 to 8192).
MAX_ROPE_CONTEXT = 10**9

__all__ = ["MAX_CONFIG_BYTES", "MAX_ROPE_BASE", "MAX_ROPE_CONTEXT"]
