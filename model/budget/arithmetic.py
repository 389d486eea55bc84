"""The budget calculator: exact parameters, FLOPs, KV cache, memory and training cost of a config.

Pure Python arithmetic on a :class:`~model.config.GPTConfig` (no torch, no numpy), so the command
line and the GUI panel answer instantly for anything from a toy to a 405B model.

Symbols (``symbols(cfg)`` gives their values): ``L`` layers, ``d`` d_model, ``h`` query heads,
``h_kv`` key/value heads, ``d_k`` head_dim, ``d_ff`` MLP hidden width, ``V`` vocabulary,
``T_max`` context_length, ``T`` the context a token attends to (``seq_len``), ``B`` batch.

Conventions, stated once:

* **Parameters** are counted exactly as :class:`model.nn.gpt.GPT` creates them (its ``numel`` per
  component is checked against this module by the tests). Buffers (RoPE and sinusoid tables) are
  not parameters. A tied output head is the token embedding and is counted once.
* **Non-embedding parameters** follow Kaplan et al. (2020): every vocabulary and position matrix is
  left out — token embedding, learned position table *and* an untied output head (the
  "unembedding"; Pythia reports its untied models this way). What remains is the ``L`` blocks plus
  the final norm.
* **FLOPs** count 2 per multiply–add of a matrix product and nothing else (norms, softmax,
  activations, RoPE, residual adds and bias adds are ignored: they are O(d) per token, not O(d²)).
  ``N_mm`` is the number of weights that multiply every token's vector: Q, K, V, O and the MLP
  matrices of every layer, plus the output head (``V·d``, once, tied or not). The token-embedding
  lookup and the position table cost no FLOPs. Forward = ``2·N_mm`` per token, plus the
  attention-score matmuls ``Q·Kᵀ`` and ``A·V``: ``4·L·T·h·d_k`` per token at context ``T``
  (``2·L·T·h·d_k`` with ``causal_halving``, since a causal token sees on average half the context).
  Training = 3 × forward (the backward pass costs two forwards). The textbook estimates ``2N``/``6N``
  with ``N`` = all parameters are reported beside them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from model.config import ConfigError, GPTConfig

GiB = 1024**3

# ---------------------------------------------------------------------------------------------
# precision modes: bytes per parameter and per activation value
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Precision:
    """Bytes per parameter for each training state, and per stored activation value."""

    name: str
    description: str
    weights: int
    gradients: int
    master_weights: int
    optimizer: int  # AdamW's two moments m and v together
    activations: int
    inference_weights: int

    @property
    def training_bytes_per_param(self) -> int:
        return self.weights + self.gradients + self.master_weights + self.optimizer

    def per_param(self) -> dict[str, int]:
        """Bytes per parameter by state (zero entries left out)."""
        out = {
            "weights": self.weights,
            "gradients": self.gradients,
            "master weights": self.master_weights,
            "AdamW m, v": self.optimizer,
        }
        return {k: v for k, v in out.items() if v}


def _mode(name: str, description: str, w: int, g: int, master: int, adam: int, act: int) -> Precision:
    """A precision mode; inference keeps the weights (and the KV cache) in the weights' precision."""
    return Precision(name, description, w, g, master, adam, act, inference_weights=w)


#: Bytes per parameter: weights + gradients + master weights + AdamW's m and v; and per activation.
PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        _mode("fp32", "float32 throughout: weights 4 + gradients 4 + AdamW m, v 4+4", 4, 4, 0, 8, 4),
        _mode("bf16-mixed", "bf16 weights 2 + gradients 2 + fp32 master 4 + fp32 AdamW 4+4", 2, 2, 4, 8, 2),
        _mode("fp16-mixed", "as bf16-mixed (loss scaling keeps no per-parameter state)", 2, 2, 4, 8, 2),
        _mode("bf16", "pure bf16, optimizer too: weights 2 + gradients 2 + AdamW m, v 2+2", 2, 2, 0, 4, 2),
    )
}


COST_BASES: dict[str, str] = {
    "6N": "6·N per token, N = all parameters (the textbook and Chinchilla estimate C ≈ 6·N·D)",
    "matmul": "3·(2·N_mm + attention scores at seq_len) per token: the matmuls a training step really does",
}


# ---------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def problems(
    cfg: GPTConfig,
    *,
    seq_len: Any = None,
    batch: Any = None,
    bytes_per_value: Any = None,
    tokens: Any = None,
    peak_flops: Any = None,
    mfu: Any = None,
    gpus: Any = None,
    precision: Any = None,
    cost_basis: Any = None,
) -> list[str]:
    """Every problem with this config and these settings, each one line (empty when all is well).

    ``None`` means "not given" for every setting. Checks ``cfg.problems()`` plus: vocab_size set,
    seq_len/batch/gpus whole numbers ≥ 1, seq_len within a learned position table, bytes, tokens and
    peak FLOP/s > 0, 0 < mfu ≤ 1, a known precision mode and cost basis.
    """
    out = list(cfg.problems())
    if cfg.vocab_size is None:
        out.append("vocab_size is not set: give the vocabulary size V (50257 for GPT-2's tokenizer)")
    for name, value in (("seq_len", seq_len), ("batch", batch), ("gpus", gpus)):
        if value is None:
            continue
        if not _is_int(value):
            out.append(f"{name}={value!r} must be a whole number")
        elif value < 1:
            out.append(f"{name}={value} must be at least 1")
    if (
        _is_int(seq_len)
        and cfg.positions == "learned"
        and _is_int(cfg.context_length)
        and seq_len > cfg.context_length > 0
    ):
        out.append(
            f"seq_len={seq_len} is longer than context_length={cfg.context_length}, the size of the learned "
            f"position table: lower seq_len or raise context_length"
        )
    for name, value in (("bytes_per_value", bytes_per_value), ("tokens", tokens), ("peak_flops", peak_flops)):
        if value is None:
            continue
        if not _is_num(value):
            out.append(f"{name}={value!r} must be a number")
        elif value <= 0:
            out.append(f"{name}={value!r} must be greater than 0")
    if mfu is not None:
        if not _is_num(mfu):
            out.append(f"mfu={mfu!r} must be a number")
        elif not 0 < mfu <= 1:
            out.append(f"mfu={mfu!r} is a utilisation and must lie in (0, 1], e.g. 0.4 for 40%")
    if precision is not None and precision not in PRECISIONS:
        out.append(f"precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    if cost_basis is not None and cost_basis not in COST_BASES:
        out.append(f"cost_basis={cost_basis!r} is not one of {', '.join(COST_BASES)}")
    return out


def check(cfg: GPTConfig, **settings: Any) -> None:
    """Raise :class:`ConfigError` listing every problem :func:`problems` finds."""
    found = problems(cfg, **settings)
    if found:
        raise ConfigError(found)


def symbols(cfg: GPTConfig) -> dict[str, int]:
    """The values of the symbols the formulas use: L, d, h, h_kv, d_k, d_ff, V, T_max."""
    return {
        "L": cfg.n_layers,
        "d": cfg.d_model,
        "h": cfg.n_heads,
        "h_kv": cfg.kv_heads,
        "d_k": cfg.d_head,
        "d_ff": cfg.hidden,
        "V": int(cfg.vocab_size or 0),
        "T_max": cfg.context_length,
    }


# ---------------------------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------------------------
FLOP_PARTS = ("attention scores", "attention projections", "mlp", "output head")


@dataclass(frozen=True)
class FlopBreakdown:
    """Forward and training FLOPs per token at context ``seq_len`` (see the module's conventions).

    ``parts`` splits ``forward_total_per_token`` into :data:`FLOP_PARTS`:
    attention scores ``4·L·T·h·d_k`` (halved if ``causal_halving``), attention projections
    ``2·L·(2·d·h·d_k + 2·d·h_kv·d_k)``, mlp ``2·L·(2 or 3)·d·d_ff``, output head ``2·V·d``.
    """

    seq_len: int
    causal_halving: bool
    matmul_params: int  # N_mm
    total_params: int  # N
    forward_per_token: int  # 2·N_mm
    attention_forward_per_token: int
    parts: dict[str, int]
    attention_crossover_seq_len: float

    @property
    def forward_total_per_token(self) -> int:
        """``2·N_mm`` + the attention-score term: what a forward pass really multiplies."""
        return self.forward_per_token + self.attention_forward_per_token

    @property
    def train_per_token(self) -> int:
        """``3 · 2·N_mm = 6·N_mm`` (forward + a backward of two forwards), no attention term."""
        return 3 * self.forward_per_token

    @property
    def train_total_per_token(self) -> int:
        return 3 * self.forward_total_per_token

    @property
    def forward_2n(self) -> int:
        """The textbook ``2N`` with N = all parameters."""
        return 2 * self.total_params

    @property
    def train_6n(self) -> int:
        """The textbook ``6N`` with N = all parameters."""
        return 6 * self.total_params

    def shares(self) -> dict[str, float]:
        """Fraction of the forward FLOPs per token in each of :data:`FLOP_PARTS` (sums to 1)."""
        total = self.forward_total_per_token
        return {k: v / total for k, v in self.parts.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq_len": self.seq_len,
            "causal_halving": self.causal_halving,
            "matmul_params": self.matmul_params,
            "forward_per_token": self.forward_per_token,
            "attention_forward_per_token": self.attention_forward_per_token,
            "forward_total_per_token": self.forward_total_per_token,
            "train_per_token": self.train_per_token,
            "train_total_per_token": self.train_total_per_token,
            "forward_2n": self.forward_2n,
            "train_6n": self.train_6n,
            "parts": dict(self.parts),
            "shares": self.shares(),
            "attention_crossover_seq_len": self.attention_crossover_seq_len,
        }


def _flop_parts(p: ParamBreakdown) -> tuple[int, int, int, int]:
    """(per-token attention-score FLOPs per unit of T before halving, projections, mlp, head)."""
    cfg = p.config
    s = symbols(cfg)
    score_per_T = 4 * s["L"] * s["h"] * s["d_k"]
    proj = 2 * sum(p[n].count for n in ("attention Q", "attention K", "attention V", "attention O"))
    mlp = 2 * p["mlp weights"].count
    head = 2 * s["V"] * s["d"]
    return score_per_T, proj, mlp, head


def attention_flops_per_token(cfg: GPTConfig, seq_len: int, causal_halving: bool = False) -> int:
    """Forward FLOPs per token of ``Q·Kᵀ`` and ``A·V`` at context T: ``4·L·T·h·d_k`` (``2·L·T·h·d_k``
    halved for a causal mask)."""
    check(cfg, seq_len=seq_len)
    s = symbols(cfg)
    n = 4 * s["L"] * seq_len * s["h"] * s["d_k"]
    return n // 2 if causal_halving else n


def attention_crossover(cfg: GPTConfig, causal_halving: bool = False) -> float:
    """The context T at which attention-score FLOPs equal the MLP's: ``4·L·T·h·d_k = 2·L·mlp_weights``,
    so ``T* = mlp_weights / (2·h·d_k)`` per layer (twice that with ``causal_halving``); ``4·d`` for a
    GPT-2-style 4d GELU MLP."""
    score_per_T, _, mlp, _ = _flop_parts(parameters(cfg))
    return (2 if causal_halving else 1) * mlp / score_per_T


def flops(cfg: GPTConfig, seq_len: int | None = None, causal_halving: bool = False) -> FlopBreakdown:
    """FLOPs per token at context ``seq_len`` (default: ``context_length``); see the module docstring."""
    seq_len = cfg.context_length if seq_len is None else seq_len
    check(cfg, seq_len=seq_len)
    p = parameters(cfg)
    score_per_T, proj, mlp, head = _flop_parts(p)
    scores = score_per_T * seq_len // (2 if causal_halving else 1)
    assert proj + mlp + head == 2 * p.matmul
    return FlopBreakdown(
        seq_len=seq_len,
        causal_halving=causal_halving,
        matmul_params=p.matmul,
        total_params=p.total,
        forward_per_token=2 * p.matmul,
        attention_forward_per_token=scores,
        parts={"attention scores": scores, "attention projections": proj, "mlp": mlp, "output head": head},
        attention_crossover_seq_len=(2 if causal_halving else 1) * mlp / score_per_T,
    )


def flop_shares(
    cfg: GPTConfig, seq_lens: Sequence[int], causal_halving: bool = False
) -> dict[str, list[float]]:
    """Share of forward FLOPs per token in each of :data:`FLOP_PARTS` for every T in ``seq_lens``.

    Returns ``{"seq_len": [...], "attention scores": [...], "attention projections": [...],
    "mlp": [...], "output head": [...]}``, lists of equal length, each position summing to 1
    (ready for ``np.asarray`` and a stacked plot).
    """
    seq_lens = list(seq_lens)
    check(cfg)
    for T in seq_lens:
        check(cfg, seq_len=T)
    score_per_T, proj, mlp, head = _flop_parts(parameters(cfg))
    out: dict[str, list[float]] = {"seq_len": [float(T) for T in seq_lens]}
    out.update({k: [] for k in FLOP_PARTS})
    for T in seq_lens:
        scores = score_per_T * T / (2 if causal_halving else 1)
        total = scores + proj + mlp + head
        for k, v in zip(FLOP_PARTS, (scores, proj, mlp, head)):
            out[k].append(v / total)
    return out


# ---------------------------------------------------------------------------------------------
# KV cache
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KVCacheSize:
    """``bytes = 2·L·h_kv·d_k·T·B·bytes_per_value`` (keys and values, every layer and KV head).

    ``mha_bytes`` is the same model with ``h_kv = h``; ``saving_factor = h / h_kv`` (1 for MHA, ``h``
    for MQA).
    """

    seq_len: int
    batch: int
    bytes_per_value: float
    bytes: int
    per_token_bytes: float
    mha_bytes: int
    saving_factor: float

    @property
    def saved_bytes(self) -> int:
        return self.mha_bytes - self.bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq_len": self.seq_len,
            "batch": self.batch,
            "bytes_per_value": self.bytes_per_value,
            "bytes": self.bytes,
            "per_token_bytes": self.per_token_bytes,
            "mha_bytes": self.mha_bytes,
            "saved_bytes": self.saved_bytes,
            "saving_factor": self.saving_factor,
        }


def _whole(x: float) -> int | float:
    return int(x) if float(x).is_integer() else x


def kv_cache(
    cfg: GPTConfig, seq_len: int | None = None, batch: int = 1, bytes_per_value: float = 2
) -> KVCacheSize:
    """KV-cache size for ``batch`` sequences of ``seq_len`` tokens (default ``context_length``)."""
    seq_len = cfg.context_length if seq_len is None else seq_len
    check(cfg, seq_len=seq_len, batch=batch, bytes_per_value=bytes_per_value)
    s = symbols(cfg)
    per_token_values = 2 * s["L"] * s["h_kv"] * s["d_k"]
    mha_values = 2 * s["L"] * s["h"] * s["d_k"]
    return KVCacheSize(
        seq_len=seq_len,
        batch=batch,
        bytes_per_value=bytes_per_value,
        bytes=math.ceil(per_token_values * seq_len * batch * bytes_per_value),
        per_token_bytes=_whole(per_token_values * bytes_per_value),
        mha_bytes=math.ceil(mha_values * seq_len * batch * bytes_per_value),
        saving_factor=_whole(s["h"] / s["h_kv"]),
    )


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------
def activation_values_per_layer(
    cfg: GPTConfig, seq_len: int, batch: int, fused_attention: bool = True
) -> int:
    """Activation values one block keeps for its backward pass (Korthikanti et al. 2022, generalised).

    Per token: both norm inputs ``2d``; attention input ``d``, Q ``h·d_k``, K and V ``2·h_kv·d_k``,
    the O-projection input ``h·d_k``; MLP input ``d`` and hidden ``2·d_ff`` (gelu: pre- and
    post-activation), ``d_ff`` (relu: its output alone gives its gradient) or ``4·d_ff`` (swiglu/geglu:
    gate, φ(gate), up, product). A parallel block (GPT-NeoX) has one norm input ``d`` instead of two.
    Without a fused kernel the softmax output ``h·T`` per token is kept too (twice with attention
    dropout). For GPT-2 shapes in 16 bit with dropout this is their ``34·s·b·d + 5·a·s²·b`` bytes.

    Norms, RoPE and the attention scalings are taken as fused (they keep their input only); the
    app's plain-PyTorch GPT keeps a little more for RMSNorm, RoPE and qk_norm (checked in the tests).
    """
    s = symbols(cfg)
    d, h, h_kv, d_k, d_ff = s["d"], s["h"], s["h_kv"], s["d_k"], s["d_ff"]
    per_token = (
        (1 if cfg.parallel_residual else 2) * d
        + d
        + d_k * (h + 2 * h_kv)
        + h * d_k
        + d
        + {"gelu": 2, "relu": 1, "swiglu": 4, "geglu": 4}[cfg.mlp] * d_ff
    )
    n = per_token * seq_len * batch
    if not fused_attention:
        n += (2 if cfg.dropout else 1) * batch * h * seq_len * seq_len
    return n


def activation_bytes(
    cfg: GPTConfig,
    seq_len: int,
    batch: int,
    bytes_per_value: float = 2,
    recompute: bool = False,
    fused_attention: bool = True,
) -> int:
    """Bytes of activations a training step holds at its peak (an estimate, see ``memory``).

    Without recomputation: ``L ×`` :func:`activation_values_per_layer` ``× bytes`` (+ 1-byte dropout
    masks when dropout > 0: ``2·T·B·d`` per layer, and ``h·T²·B`` without fused attention).
    With full recomputation (activation checkpointing per block): only each block's input
    ``L·T·B·d`` values are kept, plus one block's activations rebuilt during its backward.
    Both add the model-level tensors: the output head's input ``T·B·d`` (and the final norm's input,
    another ``T·B·d``, with Pre-LN) and the loss's log-softmax ``T·B·V`` in fp32.
    """
    s = symbols(cfg)
    L, d, V, h = s["L"], s["d"], s["V"], s["h"]
    values = activation_values_per_layer(cfg, seq_len, batch, fused_attention)
    masks = 0
    if cfg.dropout:
        masks = 2 * seq_len * batch * d + (0 if fused_attention else h * seq_len * seq_len * batch)
    layer = values * bytes_per_value + masks
    blocks = L * layer if not recompute else L * seq_len * batch * d * bytes_per_value + layer
    top_d = 2 if cfg.norm_position == "pre" else 1
    top = top_d * seq_len * batch * d * bytes_per_value + seq_len * batch * V * 4
    return math.ceil(blocks + top)


@dataclass(frozen=True)
class MemoryEstimate:
    """Training and inference memory in bytes (see :func:`memory`)."""

    precision: str
    bytes_per_param: dict[str, int]
    seq_len: int
    batch: int
    recompute: bool
    fused_attention: bool
    weights: int
    gradients: int
    master_weights: int
    optimizer: int
    activations: int
    activations_no_recompute: int
    activations_recompute: int
    inference_weights: int
    kv_cache: int

    @property
    def training_states(self) -> int:
        """Weights + gradients + master weights + optimizer states."""
        return self.weights + self.gradients + self.master_weights + self.optimizer

    @property
    def training_total(self) -> int:
        return self.training_states + self.activations

    @property
    def inference_total(self) -> int:
        return self.inference_weights + self.kv_cache

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "bytes_per_param": dict(self.bytes_per_param),
            "seq_len": self.seq_len,
            "batch": self.batch,
            "recompute": self.recompute,
            "fused_attention": self.fused_attention,
            "training": {
                "weights": self.weights,
                "gradients": self.gradients,
                "master_weights": self.master_weights,
                "optimizer": self.optimizer,
                "activations": self.activations,
                "activations_no_recompute": self.activations_no_recompute,
                "activations_recompute": self.activations_recompute,
                "total": self.training_total,
            },
            "inference": {
                "weights": self.inference_weights,
                "kv_cache": self.kv_cache,
                "total": self.inference_total,
            },
        }


def memory(
    cfg: GPTConfig,
    precision: str = "bf16-mixed",
    seq_len: int | None = None,
    batch: int = 1,
    recompute: bool = False,
    *,
    fused_attention: bool = True,
) -> MemoryEstimate:
    """Memory to train with AdamW (one device, no sharding) and to run inference.

    Training: ``N ×`` bytes per parameter of ``precision`` (:data:`PRECISIONS`: fp32 4+4+8 = 16,
    bf16-mixed 2+2+4+8 = 16, bf16 2+2+4 = 8) + activations (:func:`activation_bytes`, in the mode's
    activation precision). Inference: weights in the mode's inference precision + the KV cache at
    ``seq_len`` × ``batch`` in the same precision. Estimates: framework workspaces, temporary
    buffers and fragmentation are not counted.
    """
    seq_len = cfg.context_length if seq_len is None else seq_len
    check(cfg, seq_len=seq_len, batch=batch, precision=precision)
    pr = PRECISIONS[precision]
    n = parameters(cfg).total
    act = {
        r: activation_bytes(cfg, seq_len, batch, pr.activations, recompute=r, fused_attention=fused_attention)
        for r in (False, True)
    }
    return MemoryEstimate(
        precision=precision,
        bytes_per_param=pr.per_param(),
        seq_len=seq_len,
        batch=batch,
        recompute=recompute,
        fused_attention=fused_attention,
        weights=n * pr.weights,
        gradients=n * pr.gradients,
        master_weights=n * pr.master_weights,
        optimizer=n * pr.optimizer,
        activations=act[recompute],
        activations_no_recompute=act[False],
        activations_recompute=act[True],
        inference_weights=n * pr.inference_weights,
        kv_cache=kv_cache(cfg, seq_len, batch, pr.inference_weights).bytes,
    )


# ---------------------------------------------------------------------------------------------
# training cost
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingCost:
    """Compute for ``tokens`` training tokens, and the time it takes when ``peak_flops`` is known.

    ``gpu_seconds = flops / (peak_flops · mfu)``; wall-clock = GPU-seconds / gpus.
    """

    tokens: float
    basis: str
    flops_per_token: int
    flops: float
    peak_flops: float | None = None
    mfu: float | None = None
    gpus: int = 1
    effective_flops_per_gpu: float | None = field(default=None)

    @property
    def gpu_seconds(self) -> float | None:
        return None if self.effective_flops_per_gpu is None else self.flops / self.effective_flops_per_gpu

    @property
    def gpu_hours(self) -> float | None:
        s = self.gpu_seconds
        return None if s is None else s / 3600

    @property
    def seconds(self) -> float | None:
        """Wall-clock seconds on ``gpus`` devices."""
        s = self.gpu_seconds
        return None if s is None else s / self.gpus

    @property
    def days(self) -> float | None:
        s = self.seconds
        return None if s is None else s / 86400

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "basis": self.basis,
            "flops_per_token": self.flops_per_token,
            "flops": self.flops,
            "peak_flops": self.peak_flops,
            "mfu": self.mfu,
            "gpus": self.gpus,
            "gpu_seconds": self.gpu_seconds,
            "gpu_hours": self.gpu_hours,
            "seconds": self.seconds,
            "days": self.days,
        }


def training_cost(
    cfg: GPTConfig,
    tokens: float,
    peak_flops: float | None = None,
    mfu: float = 0.4,
    gpus: int = 1,
    *,
    basis: str = "6N",
    seq_len: int | None = None,
    causal_halving: bool = False,
) -> TrainingCost:
    """Total training FLOPs for ``tokens`` tokens and, given ``peak_flops`` (FLOP/s per device), the
    GPU-seconds, GPU-hours and wall-clock days at utilisation ``mfu`` on ``gpus`` devices.

    ``basis`` (:data:`COST_BASES`): ``"6N"`` = ``6·N·D`` with N all parameters (default, the textbook
    estimate); ``"matmul"`` = ``3·(2·N_mm + attention scores at seq_len)·D``. Recomputation is not
    counted (MFU counts model FLOPs, not hardware FLOPs).
    """
    check(cfg, tokens=tokens, peak_flops=peak_flops, mfu=mfu, gpus=gpus, cost_basis=basis, seq_len=seq_len)
    if basis == "6N":
        per_token = 6 * parameters(cfg).total
    else:
        per_token = flops(cfg, seq_len, causal_halving).train_total_per_token
    total = per_token * tokens
    return TrainingCost(
        tokens=_whole(tokens),
        basis=basis,
        flops_per_token=per_token,
        flops=_whole(total),
        peak_flops=peak_flops,
        mfu=mfu,
        gpus=gpus,
        effective_flops_per_gpu=None if peak_flops is None else peak_flops * mfu,
    )


# ---------------------------------------------------------------------------------------------
# the whole report
# ---------------------------------------------------------------------------------------------
def report(
    cfg: GPTConfig,
    *,
    seq_len: int | None = None,
    batch: int = 1,
    bytes_per_value: float = 2,
    tokens: float | None = None,
    peak_flops: float | None = None,
    mfu: float = 0.4,
    gpus: int = 1,
    precision: str = "bf16-mixed",
    recompute: bool = False,
    causal_halving: bool = False,
    cost_basis: str = "6N",
    fused_attention: bool = True,
    title: str | None = None,
) -> dict[str, Any]:
    """Everything at once as a JSON-ready dict (what ``attention-lab budget --json`` prints).

    Keys: ``title``, ``config``, ``symbols``, ``params`` (``total``, ``non_embedding``,
    ``components`` name → count, ``rows`` with formulas, ``summary``, ...), ``flops``
    (``forward_per_token``, ``train_per_token``, ``attention_forward_per_token``, ``parts``,
    ``shares``, ``attention_crossover_seq_len``, ...), ``kv_cache`` (``bytes``, ``mha_bytes``,
    ``saving_factor``, ...), ``memory`` (``training``, ``inference``) and, when ``tokens`` is given,
    ``training`` (``flops`` and, with ``peak_flops``, ``gpu_hours``, ``days``, ...).
    Raises :class:`ConfigError` listing every problem in the config and the settings.
    """
    seq_len = cfg.context_length if seq_len is None else seq_len
    check(
        cfg,
        seq_len=seq_len,
        batch=batch,
        bytes_per_value=bytes_per_value,
        tokens=tokens,
        peak_flops=peak_flops,
        mfu=mfu,
        gpus=gpus,
        precision=precision,
        cost_basis=cost_basis,
    )
    out: dict[str, Any] = {
        "title": title,
        "config": cfg.to_dict(),
        "symbols": symbols(cfg),
        "params": parameters(cfg).to_dict(),
        "flops": flops(cfg, seq_len, causal_halving).to_dict(),
        "kv_cache": kv_cache(cfg, seq_len, batch, bytes_per_value).to_dict(),
        "memory": memory(
            cfg, precision, seq_len, batch, recompute, fused_attention=fused_attention
        ).to_dict(),
    }
    out["memory"]["description"] = PRECISIONS[precision].description
    if tokens is not None:
        cost = training_cost(
            cfg,
            tokens,
            peak_flops,
            mfu,
            gpus,
            basis=cost_basis,
            seq_len=seq_len,
            causal_halving=causal_halving,
        )
        out["training"] = cost.to_dict()
    return out


# ---------------------------------------------------------------------------------------------
# human-readable numbers (the table itself: model/budget/table.py)
# ---------------------------------------------------------------------------------------------
def human_count(n: float) -> str:
    """124439808 → '124.4M', 6.74e9 → '6.74B'."""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            v = n / div
            return f"{v:.3g}{unit}" if v < 100 else f"{v:.4g}{unit}"
    return f"{n:g}"


def human_flops(n: float) -> str:
    """FLOPs in SI units: 1.35e10 → '13.5 GFLOP'."""
    for div, unit in (
        (1e24, "Y"),
        (1e21, "Z"),
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "K"),
    ):
        if abs(n) >= div:
            return f"{n / div:.3g} {unit}FLOP"
    return f"{n:g} FLOP"


def human_bytes(n: float) -> str:
    """Binary units: 2**31 → '2.00 GiB'."""
    for div, unit in ((1024**5, "PiB"), (1024**4, "TiB"), (GiB, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if abs(n) >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n:g} B"


def human_duration(seconds: float) -> str:
    """45 → '45 s', 5400 → '1.5 h', 6.5e8 → '20.6 years'."""
    for div, unit in ((365.25 * 86400, "years"), (86400, "days"), (3600, "h"), (60, "min")):
        if abs(seconds) >= div:
            return f"{seconds / div:,.3g} {unit}" if seconds / div < 1000 else f"{seconds / div:,.0f} {unit}"
    return f"{seconds:.3g} s"


__all__ = [
    "COMPONENTS",
    "COST_BASES",
    "FLOP_PARTS",
    "PRECISIONS",
    "Component",
    "FlopBreakdown",
    "KVCacheSize",
    "MemoryEstimate",
    "ParamBreakdown",
    "Precision",
    "TrainingCost",
    "activation_bytes",
    "activation_values_per_layer",
    "attention_crossover",
    "attention_flops_per_token",
    "check",
    "flop_shares",
    "flops",
    "human_bytes",
    "human_count",
    "human_duration",
    "human_flops",
    "kv_cache",
    "memory",
    "parameters",
    "problems",
    "report",
    "symbols",
    "training_cost",
]
