"""Sites: where in the model a sparse autoencoder reads, and the activations it reads there.

A :class:`Site` is one place of one layer: ``z`` (the attention output before ``W_O``, every head
concatenated: ``blocks.l.attn.z`` [B, H, T, d_k] read as [B, T, H·d_k], head-major as
TransformerLens's ``hook_z`` flattened), ``attn_out`` (after ``W_O``, [B, T, d]), ``resid_pre`` (the
residual stream entering the block, [B, T, d]) or ``mlp_out`` ([B, T, d]). Each has its SAELens /
TransformerLens hook name (``blocks.1.attn.hook_z``), so a file written here names its site the way
SAELens does.

:func:`site_activations` runs a batch of token ids only as deep as the site (the forward pass stops
in the hook that reads it: no later block, no unembedding) and returns ``[B, T, d_in]``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

#: Our hook point (``{l}`` the layer) and SAELens's hook name of each site kind.
SITE_KINDS: dict[str, tuple[str, str]] = {
    "z": ("blocks.{l}.attn.z", "blocks.{l}.attn.hook_z"),
    "attn_out": ("blocks.{l}.attn.out", "blocks.{l}.hook_attn_out"),
    "resid_pre": ("blocks.{l}.resid_pre", "blocks.{l}.hook_resid_pre"),
    "mlp_out": ("blocks.{l}.mlp.out", "blocks.{l}.hook_mlp_out"),
}


class SiteError(ValueError):
    """A site the model does not have (one line naming it and the valid ones)."""


class _Reached(Exception):
    """Ends a forward pass once the site has been read."""


@dataclass(frozen=True)
class Site:
    """``kind`` (one of :data:`SITE_KINDS`) of block ``layer``."""

    kind: str
    layer: int

    def __post_init__(self):
        if self.kind not in SITE_KINDS:
            raise SiteError(f"site {self.kind!r}: choose one of {', '.join(SITE_KINDS)}")

    @property
    def hook_point(self) -> str:
        """Our hook point's name (``blocks.1.attn.z``)."""
        return SITE_KINDS[self.kind][0].format(l=self.layer)

    @property
    def hook_name(self) -> str:
        """SAELens's (TransformerLens's) hook name (``blocks.1.attn.hook_z``)."""
        return SITE_KINDS[self.kind][1].format(l=self.layer)

    @classmethod
    def from_hook_name(cls, name: str) -> Site:
        """The site SAELens's ``hook_name`` names; :class:`SiteError` for one that names none."""
        parts = name.split(".")
        if len(parts) >= 3 and parts[0] == "blocks" and parts[1].isdigit():
            layer, rest = int(parts[1]), ".".join(parts[2:])
            for kind, (_, theirs) in SITE_KINDS.items():
                if theirs.split(".", 2)[2] == rest:
                    return cls(kind, layer)
        known = ", ".join(t.format(l="L") for _, t in SITE_KINDS.values())
        raise SiteError(f"hook_name {name!r} is not a site this app reads ({known})")

    def d_in(self, config) -> int:
        """The width of one token's activation here: ``H·d_k`` for ``z`` (the value heads' width),
        ``d_model`` otherwise."""
        if self.kind == "z":
            return config.attention.n_heads * config.v_dim
        return config.core.d_model

    def check(self, config) -> None:
        """Refuse, in one line, a layer the model does not have."""
        n = config.core.n_layers
        if not 0 <= self.layer < n:
            raise SiteError(f"layer {self.layer}: the model has layers 0 to {n - 1}")

    def label(self) -> str:
        names = {"z": "attention z", "attn_out": "attention out", "resid_pre": "residual stream",
                 "mlp_out": "MLP out"}  # fmt: skip
        return f"{names[self.kind]}, layer {self.layer}"


def flatten(site: Site, x: torch.Tensor) -> torch.Tensor:
    """The activation at ``site`` as [B, T, d_in]: ``z`` [B, H, T, d_k] → [B, T, H·d_k] (head-major)."""
    if site.kind == "z":
        B, H, T, d_k = x.shape
        return x.transpose(1, 2).reshape(B, T, H * d_k)
    return x


def unflatten(site: Site, x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of :func:`flatten`: [B, T, H·d_k] → [B, H, T, d_k] for ``z``; as is otherwise."""
    if site.kind == "z":
        B, T, D = x.shape
        return x.reshape(B, T, n_heads, D // n_heads).transpose(1, 2)
    return x


def site_activations(model, site: Site, ids: torch.Tensor, *, hooks=()) -> torch.Tensor:
    """float32 [B, T, d_in]: the activation at ``site`` of token ids ``ids`` [B, T], the forward pass
    stopped where the site is read (no later block runs). ``hooks``: interventions before it."""
    site.check(model.config)
    got: dict[str, torch.Tensor] = {}

    def keep(x, hook):
        got["x"] = flatten(site, x.detach()).float().clone()
        raise _Reached

    was = model.training
    model.eval()
    try:
        with torch.no_grad(), contextlib.suppress(_Reached), model.hooks([*hooks, (site.hook_point, keep)]):
            model(ids.to(model.device))
    finally:
        model.train(was)
    return got["x"]


__all__ = ["SITE_KINDS", "Site", "SiteError", "flatten", "site_activations", "unflatten"]
