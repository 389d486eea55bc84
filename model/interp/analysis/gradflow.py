"""Gradient flow: how large each layer's gradient is, at initialisation or during training.

For block ``l`` with parameters ``θ_l`` the number is ``‖∂loss/∂θ_l‖₂`` (the 2-norm over all of the
block's parameters together), also split into attention, MLP and norm parameters.

Xiong et al. (2020): at initialisation a Post-LN Transformer (``x ← Norm(x + F(x))``) has large
gradients for the layers near the output, and they shrink toward the input, so a large learning
rate blows up the top layers (hence warm-up). Pre-LN (``x ← x + F(Norm(x))``) keeps an identity path
from the loss to every layer and its per-layer gradients stay well scaled at every depth.
:func:`grad_flow_at_init` measures this on a fresh model of any config; :func:`grad_flow_variants`
does it for Pre/Post-LN × LayerNorm/RMSNorm from one seed and one batch.

The default experiment (:func:`xiong_config`: 6 layers, d = 128, 4 heads, a ReLU FFN (the original
Transformer's, which Xiong et al. analyse) of width 2d, V = 64, 8 × 64 random tokens, Xavier init, seed 0)
measures last block / first block = 1.70 for Post-LN and 0.74 for Pre-LN, and Post-LN's last block
4.3× Pre-LN's; over seeds 0-9 Post-LN's ratio is 1.22-1.92 and Pre-LN's 0.69-0.83 (Pre-LN falls
gently rather than staying level: its lower blocks also collect gradient through the sublayers
above them). GPT-2's GELU FFN of width 4d at d = 64 blurs the tilt: Post-LN's ratio was 0.84-1.14
over seeds 0-4. A larger vocabulary weakens it too (V = 1024: 0.82-1.31).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from model.config import GPTConfig
from model.interp.trace import eval_mode

NORM_VARIANTS = (("pre", "layernorm"), ("post", "layernorm"), ("pre", "rmsnorm"), ("post", "rmsnorm"))


@dataclass
class GradFlow:
    """Gradient norms per block: ``block``, ``attn``, ``mlp``, ``norms`` float arrays [L].

    ``embed``: norm over the embedding tables; ``head``: over the final norm and a separate
    unembedding (0 when neither exists); ``loss``: the loss that was differentiated (None when the
    gradients were already there).
    """

    norm_position: str
    norm: str
    block: np.ndarray
    attn: np.ndarray
    mlp: np.ndarray
    norms: np.ndarray
    embed: float
    head: float
    loss: float | None = None

    @property
    def layers(self) -> np.ndarray:
        return np.arange(len(self.block))

    @property
    def top_to_bottom(self) -> float:
        """``block[-1] / block[0]``: > 1 when the output side gets larger gradients than the input side."""
        return float(self.block[-1] / self.block[0]) if self.block[0] > 0 else float("inf")


def _sq(p: torch.nn.Parameter) -> float:
    return 0.0 if p.grad is None else float(p.grad.detach().double().pow(2).sum())


def block_grad_norms(model) -> GradFlow:
    """Read the gradients ``model`` holds now (after ``loss.backward()``, before ``zero_grad``)."""
    cfg = model.config
    L = cfg.core.n_layers
    block, attn, mlp, norms = (np.zeros(L) for _ in range(4))
    embed = head = 0.0
    for name, p in model.named_parameters():
        g = _sq(p)
        if name.startswith("blocks."):
            layer = int(name.split(".")[1])
            block[layer] += g
            part = name.split(".")[2]
            if part == "attn":
                attn[layer] += g
            elif part == "mlp":
                mlp[layer] += g
            else:
                norms[layer] += g
        elif name.startswith(("tok_emb", "pos_emb")):
            embed += g
        else:
            head += g
    return GradFlow(
        cfg.normalization.norm_position,
        cfg.normalization.norm,
        np.sqrt(block),
        np.sqrt(attn),
        np.sqrt(mlp),
        np.sqrt(norms),
        float(np.sqrt(embed)),
        float(np.sqrt(head)),
    )


def random_batch(vocab_size: int, batch_size: int, seq_len: int, seed: int) -> tuple[torch.Tensor, ...]:
    """Uniformly random token ids ``x`` and next-token targets ``y`` [batch, seq_len] (seeded)."""
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, vocab_size, (batch_size, seq_len + 1), generator=g)
    return data[:, :-1], data[:, 1:]


def xavier_init_(model, seed: int = 0) -> None:
    """Re-initialise ``model`` as in Xiong et al.'s analysis: Xavier-normal weight matrices
    (std ``√(2/(fan_in + fan_out))``, no depth scaling), unit-variance embeddings, zero biases and
    norms at (γ = 1, β = 0). With tied embeddings the unembedding shares the unit-variance table."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.zero_()
            elif name.startswith(("tok_emb", "pos_emb")):
                p.normal_(0.0, 1.0, generator=g)
            elif p.dim() >= 2:
                fan_out, fan_in = p.shape
                p.normal_(0.0, math.sqrt(2.0 / (fan_in + fan_out)), generator=g)


INITS = ("xavier", "model")


def xiong_config(
    *,
    n_layers: int = 6,
    d_model: int = 128,
    n_heads: int = 4,
    mlp: str = "relu",
    vocab_size: int = 64,
    norm: str = "layernorm",
    norm_position: str = "pre",
    context_length: int = 64,
) -> GPTConfig:
    """The config of the gradient-flow experiment, by default the one the module docstring measures:
    FFN width ``d_ff = 2·d_model``, no dropout; raises ValueError on a bad combination."""
    return GPTConfig(
        vocab_size=vocab_size,
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        d_ff=2 * d_model,
        mlp=mlp,
        context_length=context_length,
        norm=norm,
        norm_position=norm_position,
        dropout=0.0,
    ).validate()


def tilt_words(ratio: float, tolerance: float = 0.1) -> str:
    """How a gradient profile tilts, from ``ratio = block[-1] / block[0]``: "rises toward the output"
    (ratio ≥ 1 + tolerance), "falls toward the output" (≤ 1 − tolerance), else "stays about level"."""
    if ratio >= 1 + tolerance:
        return "rises toward the output"
    if ratio <= 1 - tolerance:
        return "falls toward the output"
    return "stays about level"


def shows_xiong(pre: GradFlow, post: GradFlow) -> bool:
    """Whether a measurement shows Xiong et al.'s picture: Post-LN's gradient rises toward the output
    (:func:`tilt_words`) and its last block's exceeds Pre-LN's."""
    return tilt_words(post.top_to_bottom).startswith("rises") and post.block[-1] > pre.block[-1]


def at_init_summary(pre: GradFlow, post: GradFlow) -> str:
    """One sentence of what ``pre`` and ``post`` (at-init :class:`GradFlow` of one setup) measured:
    both ``block[-1] / block[0]`` ratios with their :func:`tilt_words`, and ``post.block[-1] /
    pre.block[-1]``. The page's text is this sentence, so its words follow the plotted numbers."""
    gap = post.block[-1] / pre.block[-1] if pre.block[-1] > 0 else float("inf")
    return (
        f"here Post-LN's last block gets {post.top_to_bottom:.2f}× the first block's gradient (it "
        f"{tilt_words(post.top_to_bottom)}) and Pre-LN's {pre.top_to_bottom:.2f}× (it "
        f"{tilt_words(pre.top_to_bottom)}); at the last block Post-LN's gradient is {gap:.1f}× Pre-LN's."
    )


def grad_flow_at_init(
    config,
    *,
    seed: int = 0,
    init: str = "xavier",
    batch=None,
    batch_size: int = 8,
    seq_len: int | None = None,
    device: str | torch.device = "cpu",
) -> GradFlow:
    """Build a fresh model of ``config`` (weights from ``seed``), take one loss gradient, measure it.

    ``init``: "xavier" (:func:`xavier_init_`, the setting of Xiong et al.'s result) or "model" (the
    GPT's own GPT-2 init: N(0, 0.02) and residual writes scaled by 1/√(2L)). The small GPT-2 init
    hides the effect: each sublayer writes so little that ``Norm(x + F(x)) ≈ x`` and Post-LN's
    gradients come out flat (and its first block large, from normalising the 0.02-std embedding).
    ``batch`` ``(x, y)`` defaults to :func:`random_batch` (``seq_len`` = min(context, 64)); pass real
    text for a measurement on data. Dropout is off (evaluation mode) so the numbers are repeatable.
    """
    from model.nn.gpt import init_model

    if init not in INITS:
        raise ValueError(f"init {init!r} is not one of {', '.join(INITS)}")
    model = init_model(config, seed=seed, device=device)
    if init == "xavier":
        xavier_init_(model, seed)
    model.eval()
    if batch is None:
        T = seq_len or min(config.core.context_length, 64)
        batch = random_batch(config.core.vocab_size, batch_size, T, seed)
    x, y = (t.to(device) for t in batch)
    _, loss = model(x, y)
    loss.backward()
    flow = block_grad_norms(model)
    flow.loss = float(loss.detach())
    return flow


def grad_flow_variants(config, variants=NORM_VARIANTS, **kwargs) -> dict[tuple[str, str], GradFlow]:
    """:func:`grad_flow_at_init` for each ``(norm_position, norm)`` in ``variants``, all else equal.

    The same seed and batch serve every variant, so the curves differ only by the norm choice.
    """
    return {
        (pos, norm): grad_flow_at_init(config.replace(norm_position=pos, norm=norm), **kwargs)
        for pos, norm in variants
    }


def fixed_batch(source, batch_size: int, seq_len: int, seed: int = 0, split: str = "val"):
    """A repeatable batch ``(x, y)`` [batch_size, seq_len] of ``source`` (the same for every call)."""
    g = torch.Generator().manual_seed(int(seed))
    return source.get_batch(split, batch_size, seq_len, g)


def grad_flow_on_batch(model, x, y) -> GradFlow:
    """Per-block ``‖∂loss/∂θ_l‖₂`` of ``model`` as it is now, on the batch ``(x, y)``.

    Runs one forward and backward in evaluation mode (no dropout) and clears the gradients it made,
    so the weights, an optimizer's state and the next training step are unaffected. Call it between
    steps (the trainer sets gradients to None after each step).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    saved = [p.grad for p in params]
    for p in params:
        p.grad = None
    try:
        with eval_mode(model), torch.enable_grad():
            _, loss = model(x.to(model.device), y.to(model.device))
            loss.backward()
        flow = block_grad_norms(model)
        flow.loss = float(loss.detach())
    finally:
        for p, g in zip(params, saved):
            p.grad = g
    return flow


__all__ = [
    "INITS",
    "NORM_VARIANTS",
    "GradFlow",
    "at_init_summary",
    "block_grad_norms",
    "fixed_batch",
    "grad_flow_at_init",
    "grad_flow_on_batch",
    "grad_flow_variants",
    "random_batch",
    "shows_xiong",
    "tilt_words",
    "xavier_init_",
    "xiong_config",
]
