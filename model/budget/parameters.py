"""Parameters, counted exactly as :class:`model.nn.gpt.GPT` creates them, per component; and how many of
them one token uses (a mixture of experts leaves most experts idle).

Part of the budget calculator; :mod:`model.budget.arithmetic` states its conventions (what counts as a
parameter, Kaplan's non-embedding count) and is what callers import. The rows and the totals read from
them are :mod:`model.budget.breakdown`'s (re-exported here).
"""

from __future__ import annotations

import dataclasses

from model.budget.breakdown import _GROUP, BLOCK_KINDS, COMPONENTS, Component, ParamBreakdown
from model.budget.checks import check, symbols
from model.config import GPTConfig


def _times(n_symbol: str, f: str) -> str:
    """``L·f`` (``L·(f)`` when ``f`` is a sum)."""
    return f"{n_symbol}·({f})" if " " in f else f"{n_symbol}·{f}"


def _mlp(cfg: GPTConfig, d: int, width: int, w: str) -> tuple[int, str, int, str]:
    """One MLP of hidden ``width`` (written ``w``) of the config's kind: (weights, formula, biases,
    formula). Gated (swiglu/geglu): three matrices ``3·d·w`` and biases ``2·w + d``; else two,
    ``2·d·w`` and ``w + d``; biases only with ``bias="all"``."""
    gated = cfg.mlp in ("swiglu", "geglu")
    m = 3 if gated else 2
    weights, weights_f = m * d * width, f"{m}·d·{w}"
    if cfg.bias != "all":
        return weights, weights_f, 0, f"bias={cfg.bias}"
    w_ = f"({w})" if " " in w or "·" in w else w
    return (
        weights,
        weights_f,
        (2 * width + d) if gated else (width + d),
        (f"2·{w_} + d" if gated else f"{w} + d"),
    )


def parameters(cfg: GPTConfig) -> ParamBreakdown:
    """Exact parameter counts per component.

    Per layer, standard attention: Q ``d·h·d_k``, K and V ``d·h_kv·d_k`` each, O ``h·d_k·d``; biases
    (``bias="all"``: ``h·d_k + 2·h_kv·d_k + d``; ``"qkv"``: ``h·d_k + 2·h_kv·d_k``); per-head scale or
    gain ``h`` (attn_scale learned or qk_norm); QK-norm (``qk_rmsnorm``, Qwen3) ``2·d_k`` (one [d_k]
    weight for all query heads, one for all key heads), or over all heads (``qk_norm_scope="all"``,
    OLMo 2) ``(h + h_kv)·d_k``; sinks ``h`` (``attn_sinks``, gpt-oss).

    Multi-head latent attention (``kv_lora_rank`` = r; DeepSeek-V2/V3), heads of ``d_N + d_R`` (q·k) and
    ``d_v`` (values): latent Q down ``d·r_q`` and up ``r_q·h·(d_N + d_R)`` with ``q_lora_rank`` = r_q
    (else Q ``d·h·(d_N + d_R)``), latent KV down ``d·(r + d_R)`` (the latent and the one shared rotary
    key), latent KV up ``r·h·(d_N + d_v)``, O ``h·d_v·d``; latent norms ``r_q + r`` (RMSNorm weights);
    biases, with qkv biases, on every projection but O, and on O with ``bias="all"``.

    Feed-forward: a dense MLP ``2·d·d_ff`` (gelu/relu) or ``3·d·d_ff`` (swiglu/geglu), biases with
    ``bias="all"`` ``d_ff + d`` or ``2·d_ff + d``. A mixture-of-experts block (``n_experts`` = E, all but
    the ``moe_dense_layers`` first): router ``d·E``, E experts each the same MLP of width ``d_e``
    (``E·3·d·d_e`` gated), a shared MLP of width ``s·d_e`` when ``n_shared_experts`` = s, and with
    ``bias="all"`` their biases (router ``E``, each expert's, the shared one's); DeepSeek-V3's
    ``router_choice_bias`` ``E``. One token uses the router, ``k`` experts and the shared ones.

    Norms: two per block ``2·d`` (pre, post, output; RMSNorm, with or without Gemma's 1 + γ) or four
    (sandwich, Gemma 2/3) ``4·d``, twice that for LayerNorm with a bias. Partial rotary, sliding
    windows, soft-capping, the router rule and its loss, grouped routing, gpt-oss's clamped SwiGLU,
    the score scale and parallel blocks add no parameters (RoPE is a fixed table, not a weight).
    Model level: token embedding ``V·d``, learned position table ``T_max·d``, final norm (not with
    post-norm) ``d`` or ``2·d``, output head ``V·d`` when untied.

    Raises :class:`ConfigError` listing every problem when the config is invalid or lacks V.
    """
    check(cfg)
    s = symbols(cfg)
    L, d, h, h_kv, d_k, d_ff, V, T_max = (s[k] for k in ("L", "d", "h", "h_kv", "d_k", "d_ff", "V", "T_max"))
    moe = cfg.n_experts is not None
    n_blocks = {"all": L, "dense": L - s.get("L_moe", 0), "moe": s.get("L_moe", 0)}
    L_sym = {"all": "L", "dense": "L_dense" if moe else "L", "moe": "L_moe"}

    def layer(
        name: str,
        n: int,
        f: str,
        *,
        matmul: bool = False,
        zero_note: str = "",
        blocks: str = "all",
        active: tuple[int, str] | None = None,
    ) -> Component:
        """A per-block component of ``n`` (formula ``f``) in each block of kind ``blocks``; ``active``:
        (count, formula) one token uses in one such block."""
        k = n_blocks[blocks]
        total_f = _times(L_sym[blocks], f) if n and k else zero_note
        c = Component(name, _GROUP[name], k * n, total_f, n, f if n else zero_note, matmul, blocks)
        if active is None:
            return c
        per, per_f = active
        return dataclasses.replace(
            c,
            active=k * per,
            active_formula=_times(L_sym[blocks], per_f),
            active_per_layer=per,
            active_per_layer_formula=per_f,
        )

    ln = cfg.norm == "layernorm" and cfg.norm_bias  # a norm with a shift β as well as a scale γ
    qkv_bias = cfg.bias in ("all", "qkv")
    o_bias = cfg.bias == "all"
    comps: list[Component] = [
        Component("token embedding", "embedding", V * d, "V·d"),
        Component(
            "position embedding",
            "embedding",
            T_max * d if cfg.positions == "learned" else 0,
            "T_max·d" if cfg.positions == "learned" else f"{cfg.positions}: no learned table",
        ),
    ]

    # ---- attention -------------------------------------------------------------------------------
    if not cfg.mla:
        att_bias, att_bias_f = 0, "bias=none"
        if cfg.bias == "all":
            att_bias, att_bias_f = h * d_k + 2 * h_kv * d_k + d, "h·d_k + 2·h_kv·d_k + d"
        elif cfg.bias == "qkv":
            att_bias, att_bias_f = h * d_k + 2 * h_kv * d_k, "h·d_k + 2·h_kv·d_k"
        comps += [
            layer("attention Q", d * h * d_k, "d·h·d_k", matmul=True),
            layer("attention K", d * h_kv * d_k, "d·h_kv·d_k", matmul=True),
            layer("attention V", d * h_kv * d_k, "d·h_kv·d_k", matmul=True),
            layer("attention O", h * d_k * d, "h·d_k·d", matmul=True),
            layer("attention biases", att_bias, att_bias_f, zero_note=att_bias_f),
        ]
    else:
        r, d_N, d_R, d_v = s["r"], s["d_N"], s["d_R"], s["d_v"]
        r_q = cfg.q_lora_rank
        qk = d_N + d_R
        from_latent = "MLA: from the latent (latent KV up)"
        if r_q is None:
            comps.append(layer("attention Q", d * h * qk, "d·h·(d_N + d_R)", matmul=True))
        else:
            comps += [
                layer("attention Q", 0, "", zero_note="MLA: latent Q down and up"),
                layer("latent Q down", d * r_q, "d·r_q", matmul=True),
                layer("latent Q up", r_q * h * qk, "r_q·h·(d_N + d_R)", matmul=True),
            ]
        comps += [
            layer("attention K", 0, "", zero_note=from_latent),
            layer("attention V", 0, "", zero_note=from_latent),
            layer("latent KV down", d * (r + d_R), "d·(r + d_R)", matmul=True),
            layer("latent KV up", r * h * (d_N + d_v), "r·h·(d_N + d_v)", matmul=True),
            layer("attention O", h * d_v * d, "h·d_v·d", matmul=True),
        ]
        bias_terms: list[tuple[int, str]] = []
        if qkv_bias:
            if r_q is not None:
                bias_terms.append((r_q, "r_q"))
            bias_terms += [
                (h * qk, "h·(d_N + d_R)"),
                (r + d_R, "r + d_R"),
                (h * (d_N + d_v), "h·(d_N + d_v)"),
            ]
        if o_bias:
            bias_terms.append((d, "d"))
        comps.append(
            layer(
                "attention biases",
                sum(n for n, _ in bias_terms),
                " + ".join(f for _, f in bias_terms),
                zero_note=f"bias={cfg.bias}",
            )
        )
    scale = h if cfg.attn_scale in ("learned", "qk_norm") else 0
    comps.append(layer("attention scale", scale, "h", zero_note=f"attn_scale={cfg.attn_scale}"))
    if cfg.attn_sinks:
        comps.append(layer("attention sinks", h, "h"))

    # ---- feed-forward ----------------------------------------------------------------------------
    mlp_w, mlp_f, mlp_b, mlp_b_f = _mlp(cfg, d, d_ff, "d_ff")
    no_dense = "every block has experts"
    comps += [
        layer(
            "mlp weights",
            mlp_w if n_blocks["dense"] else 0,
            mlp_f,
            matmul=True,
            blocks="dense",
            zero_note=no_dense,
        ),
        layer(
            "mlp biases",
            mlp_b if n_blocks["dense"] else 0,
            mlp_b_f,
            blocks="dense",
            zero_note=mlp_b_f if n_blocks["dense"] else no_dense,
        ),
    ]
    if moe:
        E, k, d_e, n_shared = s["E"], s["k"], s["d_e"], s.get("s", 0)
        ex_w, ex_f, ex_b, ex_b_f = _mlp(cfg, d, d_e, "d_e")
        comps += [
            layer("router", d * E, "d·E", matmul=True, blocks="moe"),
        ]
        if cfg.router_choice_bias:  # DeepSeek-V3's e_score_correction_bias: chooses, multiplies nothing
            comps.append(layer("router choice bias", E, "E", blocks="moe"))
        comps += [
            layer(
                "experts",
                E * ex_w,
                f"E·{ex_f}",
                matmul=True,
                blocks="moe",
                active=(k * ex_w, f"k·{ex_f}"),
            ),
        ]
        if n_shared:
            sh_w, sh_f, sh_b, sh_b_f = _mlp(cfg, d, n_shared * d_e, "s·d_e")
            comps.append(layer("shared experts", sh_w, sh_f, matmul=True, blocks="moe"))
        if cfg.bias == "all":
            one = f"({ex_b_f})"
            terms = [(E, "E"), (E * ex_b, f"E·{one}")]
            act_terms = [(E, "E"), (k * ex_b, f"k·{one}")]
            if n_shared:
                terms.append((sh_b, sh_b_f))
                act_terms.append((sh_b, sh_b_f))
            comps.append(
                layer(
                    "expert biases",
                    sum(n for n, _ in terms),
                    " + ".join(f for _, f in terms),
                    blocks="moe",
                    active=(sum(n for n, _ in act_terms), " + ".join(f for _, f in act_terms)),
                )
            )

    # ---- norms and the model level ---------------------------------------------------------------
    n_norms = 4 if cfg.norm_position == "sandwich" else 2
    per_norm = 2 if ln else 1
    comps.append(layer("norms", n_norms * per_norm * d, f"{n_norms * per_norm}·d"))
    if cfg.qk_rmsnorm and cfg.qk_norm_scope == "all":  # OLMo 2: over all heads' q and k
        comps.append(layer("qk norms", (h + h_kv) * d_k, "(h + h_kv)·d_k"))
    else:
        comps.append(layer("qk norms", 2 * d_k if cfg.qk_rmsnorm else 0, "2·d_k", zero_note="qk_rmsnorm off"))
    if cfg.mla:
        r_q = cfg.q_lora_rank
        comps.append(layer("latent norms", (r_q or 0) + s["r"], "r_q + r" if r_q is not None else "r"))
    final = cfg.norm_position != "post"
    comps += [
        Component(
            "final norm",
            "norm",
            per_norm * d if final else 0,
            ("2·d" if ln else "d") if final else "post-LN: blocks end in a norm",
        ),
        Component(
            "output head",
            "head",
            0 if cfg.tie_embeddings else V * d,
            "tied: is the token embedding" if cfg.tie_embeddings else "V·d",
            matmul=True,
        ),
    ]
    order = {name: i for i, (name, _) in enumerate(COMPONENTS)}
    return ParamBreakdown(cfg, tuple(sorted(comps, key=lambda c: order[c.name])))


__all__ = ["BLOCK_KINDS", "COMPONENTS", "Component", "ParamBreakdown", "parameters"]
