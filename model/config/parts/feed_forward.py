"""The position-wise feed-forward network: a dense MLP (GELU or ReLU; gated SwiGLU or GeGLU, gpt-oss's
clamped SwiGLU) or a mixture of experts (Mixtral, Qwen3-MoE, DeepSeek-V3, gpt-oss) with its router."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from model.config.parts.base import Part, Term, declare
from model.config.rules import bounds, fmt, kind_problems, needs, out_of_range, positive, whole

if TYPE_CHECKING:
    from model.config import GPTConfig

#: The mixture-of-experts fields that mean nothing without ``n_experts``, at their defaults.
_MOE_DEFAULTS: tuple[tuple[str, object], ...] = (
    ("n_shared_experts", 0),
    ("expert_d_ff", None),
    ("shared_expert_d_ff", None),
    ("shared_expert_gate", False),
    ("moe_dense_layers", 0),
    ("router_choice_bias", False),
    ("router_groups", None),
    ("router_scale", 1.0),
)


@dataclass(frozen=True)
class FeedForwardPart(Part):
    """The feed-forward sublayer of every block. Its parameters per block, with d the model's width:

    * a dense MLP of width d_ff: ``2·d·d_ff`` (gelu/relu: W_in, W_out) or ``3·d·d_ff`` (swiglu/geglu:
      W_gate, W_up, W_down); biases with ``bias="all"``: ``d_ff + d`` or ``2·d_ff + d``;
    * a mixture of experts (``n_experts`` = E, in all but the ``moe_dense_layers`` first blocks, which
      keep the dense MLP): router ``d·E``, E experts each the same MLP of width ``d_e`` (``E·3·d·d_e``
      gated), a shared MLP of width ``d_s`` when ``n_shared_experts`` = s (``shared_expert_d_ff``, else
      ``s·d_e``) and its σ gate ``d`` (``shared_expert_gate``, Qwen2-MoE), and with ``bias="all"``
      their biases (router ``E``, each expert's, the shared one's); DeepSeek-V3's ``router_choice_bias``
      ``E``. One token uses the router, ``k`` experts and the shared ones.

    The router's rule and loss, grouped routing and gpt-oss's clamped SwiGLU add no parameters.
    """

    title = "feed-forward"
    #: its name in the config: ``cfg.feed_forward``
    key = "feed_forward"

    d_ff: int | None = declare(None, "Hidden width of the MLP; default 4·d_model.")
    mlp: str = declare(
        "gelu",
        "gelu / relu: two matrices; swiglu / geglu: three (gate, up, down) as in Llama / Gemma.",
        choices=("gelu", "relu", "swiglu", "geglu"),
    )
    gelu_approx: str = declare(
        "none",
        "GELU form: exact erf, or the tanh approximation GPT-2 used.",
        choices=("none", "tanh"),
    )
    n_experts: int | None = declare(
        None,
        "E: mixture-of-experts feed-forward with E expert MLPs per layer; empty: one dense MLP.",
    )
    n_experts_per_token: int = declare(2, "k: experts each token is sent to (top-k of the router).")
    n_shared_experts: int = declare(
        0,
        "Experts every token always goes through, beside the routed ones (DeepSeek).",
    )
    expert_d_ff: int | None = declare(None, "Hidden width of one expert MLP; default d_ff.")
    shared_expert_d_ff: int | None = declare(
        None,
        "Hidden width of the shared experts' MLP (Qwen2-MoE's shared_expert_intermediate_size); default "
        "n_shared_experts · expert_d_ff.",
    )
    shared_expert_gate: bool = declare(
        False,
        "The shared experts' output is multiplied by σ(w·x), a scalar gate per token (Qwen2-MoE's "
        "shared_expert_gate).",
    )
    moe_dense_layers: int = declare(
        0,
        "The first this many layers keep a dense MLP of width d_ff (DeepSeek-V3: 3).",
    )
    router: str = declare(
        "topk_softmax",
        "Expert weights: topk_softmax: softmax over the k chosen logits (Mixtral, gpt-oss); softmax_topk:"
        " top-k of the softmax over all; softmax_topk_norm: those renormalised (Qwen3-MoE); "
        "sigmoid_topk_norm: sigmoid scores, renormalised (DeepSeek-V3).",
        choices=("topk_softmax", "softmax_topk", "softmax_topk_norm", "sigmoid_topk_norm"),
    )
    router_aux_loss: float = declare(
        0.0,
        "Weight of the load-balancing loss E·Σ f_e·P_e added in training (0: none).",
    )
    router_choice_bias: bool = declare(
        False,
        "A per-expert bias added to the router's scores only to choose the experts, not to weight them "
        "(DeepSeek-V3's e_score_correction_bias; not trained by gradient).",
    )
    router_groups: int | None = declare(
        None,
        "Experts in this many groups; a token chooses among the router_topk_groups groups whose two best "
        "scores sum highest (DeepSeek-V3: 8); empty: no groups.",
    )
    router_topk_groups: int = declare(
        1,
        "Grouped routing: how many groups a token may choose its experts from (DeepSeek-V3: 4).",
    )
    router_scale: float = declare(
        1.0,
        "The chosen experts' weights are multiplied by this (DeepSeek-V3's routed_scaling_factor: 2.5).",
        bounds=(0.001, 1000.0),  # 2.5 (DeepSeek-V3), 16 (DeepSeek-V2)
    )
    swiglu_limit: float | None = declare(
        None,
        "gpt-oss's SwiGLU (with mlp='swiglu'): gate clamped to ≤ limit, up to ±limit, output (up + "
        "1)·gate·σ(1.702·gate); empty: the plain SwiGLU.",
        bounds=(0.001, 1_000_000.0),  # 7 (gpt-oss)
    )

    # ---- checks ----------------------------------------------------------------------------------
    def problems(self, cfg: GPTConfig) -> list[str]:
        out = kind_problems(
            self,
            optional_sizes=("d_ff",),
            choices=("mlp", "gelu_approx", "router"),
            flags=("router_choice_bias", "shared_expert_gate"),
        )
        if positive(out, self, "swiglu_limit", optional=True) and self.mlp != "swiglu":
            out.append(f"swiglu_limit (gpt-oss's clamped SwiGLU) needs mlp='swiglu', not {self.mlp!r}")
        if whole(out, self, "n_experts", optional=True):
            out += self._expert_problems(cfg)
        else:
            needs(out, self, _MOE_DEFAULTS, "n_experts (a mixture-of-experts feed-forward)")
        v = self.router_aux_loss
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= v < 100.0):  # NaN fails
            out.append(f"router_aux_loss={v!r} must be a number from 0 to below 100 (0.01 is usual)")
        return out

    def _expert_problems(self, cfg: GPTConfig) -> list[str]:
        """A mixture of experts (``n_experts`` is valid): its sizes, its dense first layers, its router."""
        out: list[str] = []
        E = int(self.n_experts or 0)
        if whole(out, self, "n_experts_per_token") and self.n_experts_per_token > E:
            out.append(f"n_experts_per_token={self.n_experts_per_token} is more than n_experts={E}")
        shared = whole(out, self, "n_shared_experts", least=0) and self.n_shared_experts > 0
        whole(out, self, "expert_d_ff", optional=True)
        whole(out, self, "shared_expert_d_ff", optional=True)
        out += [
            f"{name} needs n_shared_experts (the shared experts it is of)"
            for name in ("shared_expert_d_ff", "shared_expert_gate")
            if getattr(self, name) not in (None, False) and not shared
        ]
        dense = whole(out, self, "moe_dense_layers", least=0)
        if dense and isinstance(cfg.core.n_layers, int) and self.moe_dense_layers >= cfg.core.n_layers:
            out.append(
                f"moe_dense_layers={self.moe_dense_layers} leaves no mixture-of-experts layer "
                f"of n_layers={cfg.core.n_layers}"
            )
        return out + self._router_problems(E)

    def _router_problems(self, E: int) -> list[str]:
        """DeepSeek-V3's router: grouped choice and the weights' scale (``n_experts`` = E is valid)."""
        out: list[str] = []
        if out_of_range(self, "router_scale"):
            lo, hi = bounds(self, "router_scale")
            out.append(
                f"router_scale={self.router_scale!r} must be a positive number from {fmt(lo)} to {fmt(hi)} "
                "(1: the weights as routed)"
            )
        G, top = self.router_groups, self.router_topk_groups
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            out.append(f"router_topk_groups={top!r} must be a positive whole number")
            return out
        if G is None:
            return out
        if isinstance(G, bool) or not isinstance(G, int) or G < 1:
            out.append(f"router_groups={G!r} must be a positive whole number (or empty: no groups)")
        elif E % G:
            out.append(f"router_groups={G} does not divide n_experts={E} into equal groups")
        elif top > G:
            out.append(f"router_topk_groups={top} is more than router_groups={G}")
        elif isinstance(self.n_experts_per_token, int) and self.n_experts_per_token > top * (E // G):
            out.append(
                f"n_experts_per_token={self.n_experts_per_token} is more than the "
                f"{top * (E // G)} experts of router_topk_groups={top} groups"
            )
        return out

    # ---- parameters ------------------------------------------------------------------------------
    def mlp_size(self, cfg: GPTConfig, d: int, width: int, w: str) -> tuple[int, str, int, str]:
        """One MLP of hidden ``width`` (written ``w``) of this kind: (weights, formula, biases, formula).
        Gated (swiglu/geglu): three matrices ``3·d·w`` and biases ``2·w + d``; else two, ``2·d·w`` and
        ``w + d``; biases only with ``bias="all"``."""
        gated = self.mlp in ("swiglu", "geglu")
        m = 3 if gated else 2
        weights, weights_f = m * d * width, f"{m}·d·{w}"
        if cfg.core.bias != "all":
            return weights, weights_f, 0, f"bias={cfg.core.bias}"
        w_ = f"({w})" if " " in w or "·" in w else w
        return (
            weights,
            weights_f,
            (2 * width + d) if gated else (width + d),
            f"2·{w_} + d" if gated else f"{w} + d",
        )

    def parameters(self, cfg: GPTConfig, s: Mapping[str, int]) -> list[Term]:
        d, d_ff = s["d"], s["d_ff"]
        w, w_f, b, b_f = self.mlp_size(cfg, d, d_ff, "d_ff")
        dense = s["L"] - s.get("L_moe", 0) > 0
        no_dense = "every block has experts"
        terms = [
            Term("mlp weights", w if dense else 0, w_f, matmul=True, blocks="dense", zero_note=no_dense),
            Term("mlp biases", b if dense else 0, b_f, blocks="dense", zero_note=b_f if dense else no_dense),
        ]
        return terms + (self._expert_terms(cfg, s) if self.n_experts is not None else [])

    def _expert_terms(self, cfg: GPTConfig, s: Mapping[str, int]) -> list[Term]:
        """A mixture-of-experts block's router, experts, shared experts and their biases."""
        d, E, k, d_e, n_shared = s["d"], s["E"], s["k"], s["d_e"], s.get("s", 0)
        width, width_f = (s["d_s"], "d_s") if "d_s" in s else (n_shared * d_e, "s·d_e")
        ex_w, ex_f, ex_b, ex_b_f = self.mlp_size(cfg, d, d_e, "d_e")
        terms = [Term("router", d * E, "d·E", matmul=True, blocks="moe")]
        if self.router_choice_bias:  # DeepSeek-V3's e_score_correction_bias: chooses, multiplies nothing
            terms.append(Term("router choice bias", E, "E", blocks="moe"))
        terms.append(
            Term("experts", E * ex_w, f"E·{ex_f}", matmul=True, blocks="moe", active=(k * ex_w, f"k·{ex_f}"))
        )
        sh_b, sh_b_f = 0, ""
        if n_shared:
            sh_w, sh_f, sh_b, sh_b_f = self.mlp_size(cfg, d, width, width_f)
            terms.append(Term("shared experts", sh_w, sh_f, matmul=True, blocks="moe"))
            if self.shared_expert_gate:
                terms.append(Term("shared expert gate", d, "d", matmul=True, blocks="moe"))
        if cfg.core.bias != "all":
            return terms
        one = f"({ex_b_f})"
        every = [(E, "E"), (E * ex_b, f"E·{one}")] + ([(sh_b, sh_b_f)] if n_shared else [])
        used = [(E, "E"), (k * ex_b, f"k·{one}")] + ([(sh_b, sh_b_f)] if n_shared else [])
        return [
            *terms,
            Term(
                "expert biases",
                sum(n for n, _ in every),
                " + ".join(f for _, f in every),
                blocks="moe",
                active=(sum(n for n, _ in used), " + ".join(f for _, f in used)),
            ),
        ]


__all__ = ["FeedForwardPart"]
