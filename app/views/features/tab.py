"""The Features tab: sparse autoencoders on a site of a layer, trained here or opened, and read.

One SAE is the tab's at a time: the one just trained, or one opened from a folder in SAELens's format
(**Open SAE folder…**: ours or SAELens's, checked against the model shown; a folder that does not fit
or is hostile is refused in one line and the tab keeps its SAE). Three pages:

* **Train** (:mod:`~app.views.features.train_page`): the settings, Train / Resume, the live curves;
* **Evaluate** (:mod:`~app.views.features.eval_page`): SAELens's figures, loss recovered among them;
* **Features** (:mod:`~app.views.features.features_page`): every feature over a corpus, and one
  feature's dashboard.

A trained or opened SAE is announced on the session's hub (:class:`~app.session.messages.SAEChosen`);
:class:`~app.session.messages.OpenFeature` (another tab's "show me this feature") opens its folder when
it is not the one shown and shows that feature's dashboard. Results belong to a model and an SAE
(:class:`~app.views.features.state.FeaturesState`): another of either greys them until recomputed.
"""

from __future__ import annotations

import html
from functools import partial
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPushButton, QTabWidget, QVBoxLayout, QWidget

from app.session.messages import OpenFeature, SAEChosen
from app.views.features.eval_page import EvalPage
from app.views.features.features_page import FeaturesPage
from app.views.features.state import FeaturesState
from app.views.features.train_page import TrainPage
from app.views.tab import ScreenshotPage, TabBase
from app.widgets.job_bar import subscribe
from app.widgets.paths import shown_path
from model.errors import AttentionLabError

#: The pages, by key, in the order of the page bar.
PAGES = ("train", "evaluate", "features")


class FeaturesTab(TabBase):
    """The Features tab (module docstring)."""

    docks = ()

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.state = FeaturesState()
        root = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("SAE:"))
        self.folder_label = QLabel("none: train one, or open a folder in SAELens's format")
        self.folder_label.setMinimumWidth(100)
        row.addWidget(self.folder_label, 1)
        self.open_button = QPushButton("Open SAE folder…")
        self.open_button.setToolTip("A folder with cfg.json and sae_weights.safetensors (SAELens's format)")
        self.open_button.clicked.connect(self._open_dialog)
        row.addWidget(self.open_button)
        root.addLayout(row)
        self.status = QLabel(" ")
        self.status.setObjectName("featuresStatus")
        root.addWidget(self.status)
        self.train_page = TrainPage(session)
        self.eval_page = EvalPage(session, self.state, self.train_page.model_name)
        self.features_page = FeaturesPage(session, self.state, self.train_page.model_name)
        self.pages = QTabWidget()
        for page, title in ((self.train_page, "Train"), (self.eval_page, "Evaluate"),
                            (self.features_page, "Features")):  # fmt: skip
            self.pages.addTab(page, title)
        root.addWidget(self.pages, 1)
        self.train_page.trained.connect(self._trained)
        self.state.sae_changed.connect(self._on_sae_changed)
        for signal in (session.modelChanged, session.trainingFinished, session.historyReset):
            subscribe(signal, self._on_model, self)
        self.listen(session.hub, OpenFeature, self.open_feature)
        self.listen(session.hub, SAEChosen, self._announced)
        self._on_model()

    # ---- the SAE ---------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        """One line under the SAE's name (what happened, or why not)."""
        self.status.setText(text)

    def open_folder(self, folder: str | Path, *, announce: bool = True) -> bool:
        """Open the SAE of ``folder`` for the model shown; False, with the reason in one line, when it
        cannot be (no model, not an SAE folder, another model's, hostile)."""
        from model.interp.sae.format import load_sae

        model = self.session.model
        if model is None:
            self.say("Open a model first: an SAE reads one of its sites")
            return False
        try:
            sae = load_sae(folder, model_config=model.config)
        except (AttentionLabError, ValueError, OSError) as exc:
            line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.say(f"Not opened: {line}")
            return False
        folder = str(Path(folder))
        self.state.set_sae(folder, sae)
        self.train_page.show_folder(folder)
        c = sae.config
        self.say(f"{c.site.hook_name}: {c.d_sae:,} features of a {c.d_in}-wide site, {c.architecture}"
                 + (f" k={c.k}" if c.architecture == "topk" else ""))  # fmt: skip
        if announce:
            self.session.hub.publish(SAEChosen(folder))
        return True

    def _open_dialog(self) -> None:
        start = self.state.folder or str(Path(self.train_page.folder()).parent)
        folder = QFileDialog.getExistingDirectory(self, "Open an SAE folder (SAELens's format)", start)
        if folder:
            self.open_folder(folder)

    def _trained(self, folder: str) -> None:
        self.open_folder(folder)

    def _on_sae_changed(self, folder: str) -> None:
        self.folder_label.setText(html.escape(shown_path(folder)) if folder else "none")
        self.folder_label.setToolTip(folder)
        self._refresh_pages()

    def _on_model(self, *_args) -> None:
        s, st = self.session, self.state
        model_id = id(s.model) if s.model is not None else 0
        if (model_id, s.step) == (st.model_id, st.step):
            return
        st.set_model(model_id, s.step)
        if st.folder and s.model is not None:
            folder = st.folder
            if not self.open_folder(folder, announce=False):  # the reason is on the status line
                st.set_sae(folder, None)
        self.train_page.refresh()
        self._refresh_pages()

    def _refresh_pages(self) -> None:
        self.eval_page.refresh()
        self.features_page.refresh()
        self.train_page.refresh()

    # ---- requests ----------------------------------------------------------------------------------
    def _announced(self, message: SAEChosen) -> None:
        """An SAE trained or opened elsewhere (the Attention tab's SAE page, ``screenshot --sae``): shown
        here when this tab shows none yet."""
        if not self.state.folder and self.session.model is not None:
            self.open_folder(message.sae, announce=False)

    def open_feature(self, request: OpenFeature) -> None:
        """Show feature ``request.feature`` of the SAE in ``request.sae`` (opened when not shown)."""
        same = self.state.folder and Path(self.state.folder).resolve() == Path(request.sae).resolve()
        if not same and not self.open_folder(request.sae):
            return
        self.show_page("features")
        self.features_page.want(int(request.feature))

    # ---- the Tab hooks ---------------------------------------------------------------------------
    def show_page(self, key: str):
        if key not in PAGES:
            raise KeyError(f"the tab has no page {key!r}")
        self.pages.setCurrentIndex(PAGES.index(key))

    def screenshot_pages(self) -> list[ScreenshotPage]:
        """Each page; with an SAE open, the evaluation and the features computed first, the most
        frequent feature's dashboard shown (False: still computing when the wait ran out)."""
        return [(key, partial(self._shown_for_screenshot, key)) for key in PAGES]

    def _shown_for_screenshot(self, key: str) -> bool:
        from app.session.event_wait import wait_until

        self.show_page(key)
        st = self.state
        if st.sae is None or key == "train":
            return True
        if key == "evaluate":
            return st.current("eval") or (
                self.eval_page.evaluate() and wait_until(lambda: st.current("eval"), timeout=300)
            )
        page = self.features_page
        if not st.current("list") and not (
            page.read_features() and wait_until(lambda: st.current("list"), 300)
        ):
            return False
        first = page.table.item(0, 0)
        if first is None:
            return True
        page.want(int(first.text()))
        return wait_until(lambda: st.current("dashboard"), timeout=120)

    def current_help(self) -> tuple[str, str] | None:
        return (
            "Features",
            "A sparse autoencoder (SAE) writes an activation x of one site as "
            "x ≈ Σ_i f_i W_dec,i + b_dec with few features f_i > 0 (TopK, or ReLU with an L1 penalty). "
            "<b>Train</b> one on a site of a layer (z: the heads' outputs before W_O; the attention output; "
            "the residual stream before the block; the MLP output) from activations streamed from a corpus; "
            "<b>Evaluate</b> it as SAELens does (variance explained, L0, dead and dense features, the "
            "next-token loss with it spliced in, against the clean model and the site zeroed); "
            "<b>Features</b> lists every feature over a corpus and shows one's top examples, its "
            "activations, the tokens its decoder direction promotes and suppresses, and for z the heads "
            "that write it and the source tokens they attended to. Folders are SAELens's format.",
        )

    def shutdown(self) -> None:
        self.train_page.shutdown()


__all__ = ["PAGES", "FeaturesTab"]
