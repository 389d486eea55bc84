"""The Compare tab: "what does this choice change?" — two or more runs side by side.

Left, the runs (``setup``): variants of the Model panel's config ("the same but n_kv_heads = 1", or a
quick comparison such as Pre-LN vs Post-LN), the current model of the session, or checkpoints. The
variants train together (``training``: one :class:`~model.train.multitrain.TrainerGroup` in its own
thread, the same batches in the same order for every variant), and the comparison saves to a JSON
file that reopens as it was.

Right, the pages: overlaid loss curves with a table of final losses, speed, parameters, FLOPs and KV
cache per token (``loss_page``); the same prompt through every model as head grids side by side
(``grids_page``); for two models of the same shape the A − B difference of every head (diverging
colours, symmetric levels) with a per-head summary (``difference_page``); per-head metrics aligned by
(layer, head) and the config fields that differ (``tables_page``). What they draw is in ``state``
(:class:`CompareState`, no Qt): the pages read it and follow its signals, never the tab nor each
other. Every number comes from ``model/`` (``model.compare.comparison``, ``model.interp.analysis.compare``).

Signals for tests: ``trainingFinished(reason, message)``, ``attentionReady()`` once a prompt's
results are drawn, ``runsChanged()``, ``loadFailed(path, message)``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from app.session.compare_runs import Run
from app.session.messages import CompareRuns
from app.views.compare import words
from app.views.compare.base import ComparePage
from app.views.compare.difference_page import DifferencePage
from app.views.compare.grids_page import GridsPage
from app.views.compare.loss_page import LossPage
from app.views.compare.setup import SetupPanel
from app.views.compare.state import CompareState
from app.views.compare.tables_page import ConfigPage, MetricsPage
from app.views.compare.training import VariantTraining
from app.views.page import bring_into_view, page_targets, panel_beside_pages, screenshot_steps
from app.views.tab import TabBase
from app.widgets.page_stack import CurrentPageTabs
from model.compare import comparison as cmp
from model.compare.tables import history_points
from model.compare.variants import describe_changes, parse_changes
from model.config import ConfigError, GPTConfig
from model.io.checkpoint.saved import save_checkpoint
from model.io.pretrained import open_model
from model.nn.gpt import init_model

NO_MODEL = "There is no current model yet: build or train one in the Train tab."


class CompareTab(TabBase):
    """Compare runs. Public API (also what the tests drive): :meth:`add_variant`,
    :meth:`add_current_model`, :meth:`add_initial_model`, :meth:`add_checkpoint`,
    :meth:`train_variants`, :meth:`run_prompt`, :meth:`set_pair`, :meth:`save_comparison`,
    :meth:`open_comparison`; ``state`` holds the runs, ``setup`` is the left panel and
    ``pages[key]`` (:meth:`show_page`) the pages."""

    #: no setup docks: the tab's own setup column takes their place (variants name their changes
    #: from the Model panel's config, shown there as the base), so its pages keep their room
    docks = ()

    trainingFinished = Signal(str, str)
    attentionReady = Signal()
    runsChanged = Signal()
    #: a checkpoint could not be added: (path, message)
    loadFailed = Signal(str, str)

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.state = st = CompareState()
        self.training = VariantTraining(session, st, self)
        self.training.finished.connect(self._on_trained)

        self.setup = SetupPanel(st)
        self.setup.use_jobs(session.jobs, session.jobs.cancel)  # Cancel stops after the current step
        self._connect_setup(self.setup)
        self.page_tabs = CurrentPageTabs()
        self.page_tabs.setObjectName("comparePages")
        loss_page = LossPage(st)
        self.grids_page = GridsPage(st)  # its prompt box asks the tab to run the prompt
        self.grids_page.runRequested.connect(lambda: self.run_prompt())
        #: the pages, in the order of their tabs (and of the screenshots)
        self.pages: dict[str, ComparePage] = {}
        for page in (loss_page, self.grids_page, DifferencePage(st), MetricsPage(st), ConfigPage(st)):
            self.pages[page.key] = page
            self.page_tabs.addTab(page, page.title)
            self.page_tabs.setTabToolTip(self.page_tabs.count() - 1, page.blurb)
        self.page_tabs.currentChanged.connect(self._on_page_changed)
        panel_beside_pages(self, self.setup, self.page_tabs, 380)

        st.runs_changed.connect(self.runsChanged.emit)
        session.configChanged.connect(lambda *_: self._update_base())
        session.dataChanged.connect(lambda *_: self._update_base())
        session.modelChanged.connect(lambda *_: self._update_base())
        session.probePromptChanged.connect(self._on_probe_prompt)
        self._update_base()
        self._on_page_changed()
        # another tab's runs (History's steps), the first two shown as A − B
        self.listen(session.hub, CompareRuns, lambda r: self.set_pair(*st.take(r.runs, r.prompt)[:2]))

    def _connect_setup(self, p: SetupPanel) -> None:
        p.addCurrentRequested.connect(lambda: self.add_current_model())
        p.addInitialRequested.connect(lambda: self.add_initial_model())
        p.addCheckpointRequested.connect(self.add_checkpoint)
        p.removeRequested.connect(self._remove_runs)
        p.addVariantRequested.connect(self._add_typed_variant)
        p.addVariantsRequested.connect(self._add_variants)
        p.trainRequested.connect(lambda steps: self.train_variants(steps))
        p.saveRequested.connect(self._save_clicked)
        p.openRequested.connect(self._open_clicked)

    # ---- what the pages draw lives in ``state``; these read it for callers of the tab ----------
    runs = property(lambda self: self.state.runs, doc="the runs, in order")
    diff = property(lambda self: self.state.diff, doc="A − B of the pair's weights [L, H, T, T], or None")
    comparison_path = property(lambda self: self.state.path, doc="the comparison file, once saved or opened")
    worker = property(lambda self: self.training.worker, doc="the GroupWorker while the variants train")
    is_training = property(lambda self: self.training.worker is not None)

    def run(self, name: str) -> Run:
        return self.state.run(name)

    def summary_rows(self) -> list[dict[str, Any]]:
        """One :func:`model.compare.comparison.summary_row` per run (what the summary table shows)."""
        return self.state.summary_rows()

    # ---- pages ---------------------------------------------------------------------------------
    @property
    def current_page(self) -> ComparePage:
        return list(self.pages.values())[self.page_tabs.currentIndex()]  # (a tab per page, in order)

    def show_page(self, key: str) -> ComparePage:
        """Bring page ``key`` into view, drawn."""
        page = self.pages[key]
        self.page_tabs.setCurrentWidget(page)
        self._on_page_changed()
        return page

    def _on_page_changed(self, *_) -> None:
        bring_into_view(self.current_page)

    # ---- the base config -----------------------------------------------------------------------
    def base_config(self) -> GPTConfig:
        """The Model panel's config with the data's vocabulary (what variants change)."""
        cfg = self.session.config
        src = self.session.source
        if src is not None:
            cfg = cfg.with_vocab(src.tokenizer.vocab_size)
        return cfg

    def _update_base(self) -> None:
        s = self.session
        self.state.set_base(self.base_config(), s.source_spec, s.model is not None)

    def _on_probe_prompt(self, text: str) -> None:
        if not self.state.prompt:
            self.set_prompt(text)

    # ---- adding runs ---------------------------------------------------------------------------
    def add_variant(self, changes: dict[str, Any] | str, name: str | None = None) -> Run:
        """A variant of :meth:`base_config`: ``changes`` as a dict or ``"field=value, ..."``.

        Raises :class:`ConfigError` naming the problem (unknown field, bad value, invalid result).
        """
        if isinstance(changes, str):
            changes = parse_changes(changes)
        cfg = self.base_config().replace(**changes)
        cfg.validate()
        name = self.state.unique_name(name or describe_changes(changes))
        record = cmp.RunRecord(name=name, kind="variant", config=cfg.to_dict(), changes=dict(changes))
        return self.state.add(Run(record, status="not trained yet"))

    def _add_typed_variant(self, text: str, name: str) -> None:
        try:
            self.add_variant(text, name or None)
        except ConfigError as exc:
            self.state.say("variants", "; ".join(exc.problems))
            return
        self.state.say("variants", "")
        self.setup.variant_added()

    def _add_variants(self, variants: list[tuple[str, dict[str, Any]]]) -> None:
        problems = []
        for name, changes in variants:
            try:
                self.add_variant(changes, name)
            except ConfigError as exc:
                problems.append(f"{name}: {'; '.join(exc.problems)}")
        self.state.say("variants", "\n".join(problems))

    def _run_context(self, config: GPTConfig) -> int | None:
        """T of a session run's FLOPs figure: the training seq_len, at most the context."""
        seq = getattr(self.session.train_settings, "seq_len", None)
        return min(seq, config.core.context_length) if seq else None

    def add_current_model(self, name: str | None = None) -> Run | None:
        """A frozen copy of the session's model with its loss history (None when there is none)."""
        s = self.session
        if s.model is None:
            self.state.say("variants", NO_MODEL)
            return None

        with s.compute_lock:
            model = copy.deepcopy(s.model)
        model.eval()
        name = self.state.unique_name(name or f"current model (step {s.step})")
        record = cmp.RunRecord(
            name=name,
            kind="session",
            config=model.config.to_dict(),
            path=s.checkpoint_path,
            history=history_points(s.history),
        )
        run = Run(record, model=model, tokenizer=s.tokenizer, status=f"step {s.step}")
        run.context = self._run_context(model.config)
        return self.state.add(run)

    def add_initial_model(self, name: str | None = None) -> bool:
        """The current model's config freshly initialised with the training seed (built off the GUI
        thread; ``runsChanged`` when it is added). False when there is no current model."""
        s = self.session
        if s.model is None:
            self.state.say("variants", NO_MODEL)
            return False

        cfg, tok = s.model.config, s.tokenizer
        seed = int(getattr(s.train_settings, "seed", 0) or 0)
        context = self._run_context(cfg)

        def job():
            model = init_model(cfg, seed=seed)
            model.eval()
            return model

        def done(model, error):
            if error is not None:
                self.state.say("variants", f"Could not build the initial model: {error}")
                return
            run_name = self.state.unique_name(name or f"initialisation (seed {seed})")
            record = cmp.RunRecord(name=run_name, kind="session", config=cfg.to_dict())
            self.state.add(Run(record, model=model, tokenizer=tok, status="untrained", context=context))

        s.compute.submit("compare.init", job, done)
        return True

    def add_checkpoint(self, path: str) -> None:
        """Load a checkpoint off the GUI thread and add it as a run (``runsChanged`` when done)."""
        st = self.state
        st.say("variants", f"Loading {path}…")

        def done(ckpt, error):
            if error is not None:
                st.say("variants", f"Could not open {path}: {error}")
                self.loadFailed.emit(str(path), str(error))
                return
            st.say("variants", "")
            meta = ckpt.meta or {}
            history = history_points((ckpt.train_state or {}).get("history") or [])
            name = st.unique_name(str(meta.get("name") or Path(path).name))
            record = cmp.RunRecord(
                name=name, kind="checkpoint", config=ckpt.config.to_dict(), path=str(path), history=history
            )
            ckpt.model.eval()
            status = str(meta.get("kind") or "checkpoint")
            st.add(Run(record, model=ckpt.model, tokenizer=ckpt.tokenizer, status=status))

        self.session.compute.submit(f"compare.open.{path}", lambda: open_model(path, device="cpu"), done)

    def remove_run(self, name: str) -> None:
        """Drop run ``name`` (not a variant while the group trains it)."""
        self.state.remove(name)

    def _remove_runs(self, names: list[str]) -> None:
        for name in names:
            self.remove_run(name)

    # ---- training ------------------------------------------------------------------------------
    def train_variants(self, steps: int | None = None) -> bool:
        """Train every variant run from scratch, together; False (and a message) when it cannot."""
        if self.training.worker is not None:
            return False
        steps = int(steps or self.setup.steps_spin.value())
        self.setup.steps_spin.setValue(steps)
        return self.training.start(steps)

    def stop_training(self) -> None:
        self.training.stop()

    def _on_trained(self, reason: str, message: str) -> None:
        self.trainingFinished.emit(reason, message)
        if reason != "error":
            self.run_prompt()

    # ---- one prompt through every model --------------------------------------------------------
    def set_prompt(self, prompt: str) -> None:
        """The prompt that runs through every model (new lines kept, though the box shows one line)."""
        self.state.set_prompt(prompt)

    def prompt(self) -> str:
        """The prompt to run: the one set or typed, else the session's probe prompt."""
        return self.state.prompt or self.session.probe_prompt

    def run_prompt(self, prompt: str | None = None) -> bool:
        """The same prompt through every run that has a model (or saved weights), off the GUI thread;
        ``attentionReady`` when the grids, differences and metrics are drawn."""
        st = self.state
        if prompt is not None:
            self.set_prompt(prompt)
        prompt = self.prompt()
        if not prompt:
            st.say("prompt", "Type a prompt first.")
            return False
        self.set_prompt(prompt)
        todo = []
        for r in st.runs:
            model, tok = r.model, r.tokenizer
            if model is None and (t := self.training.trainer(r.name)) is not None:
                model, tok = t.model, t.tokenizer
            path = None
            if model is None and r.record.path:
                path = str(cmp.resolve_run_path(st.path or ".", r.record.path))
            if model is not None or path is not None:
                todo.append((r.name, model, tok, path))
        if not todo:
            st.say("prompt", "No run has a model yet: train the variants or add a model.")
            return False
        shown = words.visible_text(prompt)
        st.say("prompt", f"Running “{shown}” through {len(todo)} model(s)…")

        def job():
            out: dict[str, tuple[Any, Any, Any, str | None]] = {}  # name -> (frame, metrics, loaded, error)
            for name, model, tok, path in todo:
                try:
                    loaded = None
                    if model is None and path is not None:  # one or the other: see todo
                        ckpt = open_model(path, device="cpu")
                        model, tok, loaded = ckpt.model, ckpt.tokenizer, ckpt
                    frame, metrics = cmp.prompt_attention(model, tok, prompt)
                    out[name] = (frame, metrics, loaded, None)
                except Exception as exc:  # one run's failure must not hide the others
                    out[name] = (None, None, None, str(exc) or type(exc).__name__)
            return out

        def done(result, error):  # only the newest prompt's result arrives (ComputeWorker)
            if error is not None:
                st.say("prompt", f"Could not run the prompt: {error}")
                return
            problems = st.set_results(result)
            text = (
                f"“{shown}” through {len(result) - len(problems)} model(s): every grid shows the same tokens."
            )
            if problems:
                text += " Failed: " + "; ".join(problems)
            st.say("prompt", text)
            self.attentionReady.emit()

        self.session.compute.submit("compare.prompt", job, done)
        return True

    def set_pair(self, a: str, b: str) -> None:
        """Show ``a − b`` on the difference page."""
        self.state.set_pair(a, b)
        self.show_page("difference")

    # ---- the comparison file -------------------------------------------------------------------
    def comparison(self) -> cmp.Comparison:
        """What :meth:`save_comparison` writes."""
        return self.state.comparison(
            prompt=self.prompt(), source=self.session.source_spec, base=self.base_config()
        )

    def save_comparison(self, path: str | Path, *, with_models: bool = False) -> Path:
        """Write the comparison file; ``with_models`` also saves each in-memory model without a
        checkpoint of its own as ``<file>.runs/<run>/`` and records that path."""
        path = Path(path)
        st = self.state
        if with_models:
            folder = path.with_name(path.name.removesuffix(".json") + ".runs")
            for r in st.runs:
                if r.model is None or (r.record.path and r.kind != "variant"):
                    continue
                target = folder / cmp.safe_dir_name(r.name)
                with self.session.compute_lock:
                    save_checkpoint(
                        target, r.model, r.tokenizer, meta={"source": st.source_used, "name": r.name}
                    )
                r.record.path = str(target.relative_to(path.parent))
        out = cmp.save_comparison(path, self.comparison())
        st.path = str(path)
        st.say("file", f"Saved {path}")
        return out

    def open_comparison(self, path: str | Path) -> None:
        """Replace the runs by those of a comparison file (raises ComparisonError)."""
        comp = cmp.load_comparison(path)
        if self.training.worker is not None:
            raise cmp.ComparisonError("stop the training before opening a comparison")
        if comp.settings.get("steps"):
            self.setup.steps_spin.setValue(int(comp.settings["steps"]))
        self.state.replace(comp, str(path))
        self.state.say("file", f"Opened {path} ({comp.created})")

    def _save_clicked(self, path: str, with_models: bool) -> None:
        try:
            self.save_comparison(path, with_models=with_models)
        except Exception as exc:
            self.state.say("file", f"Could not save: {exc}")

    def _open_clicked(self, path: str) -> None:
        try:
            self.open_comparison(path)
        except cmp.ComparisonError as exc:
            self.state.say("file", f"Could not open: {exc}")

    # ---- hooks for the window ------------------------------------------------------------------
    def export_targets(self) -> dict[str, QWidget]:
        """File → Export: what the page in view draws."""
        return page_targets(self.current_page)

    def screenshot_pages(self) -> list[tuple[str, Any]]:
        """The five pages, in order (see :meth:`_show_for_screenshot`)."""
        return screenshot_steps(list(self.pages), self.pages.__getitem__, self._show_for_screenshot)

    def _show_for_screenshot(self, key: str) -> None:
        """An empty tab first takes the session's model and its initialisation, so the pages show
        what training changed (each step's compute finishes before the screenshot)."""
        if not self.state.runs and self.session.model is not None and key == "loss":
            self.add_current_model()
            self.add_initial_model()
        has_model = any(r.model is not None for r in self.state.runs)
        if key == "attention" and has_model and not self.state.with_attention():
            self.run_prompt()
        self.show_page(key)

    def on_activated(self) -> None:
        self._update_base()
        if not self.state.prompt and self.session.probe_prompt:
            self.set_prompt(self.session.probe_prompt)

    def shutdown(self) -> None:
        """Stop the variants' training and wait for it (the window's closeEvent)."""
        self.training.shutdown()

    def save_state(self, settings) -> None:
        settings.set_json("compare/state", {"steps": int(self.setup.steps_spin.value())})

    def restore_state(self, settings) -> None:
        st = settings.get_json("compare/state") or {}
        if isinstance(st.get("steps"), int):
            self.setup.steps_spin.setValue(st["steps"])


__all__ = ["CompareTab"]
