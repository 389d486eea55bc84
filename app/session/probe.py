"""The probe: the prompt every live-attention view traces, and the idle model's probe frame.

:class:`Probe` is a part of the :class:`~app.session.session.Session` (``session.probe``). Its prompt is
the one copy: a running worker's :class:`~model.train.probes.Prober` reads it at each probe, so
an edit reaches the run at its next step. The prompt follows the data source's default prompt (and
a loaded model's or a followed run's) until the user types one. While no run probes, :meth:`refresh`
traces the shown model on the compute worker and hands the frame to the session.
"""

from __future__ import annotations

from typing import Any, Protocol

from app.core.state import Signal
from model.interp.frame import AttentionFrame
from model.interp.probes import probe_frame


class ProbeHost(Protocol):
    """What the :class:`Probe` reads of the session and tells it (:class:`app.session.session.Session`)."""

    model: Any
    tokenizer: Any

    @property
    def step(self) -> int: ...
    @property
    def is_training(self) -> bool: ...
    @property
    def is_following(self) -> bool: ...
    @property
    def compute(self) -> Any: ...
    def show_frames(self, frames: list[AttentionFrame]) -> None: ...


class Probe:
    """The probe prompt, the sample prompt, and the idle model's probe (see the module docstring).

    ``prompt``: what the live attention traces; ``sample_prompt``: what the samples generated while
    training start from (the data's default prompt, shortened); ``sample_every``: steps between two
    samples (0: none).
    """

    #: the probe prompt changed (str)
    promptChanged = Signal()

    def __init__(self, host: ProbeHost):
        self.host = host
        self.prompt = ""
        self.sample_prompt = ""
        self.sample_every = 100
        self._from_source = True  # the prompt follows the data (a model, a run) until the user edits it

    def set(self, text: str) -> None:
        """The user's prompt; raises the tokenizer's error (one line) for text it cannot read."""
        tok = self.host.tokenizer
        if tok is not None:
            if not text:
                raise ValueError("the probe prompt is empty")
            tok.encode(text)  # raises with a clear message for characters the vocabulary lacks
        self._set(text, from_source=False)
        self.refresh()

    def follow_source(self, source: Any) -> None:
        """The data changed: its default prompt, unless the user typed one."""
        if not self.prompt or self._from_source:
            self._set(source.default_prompt, from_source=True)
        self.sample_prompt = source.default_prompt[:16]

    def adopt(self, text: str) -> None:
        """A prompt that came with a model or a run (what its frames trace), not the user's."""
        if text != self.prompt:
            self._set(text, from_source=True)

    def after_open(self, before: Any, tokenizer: Any, source: Any) -> None:
        """A model was opened (its ``tokenizer``; the data was ``before`` and is ``source`` now).
        A model with a vocabulary of its own (a pretrained one) is probed with text, not with the
        previous data's own default prompt (the starter's random letters); a prompt the user typed
        stays."""
        from model.text.sources import prompt_for

        own_vocabulary = before is None or before.tokenizer != tokenizer
        carried = self.prompt
        if own_vocabulary and carried == getattr(before, "default_prompt", None):
            carried = ""
        source_prompt = "" if own_vocabulary else getattr(source, "default_prompt", "")
        self.adopt(prompt_for(tokenizer, carried, source_prompt))

    def _set(self, text: str, *, from_source: bool) -> None:
        self._from_source = from_source
        self.prompt = text
        self.promptChanged.emit(text)

    def refresh(self) -> None:
        """Trace the idle model's prompt again (off the GUI thread; a run probes its own)."""
        host = self.host
        if host.model is None or host.tokenizer is None or host.is_training or not self.prompt:
            return
        if host.is_following:  # the frames are the followed run's
            return
        model, tokenizer, prompt, step = host.model, host.tokenizer, self.prompt, host.step

        def job():
            return probe_frame(model, tokenizer, prompt, step)

        def done(frame, error):
            # a run that began and ended while this traced trained the same model past ``step``
            current = model is host.model and host.step == step
            idle = not host.is_training and not host.is_following
            if error is None and frame is not None and current and idle:
                host.show_frames([frame])

        # after whatever a page is waiting for (a new model's first grid): this frame is for the Train tab
        host.compute.submit("session.probe", job, done, background=True)


__all__ = ["Probe", "ProbeHost"]
