"""Sampling text from a GPT: greedy, temperature, top-k and top-p (nucleus), with a KV cache.

One decoding step turns the last position's logits ``z`` [B, V] into the next token:

* greedy: ``argmax_v z_v`` (also what ``temperature = 0`` means);
* otherwise ``p = softmax(z / τ)``, restricted to the ``k`` most likely tokens (top-k) and/or to the
  smallest set whose probabilities sum to at least ``top_p`` (nucleus, Holtzman et al. 2019), then
  renormalised and sampled from a ``torch.Generator`` seeded by ``seed``.

KV cache. The prompt is run once (prefill) and every later step feeds only the new token, reading
the keys and values of earlier positions from a :class:`~model.nn.gpt.KVCache` of ``context_length``
positions (``2·L·B·H_kv·T·d_k`` values: GQA/MQA shrink it by ``n_heads / n_kv_heads``). The model
only ever sees the last ``context_length`` tokens, exactly as without a cache: when the sequence
outgrows the context the window slides by one token, which moves every position, so the cache is
rebuilt from the last ``context_length`` tokens (a re-prefill per new token from then on, the cost
of uncached decoding). Cached and uncached greedy decoding therefore give the same tokens.

A prompt longer than the context is cropped from the left with a ``warnings.warn``.

``window`` narrows the context to the last ``window`` tokens: a model trained on sequences shorter than
its ``context_length`` has never trained its later learned positions, so it should read no more
(checkpoints record the ``seq_len`` they were trained with; :func:`trained_window` reads it).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING

import torch

from model.errors import AttentionLabError
from model.runtime import compute_lock

if TYPE_CHECKING:
    from model.nn.gpt import GPT, KVCache
    from model.text.tokens import Tokenizer

__all__ = [
    "NonFiniteLogits",
    "PromptCroppedWarning",
    "check_sampling",
    "check_seed",
    "generate",
    "sample_next",
    "stream",
    "trained_window",
]


class PromptCroppedWarning(UserWarning):
    """The prompt was longer than the model's context; its beginning was dropped."""


class NonFiniteLogits(AttentionLabError, RuntimeError):
    """The model's logits hold NaN or infinity (weights that are NaN, an overflow): nothing can be
    sampled from them. The message (one line) says where the first value that is not finite appears."""


#: Sampling temperatures outside [MIN_TEMPERATURE, MAX_TEMPERATURE] (other than 0 = greedy) are refused:
#: below, ``z / τ`` overflows to infinity and the softmax to NaN; above, sampling is uniform noise.
MIN_TEMPERATURE = 1e-3
MAX_TEMPERATURE = 100.0
#: The largest seed: torch's generators take a 64-bit seed.
MAX_SEED = 2**63 - 1


def check_seed(seed: int | None) -> None:
    """Raise ValueError unless ``seed`` is None or a whole number in [0, 2**63 - 1]."""
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed={seed!r} must be a whole number from 0 to 2**63 - 1")


def check_sampling(
    temperature: float, top_k: int | None, top_p: float | None, *, greedy: bool = False
) -> None:
    """Raise ValueError naming a sampling value that is not finite or not in its range.

    The ranges: ``temperature`` 0 (greedy) or from :data:`MIN_TEMPERATURE` to :data:`MAX_TEMPERATURE`;
    with ``greedy`` it is not used, yet must still be a finite number, 0 or more (a NaN is a mistake
    whatever reads it); ``top_k`` a whole number of at least 1, or None (off); ``top_p`` in (0, 1], or
    None (off); however small, the likeliest token stays (:func:`sample_next`).
    """
    ok = isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
    if greedy and not (ok and math.isfinite(temperature) and temperature >= 0):
        raise ValueError(
            f"temperature={temperature!r} must be a finite number, 0 or more (greedy decoding does not "
            "use it)"
        )
    if not greedy and not (ok and (temperature == 0 or MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE)):
        raise ValueError(
            f"temperature={temperature!r} must be 0 (greedy) or a number from {MIN_TEMPERATURE:g} to "
            f"{MAX_TEMPERATURE:g}, such as 0.8"
        )
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k={top_k!r} must be a whole number of at least 1")
    if top_p is not None and (
        isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0.0 < top_p <= 1.0
    ):
        raise ValueError(f"top_p={top_p!r} must be in (0, 1], e.g. 0.9")


def sample_next(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Next token ids [B, 1] from last-position logits [B, V] (see the module docstring)."""
    logits = logits.float()
    if greedy or temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        before = sorted_p.cumsum(dim=-1) - sorted_p  # mass of strictly more likely tokens
        drop = before >= top_p  # a top_p below float32's smallest number compares as 0:
        drop[..., 0] = False  # the likeliest token stays whatever top_p is
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if generator is not None and generator.device != probs.device:
        return torch.multinomial(probs.cpu(), 1, generator=generator).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator)


def _crop(idx: torch.Tensor, context: int) -> torch.Tensor:
    if idx.shape[1] > context:
        warnings.warn(
            f"the prompt has {idx.shape[1]} tokens but the model reads at most {context}: "
            f"using its last {context} tokens",
            PromptCroppedWarning,
            stacklevel=3,
        )
        return idx[:, -context:]
    return idx


def _checked(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    window: int | None,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    greedy: bool,
    seed: int | None,
) -> tuple[torch.Tensor, int]:
    """The prompt as [B, T] and the context the model reads (its own, or ``window`` when narrower),
    once the settings are checked: ``ValueError`` in one line otherwise."""
    check_sampling(temperature, top_k, top_p, greedy=greedy)  # greedy ignores the temperature
    check_seed(seed)
    if idx.dim() == 1:
        idx = idx[None]
    if idx.shape[1] == 0:
        raise ValueError("the prompt is empty: give at least one token")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens={max_new_tokens} must be 0 or more")
    context = model.config.core.context_length
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window={window!r} must be a whole number of at least 1")
        context = min(context, window)
    return idx, context


def _last_logits(
    model: GPT, cache: KVCache | None, vocab_limit: int | None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``forward(tokens)``: the last position's logits [B, V] (through ``cache`` when given), the ids
    from ``vocab_limit`` on never chosen."""

    def forward(tokens: torch.Tensor) -> torch.Tensor:
        logits, _ = model(tokens, kv_cache=cache)
        last = logits[:, -1, :]
        if vocab_limit is not None and vocab_limit < last.shape[-1]:
            last = last.clone()
            last[:, vocab_limit:] = float("-inf")
        return last

    return forward


def _check_finite(
    model: GPT, seen: torch.Tensor, logits: torch.Tensor, vocab_limit: int | None, step: int
) -> None:
    """Raise :class:`NonFiniteLogits` unless ``softmax(logits)`` is a distribution for every row of
    ``logits`` [B, V] (the model's prediction after ``seen`` [B, T], for new token ``step``; the ids
    from ``vocab_limit`` on are −∞ on purpose): no NaN, no +∞ (``∞ − ∞`` in the softmax), and some
    logit above −∞ (−∞ alone is an impossible token)."""
    logits = logits[:, :vocab_limit] if vocab_limit is not None else logits
    if bool(torch.isfinite(logits).all()):  # every step's case: one pass over the vocabulary
        return
    nan, pos = torch.isnan(logits), torch.isposinf(logits)
    if not bool((nan | pos).any()) and bool((logits > float("-inf")).any(dim=-1).all()):
        return
    counts = ", ".join(
        f"{n:,} {kind}"
        for n, kind in (
            (int(nan.sum()), "NaN"),
            (int(pos.sum()), "+∞"),
            (int(torch.isneginf(logits).sum()), "−∞"),
        )
        if n
    )
    raise NonFiniteLogits(
        f"the model's logits for new token {step + 1} are not finite ({counts} of {logits.numel():,}), "
        f"so no token can be sampled: {_where_non_finite(model, seen)}"
    )


def _where_non_finite(model: GPT, idx: torch.Tensor) -> str:
    """Where values that are not finite first appear when ``model`` reads ``idx`` [B, T]: the first
    hook point, in forward order, whose activation holds NaN or ±∞ (one more forward pass, without
    the cache), and the first weight tensor that does (registration order), as one line."""
    weights = [
        name
        for name, p in model.named_parameters()
        if p.is_floating_point() and not bool(torch.isfinite(p).all())
    ]
    first: list[str] = []

    def look(x, hook):
        tensor = not first and isinstance(x, torch.Tensor) and x.is_floating_point()
        if tensor and not bool(torch.isfinite(x).all()):
            first.append(hook.name)

    with torch.no_grad(), model.hooks([(name, look) for name in model.hook_points()]):
        model(idx)
    found = f"they first appear at {first[0]}" if first else "no activation before them holds NaN or ±∞"
    if weights:
        more = f" and {len(weights) - 1} more" if len(weights) > 1 else ""
        return f"{found}; the weights hold NaN or ±∞ in {weights[0]}{more}"
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    return f"{found}; every weight is finite, so the numbers outgrew {dtype}"


def _advance(
    seen: torch.Tensor,
    nxt: torch.Tensor,
    context: int,
    cache: KVCache | None,
    forward: Callable[[torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor]:
    """``seen`` with the new token ``nxt`` (its last ``context`` tokens) and the logits after it."""
    seen = torch.cat([seen, nxt], dim=1)
    if seen.shape[1] > context:  # slide: every position moves, rebuild the cache
        seen = seen[:, -context:]
        if cache is not None:
            cache.reset()
        return seen, forward(seen)
    if cache is not None:
        return seen, forward(nxt)  # only the new token; earlier keys/values are cached
    return seen, forward(seen)


def _steps(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float,
    top_k: int | None,
    top_p: float | None,
    greedy: bool,
    seed: int | None,
    use_cache: bool,
    vocab_limit: int | None = None,
    window: int | None = None,
    stop_ids: Iterable[int] = (),
) -> Iterator[torch.Tensor]:
    """Yield each new token [B, 1]; the model is in eval mode meanwhile. Once every row has produced
    one of ``stop_ids`` (its end-of-sequence or end-of-turn tokens) no further token is made."""
    from model.nn.gpt import KVCache

    idx, context = _checked(model, idx, max_new_tokens, window, temperature, top_k, top_p, greedy, seed)
    device = next(model.parameters()).device
    idx = _crop(idx.to(device), context)
    generator = None
    if seed is not None:
        generator = torch.Generator(device=device if device.type == "cuda" else "cpu").manual_seed(int(seed))
    dtype = next(model.parameters()).dtype
    was_training = model.training
    model.eval()
    seen = idx  # the last <= context tokens: what the model reads
    if use_cache:  # 2·L·B·h_kv·T·d_k values: a context of 10**9 positions is refused, not allocated
        from model.budget.sizing import check, generation_need

        need = generation_need(model.config, context, batch=idx.shape[0], bytes_per_value=dtype.itemsize)
        check(need, device=device)
    cache = KVCache(model.config, idx.shape[0], context, device=device, dtype=dtype) if use_cache else None
    forward = _last_logits(model, cache, vocab_limit)
    stops = torch.tensor(sorted({int(i) for i in stop_ids}), dtype=torch.long, device=device)
    ended = torch.zeros(idx.shape[0], dtype=torch.bool, device=device)
    try:
        with torch.no_grad():
            with compute_lock:
                logits = forward(seen)
                _check_finite(model, seen, logits, vocab_limit, 0)
            for i in range(max_new_tokens):
                if stops.numel() and bool(ended.all()):
                    return
                with compute_lock:
                    nxt = sample_next(
                        logits,
                        temperature=temperature,
                        top_k=top_k,
                        top_p=top_p,
                        greedy=greedy,
                        generator=generator,
                    )
                    if i + 1 < max_new_tokens:
                        seen, logits = _advance(seen, nxt, context, cache, forward)
                        _check_finite(model, seen, logits, vocab_limit, i + 1)
                if stops.numel():
                    ended |= torch.isin(nxt[:, 0], stops)
                yield nxt
    finally:
        model.train(was_training)


def generate(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    seed: int | None = None,
    use_cache: bool = True,
    window: int | None = None,
    stop_ids: Iterable[int] = (),
) -> torch.Tensor:
    """Extend ``idx`` [B, T] (or [T]) by ``max_new_tokens`` sampled tokens: returns [B, T + new].

    ``stop_ids``: generation ends once every row has produced one of them (kept, as transformers
    keeps its EOS): pass a tokenizer's ``stop_ids``; none by default.

    The returned tensor starts with the whole prompt, even when the model read only its last
    ``context_length`` tokens (a :class:`PromptCroppedWarning` says so). ``seed`` makes sampling
    reproducible; ``use_cache=False`` recomputes the whole window every step (the reference the
    cache is tested against); ``window`` reads at most that many tokens (see the module docstring).
    Each step takes :data:`model.runtime.compute_lock`.
    """
    squeeze = idx.dim() == 1
    if squeeze:
        idx = idx[None]
    new = list(
        _steps(
            model,
            idx,
            max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            greedy=greedy,
            seed=seed,
            use_cache=use_cache,
            window=window,
            stop_ids=stop_ids,
        )
    )
    out = torch.cat([idx.to(new[0].device) if new else idx, *new], dim=1)
    return out[0] if squeeze else out


def stream(
    model: GPT,
    tokenizer: Tokenizer,
    prompt: str,
    max_new_tokens: int = 200,
    *,
    temperature: float = 0.8,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    seed: int | None = None,
    use_cache: bool = True,
    window: int | None = None,
    stop: bool = True,
    stop_ids: Iterable[int] | None = None,
) -> Generator[str, None, None]:
    """Yield the text of each new token as it is produced (one ``yield`` per token), ending at the
    tokenizer's end-of-sequence or end-of-turn token (its ``stop_ids``, or ``stop_ids`` when given;
    ``stop=False`` goes on). The stop token's own text (``<|im_end|>``) is never yielded: its step
    yields only what the earlier tokens held back.

    The prompt is encoded strictly (unknown characters raise the tokenizer's error, which names
    them). Whenever a token's piece splits a character (the byte tokenizer, byte-level BPE such as
    GPT-2's, byte-fallback vocabularies: an emoji or most CJK characters take 2-4 tokens), the decoded
    text ends in U+FFFD until the rest arrives. What is shown stops before such a trailing run (a token
    may end one character and begin the next, so a run can last several tokens: ``""`` is yielded
    meanwhile); the last token shows everything, so the joined output is the text the tokenizer decodes
    from all the new ids. ``window`` as in :func:`generate`.
    """
    ids = tokenizer.encode(prompt)
    if not ids:
        raise ValueError("the prompt is empty: give at least one character")
    idx = torch.tensor([ids], dtype=torch.long)
    stops = (
        frozenset(int(i) for i in (tokenizer.stop_ids if stop_ids is None else stop_ids))
        if stop
        else frozenset()
    )
    new_ids: list[int] = []
    emitted = ""
    for tok in _steps(
        model,
        idx,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        greedy=greedy,
        seed=seed,
        use_cache=use_cache,
        vocab_limit=tokenizer.vocab_size,
        window=window,
        stop_ids=stops,
    ):
        new_ids.append(int(tok[0, 0]))
        ended = new_ids[-1] in stops
        text = tokenizer.decode(new_ids[:-1] if ended else new_ids)
        last = len(new_ids) == max_new_tokens or ended
        if not last:  # U+FFFD at the end may be a character still incomplete
            text = text.rstrip("\ufffd")
        delta = text[len(emitted) :]
        if len(text) >= len(emitted):
            emitted = text
        yield delta


def trained_window(checkpoint) -> int | None:
    """The sequence length a checkpoint was trained with (from its meta or training state), or None.

    Pass it as ``window`` so generation reads no more tokens than the model learned positions for.
    """
    for holder in (getattr(checkpoint, "meta", None) or {}, getattr(checkpoint, "train_state", None) or {}):
        value = holder.get("seq_len")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
