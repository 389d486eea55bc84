"""GPT-2's layout, exactly: a Hugging Face ``config.json`` as ours (:func:`gpt2_config`) and where its
tensors go (:func:`gpt2_entries`, :func:`gpt2_layout`), shared by the loaders of Hugging Face folders
(:func:`model.io.hf.folder.load_hf_gpt2`), nanoGPT checkpoints and GGUF files, which build through
:func:`model.io.build.build_model`. No loading here.

GPT-2 is the same GPT as ours (Pre-LN, learned positions, tied head); the mapping, with
``d = n_embd``, layer ``i``:

======================================  =======================================  ==================
theirs                                  ours                                     how
======================================  =======================================  ==================
``wte`` [V, d], ``wpe`` [C, d]          ``tok_emb``, ``pos_emb``                 as is
``h.i.ln_1`` / ``ln_2`` / ``ln_f``      ``blocks.i.norm1`` / ``norm2``, ``norm_f``  as is
``h.i.attn.c_attn`` [d, 3d] | [3d, d]   ``q_proj``, ``k_proj``, ``v_proj`` [d, d]  rows split in 3
``h.i.attn.c_proj``                     ``o_proj``
``h.i.mlp.c_fc``, ``c_proj``            ``mlp.fc_in``, ``fc_out``
``lm_head``                             ``tok_emb`` (tied) or ``lm_head``
======================================  =======================================  ==================


Hugging Face stores these matrices as ``Conv1D`` weights ``[in, out]`` (``y = x W + b``), so each is
transposed to ``nn.Linear``'s ``[out, in]``; nanoGPT's are already ``nn.Linear``. GPT-2 uses GELU's
tanh approximation (``activation_function: "gelu_new"``) and LayerNorm ε = ``layer_norm_epsilon``.
"""

from __future__ import annotations

from typing import Any

from model.config import ConfigError, GPTConfig
from model.io.loaded import CheckpointError
from model.io.weights import Layout, TensorSource, WeightMap, vocab_of


def gpt2_entries(cfg: GPTConfig, prefix: str, *, conv1d: bool, linear_bias: bool) -> list[WeightMap]:
    """The tensors a GPT-2 layout must hold for ``cfg`` (LayerNorm biases and ``lm_head`` left to callers)."""
    d, dff, C, V = cfg.core.d_model, cfg.hidden, cfg.core.context_length, vocab_of(cfg)

    def w(src: str, out_f: int, in_f: int, dst: tuple[str, ...]) -> WeightMap:
        shape = (in_f, out_f) if conv1d else (out_f, in_f)
        return WeightMap(prefix + src, shape, dst, transpose=conv1d)

    es = [
        WeightMap(prefix + "wte.weight", (V, d), ("tok_emb.weight",)),
        WeightMap(prefix + "wpe.weight", (C, d), ("pos_emb.weight",)),
    ]
    for i in range(cfg.core.n_layers):
        h, b = f"h.{i}.", f"blocks.{i}."
        qkv = tuple(f"{b}attn.{n}_proj" for n in "qkv")
        es.append(WeightMap(prefix + h + "ln_1.weight", (d,), (b + "norm1.weight",)))
        es.append(WeightMap(prefix + h + "ln_2.weight", (d,), (b + "norm2.weight",)))
        es.append(w(h + "attn.c_attn.weight", 3 * d, d, tuple(n + ".weight" for n in qkv)))
        es.append(w(h + "attn.c_proj.weight", d, d, (b + "attn.o_proj.weight",)))
        es.append(w(h + "mlp.c_fc.weight", dff, d, (b + "mlp.fc_in.weight",)))
        es.append(w(h + "mlp.c_proj.weight", d, dff, (b + "mlp.fc_out.weight",)))
        if linear_bias:
            es.append(WeightMap(prefix + h + "attn.c_attn.bias", (3 * d,), tuple(n + ".bias" for n in qkv)))
            es.append(WeightMap(prefix + h + "attn.c_proj.bias", (d,), (b + "attn.o_proj.bias",)))
            es.append(WeightMap(prefix + h + "mlp.c_fc.bias", (dff,), (b + "mlp.fc_in.bias",)))
            es.append(WeightMap(prefix + h + "mlp.c_proj.bias", (d,), (b + "mlp.fc_out.bias",)))
    es.append(WeightMap(prefix + "ln_f.weight", (d,), ("norm_f.weight",)))
    return es


def ln_bias_entries(cfg: GPTConfig, prefix: str) -> list[WeightMap]:
    d = cfg.core.d_model
    es = []
    for i in range(cfg.core.n_layers):
        for theirs, ours in (("ln_1", "norm1"), ("ln_2", "norm2")):
            es.append(WeightMap(f"{prefix}h.{i}.{theirs}.bias", (d,), (f"blocks.{i}.{ours}.bias",)))
    es.append(WeightMap(prefix + "ln_f.bias", (d,), ("norm_f.bias",)))
    return es


#: HF activation_function -> (our mlp, our gelu_approx). gelu_new, gelu_fast and gelu_pytorch_tanh are
#: the same function 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
_GPT2_ACTIVATIONS = {
    "gelu_new": ("gelu", "tanh"),
    "gelu_pytorch_tanh": ("gelu", "tanh"),
    "gelu_fast": ("gelu", "tanh"),
    "gelu": ("gelu", "none"),
    "relu": ("relu", "none"),
}

#: HF's alternative names for GPT-2's config fields (GPT2Config.attribute_map).
_GPT2_ALIASES = {
    "n_embd": "hidden_size",
    "n_head": "num_attention_heads",
    "n_layer": "num_hidden_layers",
    "n_positions": "max_position_embeddings",
}


def gpt2_config(hf: dict[str, Any], *, source: str = "config.json") -> GPTConfig:
    """Our config for a Hugging Face GPT-2 ``config.json`` (HF's defaults for what it omits); its
    refusals name ``source``, what ``hf`` was read from.

    ``n_layer, n_head, n_embd, n_positions, vocab_size, n_inner`` -> ``n_layers, n_heads, d_model,
    context_length, vocab_size, d_ff``; ``activation_function`` -> ``mlp`` + ``gelu_approx``;
    ``layer_norm_epsilon`` -> ``norm_eps``; ``scale_attn_weights`` -> ``attn_scale`` (sqrt_dk/none);
    ``tie_word_embeddings``; ``resid_pdrop`` -> ``dropout``. Raises :class:`CheckpointError`.
    """
    problems: list[str] = []

    def field(name: str, default: Any = None) -> Any:
        if name in hf:
            return hf[name]
        alias = _GPT2_ALIASES.get(name)
        if alias and alias in hf:
            return hf[alias]
        if default is None:
            problems.append(f"{name} is missing")
        return default

    sizes = {n: field(n) for n in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")}
    act = hf.get("activation_function", "gelu_new")
    if act not in _GPT2_ACTIVATIONS:
        problems.append(f"activation_function {act!r} is not one of {', '.join(_GPT2_ACTIVATIONS)}")
    if hf.get("add_cross_attention"):
        problems.append("add_cross_attention is set: an encoder-decoder GPT-2 is not a decoder-only GPT")
    if hf.get("scale_attn_by_inverse_layer_idx"):
        problems.append("scale_attn_by_inverse_layer_idx (scores divided by layer+1) is not supported")
    if problems:
        raise CheckpointError(f"{source}: " + "; ".join(problems))
    mlp, approx = _GPT2_ACTIVATIONS[act]
    cfg = GPTConfig(
        vocab_size=sizes["vocab_size"],
        context_length=sizes["n_positions"],
        n_layers=sizes["n_layer"],
        d_model=sizes["n_embd"],
        n_heads=sizes["n_head"],
        d_ff=hf.get("n_inner"),
        mlp=mlp,
        norm="layernorm",
        norm_position="pre",
        positions="learned",
        attn_scale="sqrt_dk" if hf.get("scale_attn_weights", True) else "none",
        causal=True,
        bias="all",
        tie_embeddings=bool(hf.get("tie_word_embeddings", True)),
        dropout=float(hf.get("resid_pdrop", 0.1)),
        norm_eps=float(hf.get("layer_norm_epsilon", 1e-5)),
        gelu_approx=approx,
    )
    try:
        return cfg.validate()
    except ConfigError as exc:
        raise CheckpointError(f"{source}: " + "; ".join(exc.problems)) from None


def gpt2_layout(
    cfg: GPTConfig, src: TensorSource, fname: str, prefix: str, *, conv1d: bool, what: str
) -> Layout:
    """Where GPT-2's tensors in ``src`` go (named ``prefix + "h.0.attn.c_attn.weight"`` etc.;
    ``conv1d``: stored ``[in, out]`` as Hugging Face does, else ``[out, in]`` as GGUF does), every
    linear layer and LayerNorm biased, the head tied or not as ``cfg`` (from ``what``) says; the rows
    listed when the build step asks."""
    if prefix + "wte.weight" not in src:
        raise CheckpointError(f"{fname} has no token embedding ({prefix}wte.weight): not GPT-2 weights")
    tied = cfg.core.tie_embeddings

    def entries() -> list[WeightMap]:
        rows = gpt2_entries(cfg, prefix, conv1d=conv1d, linear_bias=True) + ln_bias_entries(cfg, prefix)
        if not tied:
            rows.append(WeightMap("lm_head.weight", (vocab_of(cfg), cfg.core.d_model), ("lm_head.weight",)))
        return rows

    implied = (
        f"{what} (n_layer={cfg.core.n_layers}, n_embd={cfg.core.d_model}, n_inner={cfg.hidden}, "
        f"n_positions={cfg.core.context_length}, vocab_size={cfg.core.vocab_size})"
    )
    # some files store the tied head too; it is the embedding
    return Layout(entries, implied, frozenset({"lm_head.weight"} if tied else ()))


__all__ = ["gpt2_config", "gpt2_entries", "gpt2_layout", "ln_bias_entries"]
