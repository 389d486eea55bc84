"""The parameter table's rows and the totals read from them (:class:`ParamBreakdown`).

:class:`Component` is one row (its count over the model and per block, the formula of each, whether its
weights multiply the tokens that reach them); :class:`ParamBreakdown` sums the rows into what the budget
reports: per-layer and per-group totals, the active count of a mixture of experts, the summary lines.
:func:`model.budget.parameters.parameters` fills it from a config.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from model.budget.checks import symbols
from model.config import GPTConfig

#: Every component in table order. ``group`` is embedding | attention | mlp | norm | head (the
#: mixture of experts is the block's feed-forward, group mlp). A config lists the components it can
#: have: the old ones always (zeros included), latent attention's, the sinks' and the experts' only
#: when the config has them.
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("token embedding", "embedding"),
    ("position embedding", "embedding"),
    ("attention Q", "attention"),
    ("latent Q down", "attention"),
    ("latent Q up", "attention"),
    ("attention K", "attention"),
    ("attention V", "attention"),
    ("latent KV down", "attention"),
    ("latent KV up", "attention"),
    ("attention O", "attention"),
    ("attention biases", "attention"),
    ("attention scale", "attention"),
    ("attention sinks", "attention"),
    ("mlp weights", "mlp"),
    ("mlp biases", "mlp"),
    ("router", "mlp"),
    ("router choice bias", "mlp"),
    ("experts", "mlp"),
    ("shared experts", "mlp"),
    ("shared expert gate", "mlp"),
    ("expert biases", "mlp"),
    ("norms", "norm"),
    ("qk norms", "norm"),
    ("latent norms", "norm"),
    ("final norm", "norm"),
    ("output head", "head"),
)
_GROUP = dict(COMPONENTS)

#: Which blocks hold a per-block component: every block, the dense-MLP blocks (all of them in a dense
#: model; the ``moe_dense_layers`` first ones in a mixture of experts), or the mixture-of-experts blocks.
BLOCK_KINDS = ("all", "dense", "moe")


@dataclass(frozen=True)
class Component:
    """One row of the parameter table.

    ``count`` is over the whole model; ``per_layer`` is the count in one block that has the component
    (``None`` for the model-level rows: embeddings, final norm, output head) and ``blocks`` says which
    blocks have it (:data:`BLOCK_KINDS`; ``None`` at model level). ``formula`` gives ``count`` in the
    module's symbols; ``matmul`` says the weights multiply the token vectors that reach them (2 FLOPs
    each per token). ``active`` is how many of ``count`` one token uses, ``active_per_layer`` how many
    of ``per_layer`` (``None``: all of them; the routed experts: ``k`` of ``E``), each with a formula.
    """

    name: str
    group: str
    count: int
    formula: str
    per_layer: int | None = None
    per_layer_formula: str | None = None
    matmul: bool = False
    blocks: str | None = None
    active: int | None = None
    active_formula: str | None = None
    active_per_layer: int | None = None
    active_per_layer_formula: str | None = None

    @property
    def active_count(self) -> int:
        """Parameters of this component one token uses (``count`` unless it is routed)."""
        return self.count if self.active is None else self.active

    @property
    def active_in_layer(self) -> int:
        """Parameters of this component one token uses in one block that has it."""
        return (self.per_layer or 0) if self.active_per_layer is None else self.active_per_layer


@dataclass(frozen=True)
class ParamBreakdown:
    """Exact parameter counts of a config, per component (see :data:`COMPONENTS`).

    Blocks are of two kinds when the config has a mixture of experts with dense first layers
    (DeepSeek-V3: 3 dense, 58 with experts): :meth:`block` gives any block's count, :attr:`per_layer`
    the count of one block of the model's main kind (a mixture-of-experts block where there are any).
    """

    config: GPTConfig
    components: tuple[Component, ...]

    def __getitem__(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(c.name == name for c in self.components)

    def counts(self) -> dict[str, int]:
        """Component name → count over the whole model (every component of this config, zeros included)."""
        return {c.name: c.count for c in self.components}

    def active_counts(self) -> dict[str, int]:
        """Component name → parameters one token uses (:attr:`Component.active_count`)."""
        return {c.name: c.active_count for c in self.components}

    def group_total(self, group: str) -> int:
        return sum(c.count for c in self.components if c.group == group)

    # ---- blocks ----------------------------------------------------------------------------------
    @property
    def has_moe(self) -> bool:
        """The config has mixture-of-experts blocks."""
        return self.config.feed_forward.n_experts is not None

    def _in_block(self, moe: bool, group: str | None = None, active: bool = False) -> int:
        """One block's count (``moe``: a mixture-of-experts block, else a dense one), optionally one
        group only, optionally only what one token uses."""
        kinds = ("all", "moe" if moe else "dense")
        return sum(
            c.active_in_layer if active else c.per_layer or 0
            for c in self.components
            if c.blocks in kinds and (group is None or c.group == group)
        )

    def block(self, layer: int) -> int:
        """All parameters of block ``layer`` (0-based): what ``model.blocks[layer]`` holds."""
        return self._in_block(self.config.is_moe_layer(layer))

    def layer_counts(self) -> list[int]:
        """:meth:`block` for every block, in order."""
        return [self.block(i) for i in range(self.config.core.n_layers)]

    @property
    def per_layer(self) -> int:
        """All parameters of one block: a mixture-of-experts block where the model has them (its dense
        first blocks: :attr:`dense_per_layer`), else any block."""
        return self._in_block(self.has_moe)

    @property
    def dense_per_layer(self) -> int:
        """All parameters of one block with a dense MLP (0 when every block has experts)."""
        return self._in_block(False) if self.config.core.n_layers > self._moe_blocks else 0

    @property
    def attention_per_layer(self) -> int:
        """Q, K, V, O weights (or latent attention's projections), their biases, per-head scales and
        sinks of one block."""
        return self._in_block(self.has_moe, "attention")

    @property
    def mlp_per_layer(self) -> int:
        """One block's feed-forward: the MLP, or where the model has experts, one mixture-of-experts
        block's router, experts, shared experts and their biases (:attr:`moe_per_layer`)."""
        return self._in_block(self.has_moe, "mlp")

    @property
    def dense_mlp_per_layer(self) -> int:
        """The dense MLP of one block that has one (0 when every block has experts)."""
        return self._in_block(False, "mlp") if self.config.core.n_layers > self._moe_blocks else 0

    @property
    def moe_per_layer(self) -> int:
        """Router + all ``E`` experts + shared experts (+ their biases) of one mixture-of-experts block."""
        return self._in_block(True, "mlp") if self.has_moe else 0

    @property
    def moe_active_per_layer(self) -> int:
        """What one token uses of a mixture-of-experts block: router + ``k`` experts + shared experts."""
        return self._in_block(True, "mlp", active=True) if self.has_moe else 0

    @property
    def _moe_blocks(self) -> int:
        return symbols(self.config).get("L_moe", 0)

    # ---- totals ----------------------------------------------------------------------------------
    @property
    def total(self) -> int:
        """Every parameter, a tied head counted once: what ``sum(p.numel() for p in model.parameters())``
        gives."""
        return sum(c.count for c in self.components)

    @property
    def active(self) -> int:
        """Parameters one token uses: everything but the routed experts it is not sent to,
        ``total − L_moe·(E − k)·(one expert)`` (= :attr:`total` for a dense model). Embedding and output
        head are counted, as Mixtral's 12.9B and gpt-oss's 5.1B count them."""
        return sum(c.active_count for c in self.components)

    @property
    def active_without_embedding(self) -> int:
        """:attr:`active` without the token-embedding and position tables, which a token only reads one
        row of (a tied embedding stays: it is the output head too). The convention of gpt-oss's model
        card (5.1B active for gpt-oss-120b) and DeepSeek-V3's weights README (36.6B, "including 0.9B
        for the output head"); Mixtral's 12.9B counts the embedding (:attr:`active`)."""
        lookup = self["position embedding"].count
        if not self.config.core.tie_embeddings:
            lookup += self["token embedding"].count
        return self.active - lookup

    @property
    def active_formula(self) -> str:
        """How :attr:`active` follows from :attr:`total`."""
        if not self.has_moe:
            return "total (dense: every parameter multiplies every token)"
        expert = self["experts"].per_layer_formula or ""
        one = expert.removeprefix("E·") if expert.startswith("E·") else f"({expert})/E"
        bias = " (+ their biases)" if "expert biases" in self and self["expert biases"].count else ""
        return f"total − L_moe·(E − k)·{one}{bias}"

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
    def layers(self) -> int:
        """Attention and feed-forward parameters of all ``L`` blocks (``L·(attention + mlp per layer)``
        in a dense model); the blocks' norms are counted in :attr:`norms` (the source chapter's table
        splits them so)."""
        return self.group_total("attention") + self.group_total("mlp")

    @property
    def norms(self) -> int:
        """Every norm parameter: the blocks' norms and the final norm."""
        return self.group_total("norm")

    @property
    def matmul(self) -> int:
        """``N_mm``: weights that multiply a token's vector (Q, K, V, O or latent attention's projections,
        MLP, router, the ``k`` experts a token goes to and the shared ones, output head, the head counted
        even when tied). Forward FLOPs per token ≈ ``2·N_mm``."""
        n = sum(c.active_count for c in self.components if c.matmul)
        if self.config.core.tie_embeddings:
            n += self["token embedding"].count
        return n

    @property
    def matmul_total(self) -> int:
        """Every matmul weight, all experts included (= :attr:`matmul` for a dense model)."""
        n = sum(c.count for c in self.components if c.matmul)
        if self.config.core.tie_embeddings:
            n += self["token embedding"].count
        return n

    def summary(self) -> list[tuple[str, int, str]]:
        """The rows of the source chapter's table, (name, count, formula); "all layers",
        "embeddings + output" and "norms" partition "total". A mixture of experts adds its block, what
        one token uses of it, and the active count."""
        cfg = self.config
        att = self.components_of("attention")
        if cfg.mla:
            att_f = _join_formulas(att, per_layer=True)
        else:
            att_terms = ["2·d·d_k·(h + h_kv)"]
            att_terms += [
                c.per_layer_formula for c in att if not c.matmul and c.per_layer and c.per_layer_formula
            ]
            att_f = " + ".join(att_terms)
        dense = [c for c in self.components_of("mlp") if c.blocks == "dense"]
        moe = [c for c in self.components_of("mlp") if c.blocks == "moe"]
        rows = [("attention (per layer)", self.attention_per_layer, att_f)]
        if not self.has_moe:
            rows.append(("mlp (per layer)", self.mlp_per_layer, _join_formulas(dense, per_layer=True)))
            all_f = "L·(attention + mlp per layer)"
        else:
            if self.dense_mlp_per_layer:
                rows.append(
                    ("mlp (per layer, dense blocks)", self.dense_mlp_per_layer, _join_formulas(dense, True))
                )
            rows += [
                ("mixture of experts (per layer)", self.moe_per_layer, _join_formulas(moe, per_layer=True)),
                (
                    "mixture of experts, one token (per layer)",
                    self.moe_active_per_layer,
                    _join_formulas(moe, per_layer=True, active=True),
                ),
            ]
            all_f = "L·attention + L_dense·mlp + L_moe·mixture of experts"
        rows += [
            ("all layers", self.layers, all_f),
            (
                "embeddings + output",
                self.embeddings_and_head,
                _join_formulas([self["token embedding"], self["position embedding"], self["output head"]]),
            ),
            ("norms", self.norms, _join_formulas(self.components_of("norm"))),
            ("total", self.total, "all layers + embeddings + output + norms"),
            ("non-embedding", self.non_embedding, "total − (embeddings + output)"),
        ]
        if self.has_moe:
            rows.append(("active per token", self.active, self.active_formula))
        return rows

    def components_of(self, group: str) -> list[Component]:
        return [c for c in self.components if c.group == group]

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "active": self.active,
            "active_formula": self.active_formula,
            "active_without_embedding": self.active_without_embedding,
            "non_embedding": self.non_embedding,
            "embedding": self.embedding,
            "embeddings_and_head": self.embeddings_and_head,
            "per_layer": self.per_layer,
            "dense_per_layer": self.dense_per_layer,
            "attention_per_layer": self.attention_per_layer,
            "mlp_per_layer": self.mlp_per_layer,
            "dense_mlp_per_layer": self.dense_mlp_per_layer,
            "moe_per_layer": self.moe_per_layer,
            "moe_active_per_layer": self.moe_active_per_layer,
            "layers": self.layers,
            "norms": self.norms,
            "matmul": self.matmul,
            "matmul_total": self.matmul_total,
            "components": self.counts(),
            "active_components": self.active_counts(),
            "rows": [
                {
                    "name": c.name,
                    "group": c.group,
                    "count": c.count,
                    "per_layer": c.per_layer,
                    "formula": c.formula,
                    "per_layer_formula": c.per_layer_formula,
                    "blocks": c.blocks,
                    "active": c.active_count,
                    "active_formula": c.active_formula,
                }
                for c in self.components
            ],
            "summary": [{"name": n, "count": v, "formula": f} for n, v, f in self.summary()],
        }


def _join_formulas(parts: Iterable[Component], per_layer: bool = False, active: bool = False) -> str:
    terms = []
    for c in parts:
        if active and c.active is not None:
            f = c.active_per_layer_formula if per_layer else c.active_formula
        else:
            f = c.per_layer_formula if per_layer else c.formula
        if (c.per_layer if per_layer else c.count) and f:
            terms.append(f)
    return " + ".join(terms) if terms else "0"
