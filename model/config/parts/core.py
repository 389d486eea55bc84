"""The core of a decoder-only Transformer: what every variant has (the vocabulary, the context, the
residual stream's width and depth, dropout) and the choices that span the whole model (causal masking,
where biases are, tied embeddings, Gemma's √d embedding scale, the logits' soft cap)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from model.config.parts.base import Part, Term, declare
from model.config.rules import kind_problems, softcap

if TYPE_CHECKING:
    from model.config import GPTConfig


@dataclass(frozen=True)
class CorePart(Part):
    """The model-level fields; the parameters are the token embedding E (``V·d``) and the output head
    W_U (``V·d``, none when tied: W_U = Eᵀ)."""

    title = "core"
    #: its name in the config: ``cfg.core``
    key = "core"

    vocab_size: int | None = declare(
        None,
        "V, the number of distinct tokens; usually decided by the tokenizer.",
    )
    context_length: int = declare(
        256,
        "T_max, the longest sequence the model reads (size of the learned position table).",
    )
    n_layers: int = declare(4, "L, the number of Transformer blocks stacked on the residual stream.")
    d_model: int = declare(128, "d, the width of the residual stream and of every token vector.")
    causal: bool = declare(
        True,
        "True: a query sees only itself and earlier tokens (decoder); False: sees everything.",
    )
    bias: str = declare(
        "all",
        "all: every linear layer has a bias; qkv: only Q, K, V; none (Llama).",
        choices=("all", "qkv", "none"),
    )
    tie_embeddings: bool = declare(False, "Share the token embedding with the output head (W_U = Eᵀ).")
    dropout: float = declare(0.0, "Dropout probability on embeddings, attention weights and residual writes.")
    embed_scale: bool = declare(False, "Multiply the token embeddings by √d before the first block (Gemma).")
    final_softcap: float | None = declare(
        None,
        "c: output logits become c·tanh(logit/c) (Gemma 2: 30); empty: off.",
        bounds=(0.01, 10_000.0),  # 30 (Gemma 2)
    )

    def problems(self, cfg: GPTConfig) -> list[str]:
        out = kind_problems(
            self,
            sizes=("context_length", "n_layers", "d_model"),
            optional_sizes=("vocab_size",),
            choices=("bias",),
            flags=("causal", "tie_embeddings", "embed_scale"),
        )
        p = self.dropout
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not (0.0 <= p < 1.0):
            out.append(f"dropout={p!r} must be a probability in [0, 1)")
        softcap(out, self, "final_softcap")
        return out

    def parameters(self, cfg: GPTConfig, s: Mapping[str, int]) -> list[Term]:
        """Token embedding ``V·d``; output head ``V·d`` when untied."""
        V, d = s["V"], s["d"]
        tied = self.tie_embeddings
        return [
            Term("token embedding", V * d, "V·d", blocks=None),
            Term(
                "output head",
                0 if tied else V * d,
                "tied: is the token embedding" if tied else "V·d",
                matmul=True,
                blocks=None,
            ),
        ]


__all__ = ["CorePart"]
