"""The SAE page's sparse autoencoder and its job (:class:`FeaturesJobs`), without Qt.

**The SAE** is a folder in SAELens's format (``cfg.json`` + ``sae_weights.safetensors``). The page
offers every folder announced on the session's hub (:class:`~app.session.messages.SAEChosen`: trained
or opened in the Features tab, or opened on this page), the most recent first, and takes the most
recent when none is chosen yet. A folder is checked against the model shown the moment it is chosen,
and again when the model changes, from its ``cfg.json`` alone
(:func:`~model.interp.sae.format.read_sae_config`: no tensor read): an SAE of another model or site
shape is refused in one line and the choice stays as it was.

**The job**, ``attention.run.attention.features`` (a follow-up of the tab's run, so a new prompt
supersedes it), opens the SAE once per folder, file and model and reads it on the run's tokens
(:func:`~app.views.attention.features_state.open_and_read`), in the session's compute worker (Cancel,
never on the GUI thread). Its reading is kept with the :class:`~app.views.attention.features_state.
FeaturesInputs` it was made for; the page shows a reading of other inputs only greyed, as the previous
one, until the new one is in.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from app.session.messages import SAEChosen
from app.views.attention.features_state import (
    SHOWN,
    FeaturesFailure,
    FeaturesInputs,
    FeaturesOnPrompt,
    open_and_read,
)
from app.views.attention.job_keys import FOLLOW_UPS
from model.interp.sae.format import WEIGHTS_FILE, SAEFileError, read_sae_config

if TYPE_CHECKING:
    from model.interp.sae.sae import SparseAutoencoder

#: The job's key under the tab's follow-ups (what :meth:`AttentionJobs.submit` is given).
FEATURES_JOB = "attention.features"

Reading = FeaturesOnPrompt | FeaturesFailure


class TabJobs(Protocol):
    """What the job needs of the tab's :class:`~app.views.attention.jobs.AttentionJobs` (named here, not
    imported: this module stays free of Qt)."""

    state: Any
    session: Any

    def submit(self, key: str, fn: Callable[[], Any], on_result: Callable[[Any], None]) -> None: ...


class FeaturesJobs:
    """The sparse autoencoder the SAE page reads and the job that reads it (module docstring);
    ``on_change()`` is called when the choice, the refusal or the reading changes."""

    def __init__(self, jobs: TabJobs, on_change: Callable[[], None]):
        self.jobs, self.state, self.session = jobs, jobs.state, jobs.session
        self._on_change = on_change
        #: the folders offered, the most recent first; the one read; why the last one asked was refused
        self.folders: list[str] = []
        self.chosen: str | None = None
        self.refused = ""
        #: the map's and the attribution's inputs: features shown, the position and token of the logit
        self.setup: dict = {"shown": SHOWN, "skip_first": True, "position": -1, "token": ""}
        #: the newest reading and the inputs it was made for
        self.entry: tuple[FeaturesInputs, Reading] | None = None
        self._asked: FeaturesInputs | None = None
        self._opened: tuple[tuple, SparseAutoencoder] | None = None  # (the SAE's key, the SAE)
        self._checked: dict[tuple, str] = {}  # (folder, model, cfg.json's time) -> why refused ("": fits)
        self.subscription = self.session.hub.subscribe(SAEChosen, self._announced)

    # ---- the SAE -----------------------------------------------------------------------------------
    def _announced(self, message: SAEChosen) -> None:
        folder = str(message.sae)
        self._offer(folder)
        if self.chosen is None:
            self.choose(folder)
        self._on_change()

    def _offer(self, folder: str) -> None:
        self.folders = [folder, *(f for f in self.folders if f != folder)]

    def check(self, folder: str) -> str:
        """Why ``folder`` cannot be read with the model shown, in one line ("" when it can, or without a
        model): its ``cfg.json`` against the model's sites."""
        model = self.session.model
        if model is None:
            return ""
        try:
            stamp = os.stat(Path(folder) / "cfg.json").st_mtime_ns
        except OSError:
            stamp = None
        key = (folder, id(model), stamp)
        if key not in self._checked:
            try:
                read_sae_config(folder, model_config=model.config)
                self._checked[key] = ""
            except SAEFileError as exc:
                self._checked[key] = str(exc).splitlines()[0]
        return self._checked[key]

    def choose(self, folder: str) -> bool:
        """Read the SAE of ``folder`` from now on; False (and :attr:`refused` says why, in one line) when
        it does not fit the model shown, the choice left as it was."""
        folder = str(folder)
        why = self.check(folder)
        if why:
            self.refused = f"Refused {Path(folder).name or folder}: {why}"
            self._on_change()
            return False
        self.refused = ""
        self.chosen = folder
        self._offer(folder)
        self._on_change()
        return True

    def fits(self) -> bool:
        """Whether an SAE is chosen and fits the model shown (:meth:`refusal` says why not)."""
        return self.chosen is not None and not self.check(self.chosen)

    def refusal(self) -> str:
        """One line: why the folder last asked for was refused, or why the chosen one does not fit the
        model shown now; "" when neither."""
        if self.refused:
            return self.refused
        why = self.check(self.chosen) if self.chosen is not None else ""
        return f"Refused {Path(str(self.chosen)).name}: {why}" if why else ""

    def set_setup(self, **values) -> None:
        """Change the map's or the attribution's inputs (``shown``, ``skip_first``, ``position``,
        ``token``)."""
        if any(self.setup.get(k) != v for k, v in values.items()):
            self.setup.update(values)
            self._on_change()

    # ---- the reading -------------------------------------------------------------------------------
    def inputs(self) -> FeaturesInputs | None:
        """What a reading of the current run needs; None without a run, a model or a fitting SAE."""
        if self.state.inspection is None or self.session.model is None or not self.fits():
            return None
        assert self.chosen is not None
        return FeaturesInputs(self.state.request, self.chosen, **self.setup)

    def reading(self) -> Reading | None:
        """The reading of the current inputs, or None while it is not in."""
        inputs = self.inputs()
        entry = self.entry
        return entry[1] if entry is not None and inputs is not None and entry[0] == inputs else None

    def cancelled(self) -> bool:
        """Whether the user cancelled the reading the inputs ask for (asked again once they change)."""
        job = self.session.jobs.get(FOLLOW_UPS + FEATURES_JOB)
        return self._asked == self.inputs() and job is not None and job.state == "cancelled"

    def ready(self) -> bool:
        """Ask for the reading of the current inputs unless it is in, on its way or was cancelled; True
        when nothing is on its way."""
        inputs = self.inputs()
        if inputs is None or self.reading() is not None or self.cancelled():
            return True
        compute = self.session.compute
        if self._asked == inputs and compute.outstanding(FOLLOW_UPS + FEATURES_JOB):
            return False
        self._run(inputs)
        return False

    def _sae_key(self, folder: str) -> tuple:
        try:
            stamp = os.stat(Path(folder) / WEIGHTS_FILE).st_mtime_ns
        except OSError:
            stamp = None
        return (folder, id(self.session.model), stamp)

    def _run(self, inputs: FeaturesInputs) -> None:
        model, tok, insp = self.session.model, self.session.tokenizer, self.state.inspection
        if model is None or tok is None or insp is None:
            return
        self._asked = inputs
        key = self._sae_key(inputs.sae)
        sae = self._opened[1] if self._opened is not None and self._opened[0] == key else None
        ids, prompt = list(insp.ids), insp.prompt

        def done(res: tuple[SparseAutoencoder | None, Reading]) -> None:
            opened, reading = res
            if opened is not None:
                self._opened = (key, opened)
            self.entry = (inputs, reading)
            self._on_change()

        self.jobs.submit(
            FEATURES_JOB, lambda: open_and_read(model, tok, inputs.sae, sae, ids, inputs, prompt), done
        )

    def shown(self) -> FeaturesOnPrompt | None:
        """The newest reading that is not a failure (of the current inputs or not)."""
        entry = self.entry
        return entry[1] if entry is not None and isinstance(entry[1], FeaturesOnPrompt) else None


__all__ = ["FEATURES_JOB", "FeaturesJobs"]
