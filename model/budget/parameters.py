"""Parameters, counted exactly as :class:`model.nn.gpt.GPT` creates them, per component; and how many of
them one token uses (a mixture of experts leaves most experts idle).

Part of the budget calculator; :mod:`model.budget.arithmetic` states its conventions (what counts as a
parameter, Kaplan's non-embedding count) and is what callers import. The rows and the totals read from
them are :mod:`model.budget.breakdown`'s (re-exported here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from model.budget.breakdown import _GROUP, BLOCK_KINDS, COMPONENTS, Component, ParamBreakdown
from model.budget.checks import check, symbols
from model.config import GPTConfig
from model.config.parts import Term


def _times(n_symbol: str, f: str) -> str:
    """``L·f`` (``L·(f)`` when ``f`` is a sum)."""
    return f"{n_symbol}·({f})" if " " in f else f"{n_symbol}·{f}"


def _component(term: Term, n_blocks: Mapping[str, int], L_sym: Mapping[str, str]) -> Component:
    """The table row of a part's term: a model-level row as it is, a per-block one (its count and
    formula in one block of kind ``term.blocks``) times the ``n_blocks`` blocks of that kind (written
    ``L_sym``), and its active count likewise."""
    group = _GROUP[term.name]
    if term.blocks is None:
        return Component(term.name, group, term.count, term.formula, matmul=term.matmul)
    k, n, f = n_blocks[term.blocks], term.count, term.formula
    total_f = _times(L_sym[term.blocks], f) if n and k else term.zero_note
    c = Component(term.name, group, k * n, total_f, n, f if n else term.zero_note, term.matmul, term.blocks)
    if term.active is None:
        return c
    per, per_f = term.active
    return dataclasses.replace(
        c,
        active=k * per,
        active_formula=_times(L_sym[term.blocks], per_f),
        active_per_layer=per,
        active_per_layer_formula=per_f,
    )


def parameters_by_part(cfg: GPTConfig) -> dict[str, tuple[Component, ...]]:
    """The rows of :func:`parameters`, by the part of the config that creates them (``"core"``,
    ``"attention"``, ``"feed-forward"``, ``"norms"``, ``"positions"``: each part's ``title``), each part's
    in its own order. Each part's docstring (:mod:`model.config.parts`) gives its formulas.

    Raises :class:`ConfigError` listing every problem when the config is invalid or lacks V.
    """
    check(cfg)
    s = symbols(cfg)
    L, L_moe = s["L"], s.get("L_moe", 0)
    moe = cfg.feed_forward.n_experts is not None
    n_blocks = {"all": L, "dense": L - L_moe, "moe": L_moe}
    L_sym = {"all": "L", "dense": "L_dense" if moe else "L", "moe": "L_moe"}
    return {
        part.title: tuple(_component(t, n_blocks, L_sym) for t in part.parameters(cfg, s))
        for part in cfg.parts
    }


def parameters(cfg: GPTConfig) -> ParamBreakdown:
    """Exact parameter counts per component: the rows of every part of the config
    (:func:`parameters_by_part`) in table order (:data:`COMPONENTS`).

    Per block: the attention sublayer (:class:`~model.config.parts.AttentionPart`: Q, K, V, O, biases,
    the learned scale, sinks, QK-norm; or latent attention's projections and norms), the feed-forward
    sublayer (:class:`~model.config.parts.FeedForwardPart`: a dense MLP, or a router and experts), the
    norms (:class:`~model.config.parts.NormPart`). Model level: token embedding ``V·d`` and the output
    head ``V·d`` when untied (:class:`~model.config.parts.CorePart`), the learned position table
    ``T_max·d`` (:class:`~model.config.parts.PositionPart`), the final norm (``NormPart``). Partial
    rotary, sliding windows, soft-capping, the router rule and its loss, grouped routing, gpt-oss's
    clamped SwiGLU, the score scale and parallel blocks add no parameters (RoPE is a fixed table).

    Raises :class:`ConfigError` listing every problem when the config is invalid or lacks V.
    """
    comps = [c for rows in parameters_by_part(cfg).values() for c in rows]
    order = {name: i for i, (name, _) in enumerate(COMPONENTS)}
    return ParamBreakdown(cfg, tuple(sorted(comps, key=lambda c: order[c.name])))


__all__ = ["BLOCK_KINDS", "COMPONENTS", "Component", "ParamBreakdown", "parameters", "parameters_by_part"]
