"""The sparse autoencoder: an activation ``x`` [..., d_in] written as a sparse sum of feature directions.

    f  = σ((x − b_dec) W_enc + b_enc)          [..., d_sae]   the feature activations
    x̂  = f W_dec + b_dec                       [..., d_in]    the reconstruction
    x  = x̂ + ε                                                 ε: the error term

``W_enc`` [d_in, d_sae], ``b_enc`` [d_sae], ``W_dec`` [d_sae, d_in] (row ``i``: feature ``i``'s
decoder direction), ``b_dec`` [d_in], named and shaped as SAELens names and shapes them. ``σ``:

* ``topk`` — keep the ``k`` largest pre-activations of each token (then ReLU), zero the rest
  (Gao et al. 2024): L0 ≤ k by construction;
* ``standard`` — ReLU, sparsity bought by an L1 penalty ``λ Σ_i f_i ‖W_dec,i‖`` in the loss
  (Bricken et al. 2023).

``apply_b_dec_to_input``: subtract ``b_dec`` before encoding (SAELens's default True).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn

from model.interp.sae.site import Site

ARCHITECTURES = ("topk", "standard")


@dataclass
class SAEConfig:
    """What an SAE is: its site, widths and sparsity. ``model_name``: the model it was trained on."""

    site: Site
    d_in: int
    d_sae: int
    architecture: str = "topk"
    k: int = 32
    l1_coefficient: float = 5.0
    apply_b_dec_to_input: bool = True
    model_name: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"architecture {self.architecture!r}: choose one of {', '.join(ARCHITECTURES)}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["site"] = {"kind": self.site.kind, "layer": self.site.layer}
        return d


class SparseAutoencoder(nn.Module):
    """The SAE of :class:`SAEConfig` (module docstring for the formulas and shapes)."""

    def __init__(self, config: SAEConfig):
        super().__init__()
        self.config = config
        d_in, d_sae = config.d_in, config.d_sae
        self.W_enc = nn.Parameter(torch.empty(d_in, d_sae))
        self.b_enc = nn.Parameter(torch.zeros(d_sae))
        self.W_dec = nn.Parameter(torch.empty(d_sae, d_in))
        self.b_dec = nn.Parameter(torch.zeros(d_in))
        self.reset_parameters()

    def reset_parameters(self, seed: int | None = None) -> None:
        """Decoder rows random unit vectors, the encoder their transpose, biases zero (SAELens's and
        Gao et al.'s initialisation)."""
        g = torch.Generator().manual_seed(seed) if seed is not None else None
        with torch.no_grad():
            w = torch.randn(self.config.d_sae, self.config.d_in, generator=g)
            w /= w.norm(dim=1, keepdim=True)
            self.W_dec.copy_(w)
            self.W_enc.copy_(w.T)
            self.b_enc.zero_()
            self.b_dec.zero_()

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """``(x − b_dec) W_enc + b_enc`` [..., d_sae] (``b_dec`` subtracted when ``apply_b_dec_to_input``)."""
        if self.config.apply_b_dec_to_input:
            x = x - self.b_dec
        return x @ self.W_enc + self.b_enc

    def activation(self, pre: torch.Tensor) -> torch.Tensor:
        """``σ(pre)``: TopK then ReLU, or ReLU (module docstring)."""
        if self.config.architecture == "topk":
            k = min(self.config.k, pre.shape[-1])
            top = pre.topk(k, dim=-1)
            return torch.zeros_like(pre).scatter_(-1, top.indices, top.values.relu())
        return pre.relu()

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The feature activations ``f`` [..., d_sae] of ``x`` [..., d_in]."""
        return self.activation(self.pre_activations(x))

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        """The reconstruction ``f W_dec + b_dec`` [..., d_in]."""
        return f @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))


__all__ = ["ARCHITECTURES", "SAEConfig", "SparseAutoencoder"]
