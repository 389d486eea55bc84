"""Where each tensor of a family's checkpoint goes in our model (:func:`family_entries`).

One :class:`~model.io.weights.WeightMap` per tensor a ``model_type`` file must hold for a config: its
name, shape and our parameter(s), with the fused tensors (GPT-NeoX's per-head QKV, Phi-3's QKV and
gate-up, gpt-oss's interleaved experts) split and DeepSeek's interleaved rotary rows reordered. The
table of names is in :mod:`model.io.hf.families`' docstring.
"""

from __future__ import annotations

from model.config import GPTConfig
from model.io.weights import WeightMap, vocab_of


def family_entries(
    model_type: str, cfg: GPTConfig, *, rope_interleave: bool = True, stacked_experts: bool = True
) -> list[WeightMap]:
    """The tensors a ``model_type`` file must hold for ``cfg`` and where each goes (``lm_head`` included
    when untied); ``rope_interleave``: latent attention's rotary rows are stored in pairs (DeepSeek's
    ``rope_interleave``, its default), reordered to ours; ``stacked_experts``: gpt-oss's experts are
    transformers' stacked ``gate_up_proj`` and ``down_proj`` (False: one ``experts.e.{gate,up,down}_proj``
    each, as a GGUF file's stacks are split, :func:`model.io.gguf.mla.mla_expert_header`)."""
    if model_type == "gpt_neox":
        return _neox_entries(cfg)
    d, V = cfg.core.d_model, vocab_of(cfg)
    p = "model."
    es = [WeightMap(p + "embed_tokens.weight", (V, d), ("tok_emb.weight",))]
    for i in range(cfg.core.n_layers):
        t, b = f"{p}layers.{i}.", f"blocks.{i}."
        es += _norm_entries(cfg, t, b)
        es += (
            _latent_entries(cfg, t, b, rope_interleave)
            if cfg.mla
            else _attention_entries(model_type, cfg, t, b)
        )
        if cfg.is_moe_layer(i):
            es += _moe_entries(model_type, cfg, t, b, stacked_experts)
        else:
            es += _mlp_entries(model_type, cfg, t + "mlp.", b + "mlp.", cfg.hidden)
    es.append(WeightMap(p + "norm.weight", (d,), ("norm_f.weight",)))
    if not cfg.core.tie_embeddings:
        es.append(WeightMap("lm_head.weight", (V, d), ("lm_head.weight",)))
    return es


def _neox_entries(cfg: GPTConfig) -> list[WeightMap]:
    d, dff, V = cfg.core.d_model, cfg.hidden, vocab_of(cfg)
    H, d_k = cfg.attention.n_heads, cfg.d_head
    p = "gpt_neox."
    es = [WeightMap(p + "embed_in.weight", (V, d), ("tok_emb.weight",))]
    for i in range(cfg.core.n_layers):
        t, b = f"{p}layers.{i}.", f"blocks.{i}."
        qkv = tuple(f"{b}attn.{n}_proj" for n in "qkv")
        es += [
            WeightMap(f"{t}{theirs}.{kind}", (d,), (f"{b}{ours}.{kind}",))
            for theirs, ours in (("input_layernorm", "norm1"), ("post_attention_layernorm", "norm2"))
            for kind in ("weight", "bias")
        ]
        es.append(
            WeightMap(
                t + "attention.query_key_value.weight",
                (3 * H * d_k, d),
                tuple(n + ".weight" for n in qkv),
                heads=H,
            )
        )
        es.append(
            WeightMap(
                t + "attention.query_key_value.bias", (3 * H * d_k,), tuple(n + ".bias" for n in qkv), heads=H
            )
        )
        for theirs, ours, shape in (
            ("attention.dense", "attn.o_proj", (d, H * d_k)),
            ("mlp.dense_h_to_4h", "mlp.fc_in", (dff, d)),
            ("mlp.dense_4h_to_h", "mlp.fc_out", (d, dff)),
        ):
            es.append(WeightMap(f"{t}{theirs}.weight", shape, (f"{b}{ours}.weight",)))
            es.append(WeightMap(f"{t}{theirs}.bias", shape[:1], (f"{b}{ours}.bias",)))
    es.append(WeightMap(p + "final_layer_norm.weight", (d,), ("norm_f.weight",)))
    es.append(WeightMap(p + "final_layer_norm.bias", (d,), ("norm_f.bias",)))
    if not cfg.core.tie_embeddings:
        es.append(WeightMap("embed_out.weight", (V, d), ("lm_head.weight",)))
    return es


def _norm_entries(cfg: GPTConfig, t: str, b: str) -> list[WeightMap]:
    """The block's norms: pre (Llama), sandwich (Gemma 2/3: four) or output (OLMo 2: after each sublayer)."""
    names = {
        "pre": (("input_layernorm", "norm1"), ("post_attention_layernorm", "norm2")),
        "sandwich": (
            ("input_layernorm", "norm1"),
            ("post_attention_layernorm", "post_norm1"),
            ("pre_feedforward_layernorm", "norm2"),
            ("post_feedforward_layernorm", "post_norm2"),
        ),
        "output": (("post_attention_layernorm", "norm1"), ("post_feedforward_layernorm", "norm2")),
    }[cfg.normalization.norm_position]
    return [
        WeightMap(f"{t}{theirs}.weight", (cfg.core.d_model,), (f"{b}{ours}.weight",))
        for theirs, ours in names
    ]


def _attention_entries(model_type: str, cfg: GPTConfig, t: str, b: str) -> list[WeightMap]:
    d, H, H_kv, d_k = cfg.core.d_model, cfg.attention.n_heads, cfg.kv_heads, cfg.d_head
    qkv_bias, o_bias = cfg.core.bias in ("all", "qkv"), cfg.core.bias == "all"
    es: list[WeightMap] = []
    rows = {"q": H * d_k, "k": H_kv * d_k, "v": H_kv * d_k}
    if model_type == "phi3":  # [W_Q; W_K; W_V] in one matrix
        es.append(
            WeightMap(
                t + "self_attn.qkv_proj.weight",
                (sum(rows.values()), d),
                tuple(f"{b}attn.{n}_proj.weight" for n in rows),
                sizes=tuple(rows.values()),
            )
        )
    else:
        for n, r in rows.items():
            es.append(WeightMap(f"{t}self_attn.{n}_proj.weight", (r, d), (f"{b}attn.{n}_proj.weight",)))
            if qkv_bias:
                es.append(WeightMap(f"{t}self_attn.{n}_proj.bias", (r,), (f"{b}attn.{n}_proj.bias",)))
    es.append(WeightMap(t + "self_attn.o_proj.weight", (d, H * d_k), (b + "attn.o_proj.weight",)))
    if o_bias:
        es.append(WeightMap(t + "self_attn.o_proj.bias", (d,), (b + "attn.o_proj.bias",)))
    if cfg.attention.qk_rmsnorm:
        every = cfg.attention.qk_norm_scope == "all"  # OLMo 2: over all heads
        es += [
            WeightMap(
                f"{t}self_attn.{n}_norm.weight", (rows[n] if every else d_k,), (f"{b}attn.{n}_norm.weight",)
            )
            for n in "qk"
        ]
    if cfg.attention.attn_sinks:
        es.append(WeightMap(t + "self_attn.sinks", (H,), (b + "attn.sinks",)))
    return es


def _deinterleaved(n: int, rotary: int, every: int, start: int) -> tuple[int, ...]:
    """Rows of ``n`` in groups of ``every`` whose last ``rotary`` (from ``start`` in the group) are
    pairs ``(2i, 2i+1)`` (DeepSeek's rope_interleave), reordered ``[evens; odds]``: rotate-half's."""
    out: list[int] = []
    for g in range(0, n, every):
        out += range(g, g + start)
        out += range(g + start, g + start + rotary, 2)
        out += range(g + start + 1, g + start + rotary, 2)
        out += range(g + start + rotary, g + every)
    return tuple(out)


def _latent_entries(cfg: GPTConfig, t: str, b: str, interleaved: bool) -> list[WeightMap]:
    """DeepSeek-V3's multi-head latent attention (its rotary rows de-interleaved when ``interleaved``:
    module docstring)."""
    d, H, r = cfg.core.d_model, cfg.attention.n_heads, int(cfg.attention.kv_lora_rank or 0)
    nope, rope, qk, dv = cfg.qk_nope_dim, cfg.qk_rope_dim, cfg.qk_dim, cfg.v_dim
    a = t + "self_attn."
    q_rows = _deinterleaved(H * qk, rope, qk, nope) if interleaved else ()
    kv_rows = _deinterleaved(r + rope, rope, r + rope, r) if interleaved else ()
    es: list[WeightMap] = []
    if cfg.attention.q_lora_rank:
        rq = cfg.attention.q_lora_rank
        es += [
            WeightMap(a + "q_a_proj.weight", (rq, d), (b + "attn.q_a.weight",)),
            WeightMap(a + "q_a_layernorm.weight", (rq,), (b + "attn.q_a_norm.weight",)),
            WeightMap(a + "q_b_proj.weight", (H * qk, rq), (b + "attn.q_b.weight",), rows=q_rows),
        ]
    else:
        es.append(WeightMap(a + "q_proj.weight", (H * qk, d), (b + "attn.q_proj.weight",), rows=q_rows))
    es += [
        WeightMap(
            a + "kv_a_proj_with_mqa.weight",
            (r + rope, d),
            (b + "attn.kv_a.weight",),
            rows=kv_rows,
        ),
        WeightMap(a + "kv_a_layernorm.weight", (r,), (b + "attn.kv_a_norm.weight",)),
        WeightMap(a + "kv_b_proj.weight", (H * (nope + dv), r), (b + "attn.kv_b.weight",)),
        WeightMap(a + "o_proj.weight", (d, H * dv), (b + "attn.o_proj.weight",)),
    ]
    return es


def _mlp_entries(model_type: str, cfg: GPTConfig, t: str, b: str, width: int) -> list[WeightMap]:
    """A gated MLP of ``width`` at ``t`` (theirs, ``...mlp.``) → ``b`` (ours): gate, up, down."""
    d = cfg.core.d_model
    if model_type == "phi3":  # [W_gate; W_up] in one matrix
        return [
            WeightMap(t + "gate_up_proj.weight", (2 * width, d), (b + "w_gate.weight", b + "w_up.weight")),
            WeightMap(t + "down_proj.weight", (d, width), (b + "w_down.weight",)),
        ]
    names = ("w1", "w3", "w2") if model_type == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    es: list[WeightMap] = []
    for theirs, ours, shape in zip(names, ("w_gate", "w_up", "w_down"), ((width, d), (width, d), (d, width))):
        es.append(WeightMap(f"{t}{theirs}.weight", shape, (f"{b}{ours}.weight",)))
        if cfg.core.bias == "all":
            es.append(WeightMap(f"{t}{theirs}.bias", shape[:1], (f"{b}{ours}.bias",)))
    return es


def _moe_entries(model_type: str, cfg: GPTConfig, t: str, b: str, stacked: bool = True) -> list[WeightMap]:
    """A mixture-of-experts block: the router, the experts (one by one, or gpt-oss's ``stacked`` ones),
    the shared experts and DeepSeek's choice bias."""
    d, E, f = cfg.core.d_model, int(cfg.feed_forward.n_experts or 0), cfg.expert_hidden
    if model_type == "gpt_oss":
        m, x = t + "mlp.", b + "mlp.experts."
        router = [
            WeightMap(m + "router.weight", (E, d), (b + "mlp.gate.weight",)),
            WeightMap(m + "router.bias", (E,), (b + "mlp.gate.bias",)),
        ]
        if not stacked:  # a GGUF file's: each expert a gated MLP of its own
            return [
                *router,
                *(
                    w
                    for e in range(E)
                    for w in _mlp_entries(model_type, cfg, f"{m}experts.{e}.", f"{x}{e}.", f)
                ),
            ]
        return [
            *router,
            WeightMap(
                m + "experts.gate_up_proj",
                (E, d, 2 * f),
                tuple(f"{x}{e}.{n}.weight" for e in range(E) for n in ("w_gate", "w_up")),
                transpose=True,
                interleaved=True,
                stacked=True,
            ),
            WeightMap(
                m + "experts.gate_up_proj_bias",
                (E, 2 * f),
                tuple(f"{x}{e}.{n}.bias" for e in range(E) for n in ("w_gate", "w_up")),
                interleaved=True,
                stacked=True,
            ),
            WeightMap(
                m + "experts.down_proj",
                (E, f, d),
                tuple(f"{x}{e}.w_down.weight" for e in range(E)),
                transpose=True,
                stacked=True,
            ),
            WeightMap(
                m + "experts.down_proj_bias",
                (E, d),
                tuple(f"{x}{e}.w_down.bias" for e in range(E)),
                stacked=True,
            ),
        ]
    m = t + ("block_sparse_moe." if model_type == "mixtral" else "mlp.")
    es = [WeightMap(m + "gate.weight", (E, d), (b + "mlp.gate.weight",))]
    if cfg.feed_forward.router_choice_bias:
        es.append(WeightMap(m + "gate.e_score_correction_bias", (E,), (b + "mlp.choice_bias",)))
    for e in range(E):
        es += _mlp_entries(model_type, cfg, f"{m}experts.{e}.", f"{b}mlp.experts.{e}.", f)
    if cfg.feed_forward.n_shared_experts:
        shared = "shared_expert." if model_type == "qwen2_moe" else "shared_experts."
        es += _mlp_entries(model_type, cfg, m + shared, b + "mlp.shared.", cfg.shared_hidden)
    if cfg.feed_forward.shared_expert_gate:  # Qwen2-MoE's σ gate of the shared expert: [1, d]
        es.append(WeightMap(m + "shared_expert_gate.weight", (1, d), (b + "mlp.shared_gate.weight",)))
    return es
