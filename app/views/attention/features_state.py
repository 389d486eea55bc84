"""What the Attention tab's SAE page draws, without Qt: the features of a sparse autoencoder on the
tab's prompt (:class:`FeaturesOnPrompt`), computed by :func:`read_features` in the compute worker from
:mod:`model.interp.sae.prompt` and :mod:`model.interp.sae.readout`.

* **Active features.** With ``f = SAE(x)`` [T, F] the features of the site's activation ``x`` [T, d_in]
  at each position (:func:`~model.interp.sae.prompt.prompt_features`), the page maps the ``N``
  features whose largest activation over the prompt, ``max_t f[t, i]``, is largest
  (:func:`strongest_features`): ``table`` [N, T], ``f[t, i]`` (0 where the feature is off). By
  default the first position is left out of that max (``skip_first``): the first token's activation
  is often orders of magnitude larger than the rest (the massive activation of an attention sink),
  and would pick every feature shown. Each feature is named by its index and the token its decoder
  direction promotes most through the unembedding (:func:`~model.interp.sae.readout.feature_logits`).
* **Logit attribution to features.** The site's direct contribution to ``logit[t, token]``, split as
  ``x · u = Σ_i f_i (W_dec,i · u) + b_dec · u + ε · u`` (exact: :func:`~model.interp.sae.prompt.
  feature_logit_attribution`); the page draws the :data:`BARS` largest feature terms, the rest summed
  into one bar, the decoder bias and the error term (:func:`attribution_bars`), which add up to the
  site's contribution.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from model.interp.causal import one_token
from model.interp.prompt import PromptError, prompt_of_ids
from model.interp.sae.format import SAEFileError, load_sae
from model.interp.sae.prompt import (
    FeatureLogitAttribution,
    PromptFeatures,
    feature_logit_attribution,
    prompt_features,
)
from model.interp.sae.readout import feature_logits
from model.interp.sae.sae import SparseAutoencoder
from model.interp.sae.site import Site, SiteError
from model.text.tokens import visible

#: Features the map shows by default (the strongest on the prompt).
SHOWN = 16
#: Feature terms drawn as bars of their own (the rest are summed into one).
BARS = 10
#: Tokens named for what a feature promotes and suppresses.
LOGIT_TOKENS = 5


@dataclass(frozen=True)
class FeaturesInputs:
    """What one reading is computed from: the tab's run ``request`` (its prompt), the SAE's folder
    ``sae``, the features ``shown`` in the map (ranked without the first position when ``skip_first``),
    and the logit attributed: ``token`` ("" = the model's top prediction) at ``position`` (-1 = the
    last)."""

    request: int
    sae: str
    shown: int = SHOWN
    skip_first: bool = True
    position: int = -1
    token: str = ""


@dataclass(frozen=True)
class FeaturesFailure:
    """Why no reading could be made (one line: the SAE's folder refused, a token of two tokens)."""

    message: str


@dataclass
class FeaturesOnPrompt:
    """The features of one SAE on one prompt (module docstring). ``labels`` [T] the prompt's tokens;
    ``active`` the features on at each position; ``shown`` [N] and ``table`` [N, T] the map's;
    ``promoted`` / ``suppressed``: feature -> the tokens it promotes / suppresses most, strongest first;
    ``attribution`` (None with ``attribution_error`` when it cannot be made, e.g. a Post-LN model) and
    ``token_label`` the token it is of."""

    inputs: FeaturesInputs
    prompt: str
    site: Site
    d_sae: int
    labels: list[str]
    active: PromptFeatures
    shown: np.ndarray
    table: np.ndarray
    promoted: dict[int, list[str]] = field(default_factory=dict)
    suppressed: dict[int, list[str]] = field(default_factory=dict)
    attribution: FeatureLogitAttribution | None = None
    attribution_error: str = ""
    token_label: str = ""

    def name(self, feature: int) -> str:
        """``#i 'tok'``: the feature's index and the token it promotes most."""
        top = self.promoted.get(int(feature))
        return f"#{int(feature)} ‘{top[0]}’" if top else f"#{int(feature)}"


def strongest_features(active: PromptFeatures, n: int, first: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` features whose largest activation at positions ``first``, ``first + 1``, ... is
    largest (ties: the lower index first) [≤ n], and their activation at every position [≤ n, T]
    (0 where off)."""
    T = len(active.features)
    best: dict[int, float] = {}
    for t in range(min(first, T - 1), T):
        for i, v in active.active(t):
            best[i] = max(best.get(i, 0.0), v)
    shown = np.array(sorted(best, key=lambda i: (-best[i], i))[: max(0, n)], dtype=np.int64)
    row = {int(i): r for r, i in enumerate(shown)}
    table = np.zeros((len(shown), T), dtype=np.float32)
    for t in range(T):
        for i, v in active.active(t):
            if i in row:
                table[row[i], t] = v
    return shown, table


@dataclass(frozen=True)
class Bar:
    """One bar of the attribution: ``feature`` (None for the summed rest, the bias, the error),
    ``label`` and ``value`` (its part of the logit)."""

    feature: int | None
    label: str
    value: float


def attribution_bars(reading: FeaturesOnPrompt, n: int = BARS) -> list[Bar]:
    """The bars of the attribution (module docstring): the ``n`` largest feature terms ``f_i (W_dec,i ·
    u)`` (largest ``|·|`` first), the other active features' summed, ``b_dec · u`` and ``ε · u``. Their
    values add up to the site's direct contribution ``x · u``."""
    a = reading.attribution
    if a is None:
        return []
    bars = [
        Bar(int(i), reading.name(int(i)), float(c))
        for i, c in zip(a.features[:n], a.contributions[:n], strict=True)
    ]
    rest = a.contributions[n:]
    if len(rest):
        bars.append(Bar(None, f"{len(rest)} other{'s' if len(rest) > 1 else ''}", float(rest.sum())))
    bars.append(Bar(None, "b_dec", float(a.bias)))
    bars.append(Bar(None, "error ε", float(a.error)))
    return bars


def _token_texts(tokenizer, ids) -> list[str]:
    return [visible(s) for s in tokenizer.token_strings([int(i) for i in ids])]


def _attribution(model, tokenizer, sae: SparseAutoencoder, ids: list[int], inputs: FeaturesInputs):
    """(the attribution, '') or (None, why not) for the logit the inputs name."""
    try:
        token = one_token(tokenizer, inputs.token, "token") if inputs.token else None
        return feature_logit_attribution(model, sae, ids, position=inputs.position, token=token), ""
    except (PromptError, ValueError) as exc:
        return None, str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def read_features(
    model, tokenizer, sae: SparseAutoencoder, ids: list[int], inputs: FeaturesInputs, prompt: str = ""
) -> FeaturesOnPrompt:
    """The reading of ``sae`` on the prompt ``ids`` for ``inputs`` (module docstring): one pass as deep as
    the site for the active features, one full pass for the attribution."""
    active = prompt_features(model, sae, ids)
    shown, table = strongest_features(active, inputs.shown, 1 if inputs.skip_first else 0)
    attribution, why = _attribution(model, tokenizer, sae, ids, inputs)
    named = list(
        dict.fromkeys(
            [*shown.tolist(), *([] if attribution is None else attribution.features[:BARS].tolist())]
        )
    )
    logits = feature_logits(model, sae, named, k=LOGIT_TOKENS)
    promoted = dict(zip(named, (_token_texts(tokenizer, row) for row in logits.top_ids), strict=True))
    suppressed = dict(zip(named, (_token_texts(tokenizer, row) for row in logits.bottom_ids), strict=True))
    token_label = _token_texts(tokenizer, [attribution.token])[0] if attribution is not None else ""
    return FeaturesOnPrompt(
        inputs=inputs, prompt=prompt, site=sae.config.site, d_sae=sae.config.d_sae,
        labels=list(prompt_of_ids(tokenizer, ids).labels), active=active, shown=shown, table=table,
        promoted=promoted, suppressed=suppressed, attribution=attribution, attribution_error=why,
        token_label=token_label,
    )  # fmt: skip


def open_and_read(
    model,
    tokenizer,
    folder: str,
    sae: SparseAutoencoder | None,
    ids: list[int],
    inputs: FeaturesInputs,
    prompt: str = "",
) -> tuple[SparseAutoencoder | None, FeaturesOnPrompt | FeaturesFailure]:
    """The compute worker's job: open the SAE of ``folder`` unless ``sae`` is it (checked against the
    model, :func:`~model.interp.sae.format.load_sae`), then :func:`read_features`; a folder that cannot
    be opened is a :class:`FeaturesFailure` of one line."""
    try:
        if sae is None:
            sae = load_sae(folder, model_config=model.config)
        return sae, read_features(model, tokenizer, sae, ids, inputs, prompt)
    except (SAEFileError, SiteError) as exc:
        return None, FeaturesFailure(str(exc).splitlines()[0])


__all__ = [
    "BARS",
    "SHOWN",
    "Bar",
    "FeaturesFailure",
    "FeaturesInputs",
    "FeaturesOnPrompt",
    "attribution_bars",
    "open_and_read",
    "read_features",
    "strongest_features",
]
