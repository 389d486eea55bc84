"""Parameters, counted exactly as :class:`model.nn.gpt.GPT` creates them, per component.

Part of the budget calculator; :mod:`model.budget.arithmetic` states its conventions (what counts as a
parameter, Kaplan's non-embedding count) and is what callers import.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from model.budget.checks import check, symbols
from model.config import GPTConfig

#: The components in table order. ``group`` is embedding | attention | mlp | norm | head.
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("token embedding", "embedding"),
    ("position embedding", "embedding"),
    ("attention Q", "attention"),
    ("attention K", "attention"),
    ("attention V", "attention"),
    ("attention O", "attention"),
    ("attention biases", "attention"),
    ("attention scale", "attention"),
    ("mlp weights", "mlp"),
    ("mlp biases", "mlp"),
    ("norms", "norm"),
    ("qk norms", "norm"),
    ("final norm", "norm"),
    ("output head", "head"),
)


@dataclass(frozen=True)
class Component:
    """One row of the parameter table.

    ``count`` is over the whole model; ``per_layer`` is the count in one block (``None`` for the
    model-level rows: embeddings, final norm, output head). ``formula`` gives ``count`` in the
    module's symbols; ``matmul`` says the weights multiply every token (2 FLOPs each per token).
    """

    name: str
    group: str
    count: int
    formula: str
    per_layer: int | None = None
    per_layer_formula: str | None = None
    matmul: bool = False


@dataclass(frozen=True)
class ParamBreakdown:
    """Exact parameter counts of a config, per component (see :data:`COMPONENTS`)."""

    config: GPTConfig
    components: tuple[Component, ...]

    def __getitem__(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def counts(self) -> dict[str, int]:
        """Component name → count over the whole model (every component, zeros included)."""
        return {c.name: c.count for c in self.components}

    def group_total(self, group: str) -> int:
        return sum(c.count for c in self.components if c.group == group)

    def _per_layer(self, group: str | None = None) -> int:
        return sum(c.per_layer or 0 for c in self.components if group is None or c.group == group)

    @property
    def total(self) -> int:
        """Every parameter, a tied head counted once: what ``sum(p.numel() for p in model.parameters())``
        gives."""
        return sum(c.count for c in self.components)

    @property
    def embedding(self) -> int:
        """Token embedding + learned position table: ``V·d + T_max·d``."""
        return self["token embedding"].count + self["position embedding"].count

    @property
    def embeddings_and_head(self) -> int:
        """Token embedding + position table + untied output head (``2·V·d`` untied, no table)."""
        return self.embedding + self["output head"].count

    @property
    def non_embedding(self) -> int:
        """Kaplan's N: total − token embedding − position table − untied output head (= blocks +
        final norm)."""
        return self.total - self.embeddings_and_head

    @property
    def attention_per_layer(self) -> int:
        """Q, K, V, O weights, their biases and per-head scales of one block."""
        return self._per_layer("attention")

    @property
    def mlp_per_layer(self) -> int:
        return self._per_layer("mlp")

    @property
    def norms_per_layer(self) -> int:
        return self._per_layer("norm")

    @property
    def per_layer(self) -> int:
        """All parameters of one block."""
        return self._per_layer()

    @property
    def layers(self) -> int:
        """Attention and MLP parameters of all ``L`` blocks, ``L·(attention + mlp per layer)``; the
        blocks' norms are counted in :attr:`norms` (the source chapter's table splits them so)."""
        return self.config.n_layers * (self.attention_per_layer + self.mlp_per_layer)

    @property
    def norms(self) -> int:
        """Every norm parameter: the blocks' norms and the final norm."""
        return self.group_total("norm")

    @property
    def matmul(self) -> int:
        """``N_mm``: weights that multiply every token's vector (Q, K, V, O, MLP, output head, the
        head counted even when tied). Forward FLOPs per token ≈ ``2·N_mm``."""
        n = sum(c.count for c in self.components if c.matmul)
        if self.config.tie_embeddings:
            n += self["token embedding"].count
        return n

    def summary(self) -> list[tuple[str, int, str]]:
        """The rows of the source chapter's table, (name, count, formula); "all layers",
        "embeddings + output" and "norms" partition "total"."""
        att_terms = ["2·d·d_k·(h + h_kv)"]
        att_terms += [
            c.per_layer_formula
            for c in self.components_of("attention")
            if not c.matmul and c.per_layer and c.per_layer_formula
        ]
        mlp = self.components_of("mlp")
        return [
            ("attention (per layer)", self.attention_per_layer, " + ".join(att_terms)),
            ("mlp (per layer)", self.mlp_per_layer, _join_formulas(mlp, per_layer=True)),
            ("all layers", self.layers, "L·(attention + mlp per layer)"),
            (
                "embeddings + output",
                self.embeddings_and_head,
                _join_formulas([self["token embedding"], self["position embedding"], self["output head"]]),
            ),
            ("norms", self.norms, _join_formulas([self["norms"], self["final norm"]])),
            ("total", self.total, "all layers + embeddings + output + norms"),
            ("non-embedding", self.non_embedding, "total − (embeddings + output)"),
        ]

    def components_of(self, group: str) -> list[Component]:
        return [c for c in self.components if c.group == group]

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "non_embedding": self.non_embedding,
            "embedding": self.embedding,
            "embeddings_and_head": self.embeddings_and_head,
            "per_layer": self.per_layer,
            "attention_per_layer": self.attention_per_layer,
            "mlp_per_layer": self.mlp_per_layer,
            "layers": self.layers,
            "norms": self.norms,
            "matmul": self.matmul,
            "components": self.counts(),
            "rows": [
                {
                    "name": c.name,
                    "group": c.group,
                    "count": c.count,
                    "per_layer": c.per_layer,
                    "formula": c.formula,
                    "per_layer_formula": c.per_layer_formula,
                }
                for c in self.components
            ],
            "summary": [{"name": n, "count": v, "formula": f} for n, v, f in self.summary()],
        }


def _join_formulas(parts: Iterable[Component], per_layer: bool = False) -> str:
    terms = []
    for c in parts:
        f = c.per_layer_formula if per_layer else c.formula
        if (c.per_layer if per_layer else c.count) and f:
            terms.append(f)
    return " + ".join(terms) if terms else "0"


def parameters(cfg: GPTConfig) -> ParamBreakdown:
    """Exact parameter counts per component.

    Per layer: Q ``d·h·d_k``, K and V ``d·h_kv·d_k`` each, O ``h·d_k·d``; biases (``bias="all"``:
    ``h·d_k + 2·h_kv·d_k + d`` in attention and ``d_ff + d`` (gelu/relu) or ``2·d_ff + d`` (swiglu) in
    the MLP; ``"qkv"``: only ``h·d_k + 2·h_kv·d_k``); per-head scale or gain ``h`` (attn_scale learned
    or qk_norm); MLP ``2·d·d_ff`` (gelu/relu) or ``3·d·d_ff`` (swiglu/geglu); two norms ``4·d`` (LayerNorm,
    weight+bias) or ``2·d`` (RMSNorm, with or without Gemma's 1 + γ); QK-norm (``qk_rmsnorm``, Qwen3)
    ``2·d_k`` (one [d_k] weight for all query heads, one for all key heads). Partial rotary, sliding
    windows and parallel blocks add no parameters (RoPE is a fixed table, not a weight).
    Model level: token embedding ``V·d``, learned position table
    ``T_max·d``, final norm (Pre-LN only) ``2·d`` or ``d``, output head ``V·d`` when untied.

    Raises :class:`ConfigError` listing every problem when the config is invalid or lacks V.
    """
    check(cfg)
    s = symbols(cfg)
    L, d, h, h_kv, d_k, d_ff, V, T_max = (s[k] for k in ("L", "d", "h", "h_kv", "d_k", "d_ff", "V", "T_max"))

    def layer(name: str, group: str, n: int, f: str, matmul: bool = False, zero_note: str = "") -> Component:
        total_f = (f"L·({f})" if " " in f else f"L·{f}") if n else zero_note
        return Component(name, group, L * n, total_f, n, f if n else zero_note, matmul)

    def model_level(name: str, group: str, n: int, f: str) -> Component:
        return Component(name, group, n, f)

    ln = cfg.norm == "layernorm" and cfg.norm_bias  # a norm with a shift β as well as a scale γ
    swiglu = cfg.mlp in ("swiglu", "geglu")  # gated: three matrices
    att_bias, att_bias_f = 0, "bias=none"
    if cfg.bias == "all":
        att_bias, att_bias_f = h * d_k + 2 * h_kv * d_k + d, "h·d_k + 2·h_kv·d_k + d"
    elif cfg.bias == "qkv":
        att_bias, att_bias_f = h * d_k + 2 * h_kv * d_k, "h·d_k + 2·h_kv·d_k"
    mlp_bias, mlp_bias_f = 0, f"bias={cfg.bias}"
    if cfg.bias == "all":
        mlp_bias, mlp_bias_f = (2 * d_ff + d, "2·d_ff + d") if swiglu else (d_ff + d, "d_ff + d")
    scale = h if cfg.attn_scale in ("learned", "qk_norm") else 0
    pre = cfg.norm_position == "pre"
    comps = (
        model_level("token embedding", "embedding", V * d, "V·d"),
        model_level(
            "position embedding",
            "embedding",
            T_max * d if cfg.positions == "learned" else 0,
            "T_max·d" if cfg.positions == "learned" else f"{cfg.positions}: no learned table",
        ),
        layer("attention Q", "attention", d * h * d_k, "d·h·d_k", matmul=True),
        layer("attention K", "attention", d * h_kv * d_k, "d·h_kv·d_k", matmul=True),
        layer("attention V", "attention", d * h_kv * d_k, "d·h_kv·d_k", matmul=True),
        layer("attention O", "attention", h * d_k * d, "h·d_k·d", matmul=True),
        layer("attention biases", "attention", att_bias, att_bias_f, zero_note=att_bias_f),
        layer("attention scale", "attention", scale, "h", zero_note=f"attn_scale={cfg.attn_scale}"),
        layer(
            "mlp weights",
            "mlp",
            (3 if swiglu else 2) * d * d_ff,
            "3·d·d_ff" if swiglu else "2·d·d_ff",
            matmul=True,
        ),
        layer("mlp biases", "mlp", mlp_bias, mlp_bias_f, zero_note=mlp_bias_f),
        layer("norms", "norm", (4 if ln else 2) * d, "4·d" if ln else "2·d"),
        layer("qk norms", "norm", 2 * d_k if cfg.qk_rmsnorm else 0, "2·d_k", zero_note="qk_rmsnorm off"),
        model_level(
            "final norm",
            "norm",
            ((2 if ln else 1) * d) if pre else 0,
            ("2·d" if ln else "d") if pre else "post-LN: blocks end in a norm",
        ),
        Component(
            "output head",
            "head",
            0 if cfg.tie_embeddings else V * d,
            "tied: is the token embedding" if cfg.tie_embeddings else "V·d",
            matmul=True,
        ),
    )
    return ParamBreakdown(cfg, comps)


__all__ = ["COMPONENTS", "Component", "ParamBreakdown", "parameters"]
