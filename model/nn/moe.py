"""Mixture-of-experts feed-forward: a router sends each token to ``k`` of ``E`` expert MLPs.

Shapes: tokens ``N = B·T``, width ``d``, experts ``E = n_experts``, chosen per token
``k = n_experts_per_token``, one expert ``f = expert_d_ff`` wide.

For a token ``x`` [d]: router logits ``z = W_r x`` [E]; the chosen experts ``S = top-k`` and their
weights ``g`` [k] (``router``):

* ``topk_softmax`` (Mixtral, gpt-oss): ``S = top-k(z)``, ``g = softmax(z_S)``;
* ``softmax_topk`` (Qwen2-MoE, OLMoE): ``p = softmax(z)``, ``S = top-k(p)``, ``g = p_S``;
* ``softmax_topk_norm`` (Qwen3-MoE): the same, ``g = p_S / Σ p_S``;
* ``sigmoid_topk_norm`` (DeepSeek-V3): ``s = σ(z)``, ``S = top-k(s)``, ``g = s_S / Σ s_S``.

DeepSeek-V3 chooses with more than the scores ``c`` of the rule (the logits for ``topk_softmax``, the
softmax or sigmoid otherwise): ``router_choice_bias`` adds a per-expert bias ``b`` [E] to them for
the choice only (``S = top-k(c + b)``; the weights still come from ``c``); with ``router_groups`` = G
the experts are G equal groups, each scored by the sum of its two best ``c + b``, and only the
``router_topk_groups`` best groups may be chosen from; ``router_scale`` multiplies the weights ``g``.

Then ``y = Σ_{j} g_j · Expert_{S_j}(x) + Shared(x)`` (``Shared``: one MLP ``shared_hidden`` wide,
``n_shared_experts·f`` unless ``shared_expert_d_ff`` says, DeepSeek's always-on experts; absent by
default), or, with ``shared_expert_gate`` (Qwen2-MoE), ``… + σ(w_s · x) · Shared(x)`` with ``w_s`` [d]
(``shared_gate``, a scalar gate per token). Each expert is the config's MLP kind.

Load balancing (Switch Transformer, Fedus et al. 2021, as Mixtral trains): with ``f_e`` the share of
the ``N·k`` assignments that went to expert ``e`` and ``P_e`` the mean of ``softmax(z)_e`` over the
tokens, ``L_aux = E · Σ_e f_e · P_e`` (1 when perfectly balanced); :class:`~model.nn.gpt.GPT` adds
``router_aux_loss · mean over layers of L_aux`` to the training loss. ``load`` keeps ``f`` of the
last forward pass [E] (what the Train tab shows as the router's load).

Hook points: ``router`` (logits [B, T, E]), ``chosen`` (the chosen experts' ids [B, T, k], int64),
``gates`` (their weights [B, T, k], after ``router_scale``) and ``out`` [B, T, d] (as a dense MLP's
``mlp.out``).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from model.config import GPTConfig
from model.nn.hooks import HookPoint
from model.nn.layers import MLP, GatedMLP, init_linear, make_mlp


def route(
    logits: torch.Tensor,
    k: int,
    rule: str,
    *,
    choice_bias: torch.Tensor | None = None,
    groups: int | None = None,
    topk_groups: int = 1,
    scale: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, weights)`` [..., k] of the experts chosen from router ``logits`` [..., E] by ``rule``;
    ``choice_bias`` [E], ``groups`` / ``topk_groups`` and ``scale`` as DeepSeek-V3 (the module
    docstring's formulas)."""
    if choice_bias is None and not groups and scale == 1.0:  # the plain rules
        if rule == "topk_softmax":
            top, ids = logits.topk(k, dim=-1)
            return ids, torch.softmax(top, dim=-1)
        scores = torch.sigmoid(logits) if rule == "sigmoid_topk_norm" else torch.softmax(logits, dim=-1)
        weights, ids = scores.topk(k, dim=-1)
        if rule != "softmax_topk":  # softmax_topk_norm, sigmoid_topk_norm: renormalised over the chosen
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return ids, weights
    if rule == "topk_softmax":
        scores = logits
    else:
        scores = torch.sigmoid(logits) if rule == "sigmoid_topk_norm" else torch.softmax(logits, dim=-1)
    choice = scores if choice_bias is None else scores + choice_bias.to(scores.dtype)
    if groups and groups > 1:
        E = choice.shape[-1]
        per_group = choice.unflatten(-1, (groups, E // groups))  # [..., G, E/G]
        group_scores = per_group.topk(min(2, E // groups), dim=-1).values.sum(-1)  # [..., G]
        best = group_scores.topk(topk_groups, dim=-1).indices
        keep = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(-1, best, True)
        choice = choice.masked_fill(~keep.repeat_interleave(E // groups, dim=-1), float("-inf"))
    ids = choice.topk(k, dim=-1).indices
    weights = scores.gather(-1, ids)
    if rule == "topk_softmax":
        weights = torch.softmax(weights, dim=-1)
    elif rule != "softmax_topk":
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return ids, weights * scale if scale != 1.0 else weights


def balance_loss(logits: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(L_aux, f)``: Switch's load-balancing loss ``E·Σ_e f_e·P_e`` and the load ``f`` [E] of router
    ``logits`` [N, E] that chose ``ids`` [N, k]."""
    E = logits.shape[-1]
    f = torch.bincount(ids.reshape(-1), minlength=E).to(logits.dtype) / ids.numel()
    P = torch.softmax(logits, dim=-1).mean(dim=0)
    return E * (f * P).sum(), f


class MoE(nn.Module):
    """The mixture-of-experts feed-forward of one block (see the module docstring)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        E, f = int(config.feed_forward.n_experts or 0), config.expert_hidden
        self.k, self.rule = config.feed_forward.n_experts_per_token, config.feed_forward.router
        self.gate = nn.Linear(config.core.d_model, E, bias=config.core.bias == "all")
        self.groups, self.topk_groups, self.scale = (
            config.feed_forward.router_groups,
            config.feed_forward.router_topk_groups,
            config.feed_forward.router_scale,
        )
        # DeepSeek-V3's e_score_correction_bias: chooses experts, is not trained by gradient
        self.choice_bias = (
            nn.Parameter(torch.zeros(E), requires_grad=False)
            if config.feed_forward.router_choice_bias
            else None
        )
        self.experts = nn.ModuleList(make_mlp(config, f, hooked=False) for _ in range(E))
        self.shared = (
            make_mlp(config, config.shared_hidden, hooked=False)
            if config.feed_forward.n_shared_experts
            else None
        )
        self.shared_gate = (
            nn.Linear(config.core.d_model, 1, bias=False)
            if self.shared is not None and config.feed_forward.shared_expert_gate
            else None
        )
        self.router, self.chosen, self.gates, self.out = HookPoint(), HookPoint(), HookPoint(), HookPoint()
        self.aux_loss: torch.Tensor | None = None  # L_aux of the last forward pass (training only)
        self.load: torch.Tensor | None = None  # f [E] of the last forward pass, detached

    def init_weights(self) -> None:
        init_linear(self.gate)
        if self.choice_bias is not None:
            nn.init.zeros_(self.choice_bias)
        for expert in self.experts:
            assert isinstance(expert, (MLP, GatedMLP))  # a ModuleList yields Modules
            expert.init_weights()
        if self.shared is not None:
            self.shared.init_weights()
        if self.shared_gate is not None:
            init_linear(self.shared_gate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` [B, T, d] → [B, T, d]: each token through its ``k`` experts, weighted, plus the shared."""
        B, T, d = x.shape
        logits = self.router(self.gate(x))  # [B, T, E]
        ids, weights = route(
            logits,
            self.k,
            self.rule,
            choice_bias=self.choice_bias,
            groups=self.groups,
            topk_groups=self.topk_groups,
            scale=self.scale,
        )
        ids = self.chosen(ids)  # [B, T, k]
        weights = self.gates(weights)
        flat, ids, weights = x.reshape(-1, d), ids.reshape(-1, self.k), weights.reshape(-1, self.k)
        if self.training:
            self.aux_loss, load = balance_loss(logits.reshape(-1, logits.shape[-1]), ids)
        else:
            self.aux_loss = None
            load = torch.bincount(ids.reshape(-1), minlength=len(self.experts)) / ids.numel()
        self.load = load.detach()
        y = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows, slots = torch.where(ids == e)  # the tokens routed to e, and which of their k choices
            if rows.numel():
                y.index_add_(0, rows, expert(flat[rows]) * weights[rows, slots, None].to(flat.dtype))
        if self.shared is not None:
            shared = self.shared(flat)
            y = y + (shared if self.shared_gate is None else torch.sigmoid(self.shared_gate(flat)) * shared)
        return self.out(y.view(B, T, d))


def aux_loss_of(model: nn.Module) -> torch.Tensor | None:
    """The mean load-balancing loss of every mixture-of-experts block's last forward pass, or None."""
    losses = [m.aux_loss for m in model.modules() if isinstance(m, MoE) and m.aux_loss is not None]
    return torch.stack(losses).mean() if losses else None


def router_loads(model: nn.Module) -> list[list[float]] | None:
    """The load ``f`` [E] of each mixture-of-experts block's last forward pass (the share of the
    token-to-expert assignments each expert got; ``1/E`` each when balanced), or None without any."""
    loads = [m.load.tolist() for m in model.modules() if isinstance(m, MoE) and m.load is not None]
    return loads or None


__all__ = ["MoE", "aux_loss_of", "balance_loss", "route", "router_loads"]
