"""The corpus run: a model streamed over ``N`` prompts of ``T`` tokens, every head scored on each.

:func:`corpus_run` draws the prompts from a data source (:func:`model.text.sources.resolve_source`,
encoded with the model's tokenizer; each prompt is the tokenizer's BOS prefix, if it has one, then a
window of the corpus: :meth:`~model.text.datasource.DataSource.sample_windows`), ``batch_size`` at a
time, and runs each batch once through the model with reading hooks
(:class:`~model.interp.corpus.statistics.Collector`) that reduce every layer's pattern [B, H, T, T] to
scores [B, H] before the next layer is computed. A second pass measures induction on repeated random
tokens for the first ``random_prompts`` prompts, as the Metrics page does (a random block of
``P = min(24, T // 2)`` ids twice, :func:`~model.interp.analysis.heads.repeated_sequence` with seed
``seed + n`` for prompt ``n``). The first ``shared_prompts`` prompts also compare every pair of heads'
patterns, in the same pass (:mod:`~model.interp.corpus.patterns`).

Memory: the model, one batch's forward pass (one layer's square at a time), and the kept statistics:
``S·N·L·H`` float32 per-prompt scores and the top examples' heaps, ``2·L·H·k`` examples of
``2(2c + 1)`` ids each, whatever ``N``; the pattern similarity's ``(L·H)²`` sums, and while a batch
is in flight its shared prompts' rows (``b·L·H·T(T + 1)/2`` float16). Progress:
:func:`model.progress.report` in prompts after each batch; a cancel (:func:`model.progress.check`,
every block of every forward pass) stops it within one block and writes nothing.

The cache: a finished run is saved as ``.npz`` (no pickle) under ``cache_root()/heads/`` by a SHA-256
of (the weights' identity: :func:`weights_digest`; the tokenizer; the corpus's identity, its content
hash included; the settings; :data:`CODE_VERSION`), written atomically; the same run again is read
from it.
"""

from __future__ import annotations

import hashlib
import json
import time
import zipfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.files import cache_root
from model.interp.analysis.heads import repeated_sequence
from model.interp.corpus.result import CorpusSettings, HeadScores
from model.interp.corpus.similarity import bootstrap_interval, cluster_heads
from model.interp.corpus.statistics import SCORES, Collector
from model.interp.export import save_inspection
from model.interp.measures import INDUCTION_PERIOD
from model.interp.trace import run_with_trace
from model.progress import report
from model.text.datasource import DataError, DataSource
from model.text.sources import resolve_source

#: Bumped when what a run computes changes, so an older cached result is not read as a newer one.
CODE_VERSION = 3

#: Logit bytes one batch may hold (B·T·V float32): the auto batch size keeps under it.
BATCH_LOGIT_BYTES = 256 * 2**20


class CorpusError(DataError):
    """Settings a corpus run cannot take (one line naming the value)."""


def check_settings(settings: CorpusSettings, context_length: int) -> None:
    """Refuse, in one line, settings no run can take: N or T below 1, T past the model's context."""
    if settings.n_prompts < 1:
        raise CorpusError(f"prompts={settings.n_prompts}: give how many prompts to read, 1 or more")
    if not 2 <= settings.seq_len <= context_length:
        raise CorpusError(
            f"seq_len={settings.seq_len}: a prompt is 2 to {context_length} tokens (the model's context)"
        )
    for name in ("top_k", "resamples", "n_clusters", "window", "random_prompts", "shared_prompts"):
        if getattr(settings, name) < 1:
            raise CorpusError(f"{name}={getattr(settings, name)}: must be 1 or more")
    if settings.batch_size < 0 or settings.context < 0 or settings.seed < 0:
        raise CorpusError("batch_size, context and seed must be 0 or more")


def weights_digest(model) -> str:
    """SHA-256 of the model's tensors as a sample: every tensor's name, shape and dtype, and 4,096 of its
    values evenly spaced (all of a smaller one). Cheap for any size; two checkpoints of one training
    run differ in it."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        if not isinstance(t, torch.Tensor):
            continue
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        flat = t.detach().reshape(-1)
        if flat.numel():
            k = min(4096, flat.numel())
            idx = torch.arange(k) * (flat.numel() - 1) // max(1, k - 1)  # whole numbers: exact to the end
            h.update(flat[idx].cpu().to(torch.float64).numpy().tobytes())
    return h.hexdigest()


def _tokenizer_digest(tokenizer) -> str:
    V = int(tokenizer.vocab_size)
    ids = sorted({int(i) for i in np.linspace(0, V - 1, min(V, 1024))})
    prefix = getattr(tokenizer, "prefix_ids", [])
    raw = json.dumps([type(tokenizer).__name__, V, tokenizer.token_strings(ids), prefix])
    return hashlib.sha256(raw.encode()).hexdigest()


def cache_key(model, tokenizer, source: DataSource, settings: CorpusSettings) -> str:
    """The run's cache key (module docstring)."""
    parts = [
        CODE_VERSION, weights_digest(model), _tokenizer_digest(tokenizer), source.identity(), asdict(settings)
    ]  # fmt: skip
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def cache_path(key: str, cache_dir: str | Path | None = None) -> Path:
    base = Path(cache_dir) if cache_dir is not None else cache_root() / "heads"
    return base / f"{key}.npz"


def _read_cache(path: Path) -> HeadScores | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            return HeadScores.from_arrays({k: z[k] for k in z.files})
    except (OSError, KeyError, EOFError, zipfile.BadZipFile, ValueError, TypeError):
        return None


def save_npz(path: str | Path, result: HeadScores) -> Path:
    """Write ``result`` (:meth:`HeadScores.arrays`) as an ``.npz``, atomically."""
    return save_inspection(path, result.arrays())


def batch_size_for(config, settings: CorpusSettings) -> int:
    """``settings.batch_size``, or (0) as many prompts as keep a batch's logits under
    :data:`BATCH_LOGIT_BYTES`, from 1 to 16."""
    if settings.batch_size:
        return int(settings.batch_size)
    per_prompt = settings.seq_len * config.core.vocab_size * 4
    return max(1, min(16, BATCH_LOGIT_BYTES // max(1, per_prompt)))


def open_source(spec: str, tokenizer) -> DataSource:
    """The corpus ``spec`` encoded with the model's tokenizer (:func:`resolve_source`)."""
    return resolve_source(spec, tokenizer=tokenizer, reading=True)


def corpus_run(
    model,
    tokenizer,
    settings: CorpusSettings,
    *,
    source: DataSource | None = None,
    cache_dir: str | Path | None = None,
    use_cache: bool = True,
) -> HeadScores:
    """Every head of ``model`` scored over the corpus ``settings`` name (module docstring): a
    :class:`HeadScores`. ``source``: the corpus already opened (else :func:`open_source`);
    ``cache_dir``: where results are cached (default ``cache_root()/heads``); ``use_cache=False``
    neither reads nor writes the cache. Raises :class:`CorpusError` / :class:`DataError` in one line
    for settings or a corpus no run can take, before any forward pass, and
    :class:`model.progress.Cancelled` when cancelled (the cache untouched)."""
    cfg = model.config
    check_settings(settings, cfg.core.context_length)
    source = source if source is not None else open_source(settings.corpus, tokenizer)
    prefix = bos_prefix(tokenizer, settings.seq_len)
    # a corpus shorter than one prompt is refused here, before anything is run
    source.sample_windows(1, settings.seq_len - len(prefix), torch.Generator().manual_seed(settings.seed))
    key = cache_key(model, tokenizer, source, settings)
    path = cache_path(key, cache_dir)
    if use_cache and path.is_file():
        cached = _read_cache(path)
        if cached is not None:
            cached.from_cache = True
            return cached
    t0 = time.perf_counter()
    collector = _stream(model, source, settings, prefix)
    result = _result(collector, settings, tokenizer, {"key": key, "corpus": source.identity()})
    result.seconds = time.perf_counter() - t0
    if use_cache:
        save_npz(path, result)
    return result


def prompt_batches(source: DataSource, settings: CorpusSettings, prefix: list[int], batch_size: int):
    """The run's prompts, ``(first, ids [B, T])`` batch by batch: ``prefix`` (the BOS) then a window of
    ``T − len(prefix)`` tokens of ``source``, drawn from one generator seeded by ``settings.seed``."""
    generator = torch.Generator().manual_seed(settings.seed)
    N, T = settings.n_prompts, settings.seq_len
    for start in range(0, N, batch_size):
        n = min(batch_size, N - start)
        windows = source.sample_windows(n, T - len(prefix), generator)
        yield start, torch.cat([torch.tensor([prefix] * n, dtype=torch.long).reshape(n, -1), windows], dim=1)


def bos_prefix(tokenizer, seq_len: int) -> list[int]:
    """The ids every prompt starts with: the tokenizer's ``prefix_ids`` (a BOS), if it has one."""
    return [int(i) for i in (getattr(tokenizer, "prefix_ids", None) or [])][: seq_len - 1]


def _stream(model, source: DataSource, settings: CorpusSettings, prefix: list[int]) -> Collector:
    """Run every batch through the model with the collector's hooks (module docstring)."""
    cfg = model.config
    N, T = settings.n_prompts, settings.seq_len
    collector = Collector(
        cfg, N, top_k=settings.top_k, context=settings.context, window=settings.window, prefix=len(prefix),
        shared=settings.shared_prompts,
    )  # fmt: skip
    points = set(model.hook_points())
    period = max(2, min(INDUCTION_PERIOD, T // 2))
    report(0, N, "prompts")
    for start, ids in prompt_batches(source, settings, prefix, batch_size_for(cfg, settings)):
        n = len(ids)
        collector.at(start, ids.numpy())
        run_with_trace(model, ids, kinds=(), hooks=collector.hooks(points))
        seeds = range(settings.seed + start, settings.seed + min(start + n, settings.random_prompts))
        rand = np.array([repeated_sequence(cfg.core.vocab_size, period, seed=s).tokens for s in seeds])
        if len(rand):
            collector.at(start, rand)
            run_with_trace(model, torch.from_numpy(rand), kinds=(), hooks=collector.random_hooks(period))
        report(start + n, N, "prompts")
    return collector


def _result(collector: Collector, settings: CorpusSettings, tokenizer, identity: dict[str, Any]):
    """Intervals, clusters and example texts of what the collector kept."""
    names = list(SCORES)
    per_prompt = collector.values
    mean, low, high = bootstrap_interval(np.moveaxis(per_prompt, 1, 0), settings.resamples)
    similarity = collector.similarity.matrix()
    router: tuple[np.ndarray | None, ...] = (None, None, None)
    if collector.router_load is not None:
        router = bootstrap_interval(collector.router_load, settings.resamples)
    return HeadScores(
        settings=settings,
        names=names,
        per_prompt=per_prompt,
        mean=mean,
        low=low,
        high=high,
        examples=collector.top,
        example_texts={kind: ex.texts(tokenizer) for kind, ex in collector.top.items()},
        clusters=cluster_heads(mean, names, settings.n_clusters),
        pattern_similarity=similarity,
        pattern_clusters=cluster_heads(mean, names, settings.n_clusters, similarity=similarity),
        router_load=router[0],
        router_low=router[1],
        router_high=router[2],
        identity=identity,
    )


__all__ = [
    "BATCH_LOGIT_BYTES",
    "CODE_VERSION",
    "CorpusError",
    "batch_size_for",
    "bos_prefix",
    "cache_key",
    "cache_path",
    "check_settings",
    "corpus_run",
    "open_source",
    "prompt_batches",
    "save_npz",
    "weights_digest",
]
