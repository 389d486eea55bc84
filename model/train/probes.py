"""The Prober: when a training run traces its probe prompt, and the one producer of its probe frames.

A :class:`Prober` is a trainer callback (``Trainer(..., callbacks={"on_step_end": [prober]})`` or
``trainer.add_callback("on_step_end", prober)``), so the trace is taken in the training thread
between two steps. Whoever runs the trainer makes the prober and gives it the prompt's owner and
where frames go: the app's worker posts them to its mailbox, the command line writes them to the
run folder. The frames themselves (:class:`~model.interp.frame.AttentionFrame`, float16) are made
in :mod:`model.interp.probes`, by the prompt rule every path shares (the last tokens, BOS kept).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from model.interp.frame import AttentionFrame
from model.interp.probes import frame_of, trace_probe
from model.runtime import compute_lock

__all__ = ["Prober"]


class Prober:
    """When to probe, and the one producer of probe frames: a trainer's ``on_step_end`` callback.

    Due after every ``trainer.settings.probe_every``-th step (0: never), on rank 0 only;
    :meth:`refresh` probes at once when probing is on (the start of a run, an edited prompt). A probe
    traces the prompt, attaches the trace to the step's event and, when ``post`` is given, hands
    ``post`` an :class:`~model.interp.frame.AttentionFrame` (a fresh float16 numpy copy).

    ``prompt``: None → ``trainer.probe_prompt`` (the settings' prompt or the data's default); or a
    function returning the prompt, read at each probe, so the prompt lives only with its owner (an
    empty one falls back to the trainer's).
    """

    def __init__(
        self,
        prompt: Callable[[], str] | None = None,
        post: Callable[[AttentionFrame], Any] | None = None,
    ) -> None:
        self.prompt = prompt
        self.post = post

    def __call__(self, trainer: Any, event: Any) -> None:
        every = trainer.settings.probe_every
        if every and trainer.step % every == 0 and getattr(trainer, "rank", 0) == 0:
            event.trace = self.probe(trainer)

    def prompt_for(self, trainer: Any) -> str:
        return (self.prompt() if self.prompt is not None else "") or trainer.probe_prompt

    def trace(self, trainer: Any, prompt: str | None = None):
        """A :class:`~model.interp.trace.Trace` of ``prompt`` (default :meth:`prompt_for`) through the
        trainer's model in eval mode (:func:`~model.interp.probes.trace_probe`), under the compute lock.

        Characters the tokenizer lacks are replaced (a probe never fails on its prompt); a prompt
        longer than the context keeps its last tokens, the tokenizer's BOS in front.
        """
        return self._trace(trainer, prompt)[1]

    def _trace(self, trainer: Any, text: str | None = None):
        text = self.prompt_for(trainer) if text is None else text
        with compute_lock:
            trainer.apply_threads()
            return trace_probe(trainer.model, trainer.tokenizer, text)

    def probe(self, trainer: Any):
        """Trace the prompt now; post its frame; return the trace."""
        prompt, trace = self._trace(trainer)
        if self.post is not None:
            self.post(frame_of(trace, prompt, step=trainer.step))
        return trace

    def refresh(self, trainer: Any):
        """Probe now if probing is on; a prompt the tokenizer rejects never ends training (None)."""
        if not trainer.settings.probe_every:
            return None
        try:
            return self.probe(trainer)
        except Exception:
            return None
