"""The Features tab's Features page: every feature of the SAE over a corpus, and one feature's page.

**Read features** runs the corpus pass (:func:`model.interp.sae.dashboard.feature_stats`, with each
feature's most promoted token, :func:`~model.interp.sae.readout.feature_logits`, and for ``z`` its head
shares, :func:`~model.interp.sae.readout.head_shares`) in the session's compute worker (the JobBar:
prompts done, the time left, Cancel) over prompts of the SAE's own corpus. Selecting a feature in the
table computes its dashboard (:func:`~model.interp.sae.dashboard.feature_dashboard`: for ``z`` one pass
per top example for its source tokens) the same way. A list or a dashboard of another model or SAE
stays greyed under a line naming what it is of until it is read again.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSpinBox, QSplitter, QVBoxLayout, QWidget

from app.session.compute import job_threads
from app.views.features.dashboard_views import Dashboard, DashboardData, FeatureList, FeatureTable
from app.views.features.eval_page import result_area, sae_corpus, what_of
from app.views.features.state import FeaturesState
from app.widgets.job_bar import JobBar
from model.runtime import with_threads

#: The compute keys of the corpus pass and of one feature's dashboard.
STATS_JOB, DASHBOARD_JOB = "features.stats", "features.dashboard"


class FeaturesPage(QWidget):
    """The Features page (module docstring)."""

    def __init__(self, session, state: FeaturesState, model_name, parent: QWidget | None = None):
        super().__init__(parent)
        self.session, self.state, self.model_name = session, state, model_name
        self._wanted: int | None = None  # a feature asked for before its list is in
        root = QVBoxLayout(self)
        self.job_bar = JobBar(session.jobs, (STATS_JOB, DASHBOARD_JOB), cancel=session.compute.abort)
        self.job_bar.jobEnded.connect(lambda *_: self.refresh())
        root.addWidget(self.job_bar)
        row = QHBoxLayout()
        self.read_button = QPushButton("Read features")
        self.read_button.setToolTip(
            "Every feature over prompts of the SAE's corpus: frequency, top examples…"
        )
        self.read_button.clicked.connect(self.read_features)
        self.prompts_spin, self.tokens_spin = QSpinBox(), QSpinBox()
        self.prompts_spin.setRange(1, 100_000)
        self.prompts_spin.setValue(256)
        self.tokens_spin.setRange(2, 4096)
        self.tokens_spin.setValue(64)
        self.corpus_label = QLabel()
        row.addWidget(self.read_button)
        for label, w in (("Prompts:", self.prompts_spin), ("Tokens:", self.tokens_spin)):
            row.addWidget(QLabel(label))
            row.addWidget(w)
        row.addWidget(self.corpus_label, 1)
        root.addLayout(row)
        self.table = FeatureTable()
        self.table.featureChosen.connect(self.show_feature)
        self.dashboard = Dashboard()
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.table)
        split.addWidget(self.dashboard)
        split.setStretchFactor(1, 1)
        split.setSizes([380, 700])
        self.box, self.status = result_area(root, self.job_bar, split)  # under one veil while stale
        self.refresh()

    def corpus(self) -> str:
        return sae_corpus(self.session, self.state.sae)

    def _say(self, text: str) -> None:
        self.status.setText(text)

    # ---- the corpus pass -------------------------------------------------------------------------
    def read_features(self) -> bool:
        """Read every feature over the corpus (in the compute worker); False without an SAE or model."""
        from model.interp.corpus.result import CorpusSettings
        from model.interp.corpus.run import open_source
        from model.interp.sae.dashboard import feature_stats
        from model.interp.sae.readout import feature_logits, head_shares

        s, st = self.session, self.state
        model, tok, sae = s.model, s.tokenizer, st.sae
        if model is None or sae is None:
            return False
        corpus, key, what = self.corpus(), st.key(), what_of(st, self.model_name())
        seq_len = min(self.tokens_spin.value(), model.config.core.context_length)
        settings = CorpusSettings(corpus, n_prompts=self.prompts_spin.value(), seq_len=seq_len)

        def fn() -> FeatureList:
            source = open_source(corpus, tok)
            stats = feature_stats(model, tok, sae, settings, source=source)
            promoted = [row[0] for row in feature_logits(model, sae, None, k=1).tokens(tok)]
            shares = head_shares(sae, model.config) if sae.config.site.kind == "z" else None
            return FeatureList(stats, source, promoted, shares)

        def done(result, error) -> None:
            if error is not None:
                self._say(f"No features read: {html.escape(str(error).splitlines()[0])}")
                return
            st.keep("list", key, result, what)
            self._say(f"{settings.n_prompts:,} prompts × {seq_len} tokens of {html.escape(corpus)}")
            self.refresh()

        subject = f"{settings.n_prompts:,} prompts of {corpus}"
        work = with_threads(job_threads(s), fn)
        s.compute.submit(STATS_JOB, work, done, title="Reading every feature over", subject=subject)
        self.refresh()
        return True

    def want(self, feature: int) -> None:
        """Show feature ``feature``: at once when the list is current, else once it is read."""
        if self.state.current("list"):
            self.table.select_feature(feature)
            self.show_feature(feature)
        else:
            self._wanted = feature
            if not self.session.compute.outstanding(STATS_JOB):
                self.read_features()

    # ---- one feature -----------------------------------------------------------------------------
    def show_feature(self, feature: int) -> bool:
        """Compute feature ``feature``'s dashboard (in the compute worker) from the current list."""
        from model.interp.sae.dashboard import feature_dashboard

        s, st = self.session, self.state
        kept = st.get("list")
        model, tok, sae = s.model, s.tokenizer, st.sae
        if kept is None or not st.current("list") or model is None or sae is None:
            return False
        fl: FeatureList = kept.value
        if not 0 <= feature < fl.stats.n_features:
            self._say(f"Feature {feature}: the SAE has features 0 to {fl.stats.n_features - 1}")
            return False
        key, what = st.key(), f"feature {feature} of {what_of(st, self.model_name())}"

        def fn() -> DashboardData:
            d = feature_dashboard(model, tok, sae, fl.stats, feature, source=fl.source)
            prompts = []
            if d.sources:
                for _, n, _, _ in d.examples:
                    prompts.append(tok.token_strings([int(t) for t in fl.stats.prompt_ids(n, fl.source)]))
            return DashboardData(d, prompts)

        def done(result, error) -> None:
            if error is not None:
                self._say(f"No dashboard: {html.escape(str(error).splitlines()[0])}")
                return
            st.keep("dashboard", key, result, what)
            self.refresh()

        s.compute.submit(DASHBOARD_JOB, fn, done, title="Reading", subject=f"feature {feature}")
        return True

    # ---- drawing ---------------------------------------------------------------------------------
    def refresh(self) -> None:
        st = self.state
        ready = st.sae is not None and self.session.model is not None
        self.read_button.setEnabled(ready)
        self.corpus_label.setText(
            f"of {html.escape(self.corpus())}" if ready else "Open or train an SAE first"
        )
        layer = st.sae.config.site.layer if st.sae is not None else 0
        kept, board = st.get("list"), self.table
        if kept is not None and getattr(board, "_shown", None) is not kept.value:
            board.show_list(kept.value, layer)
            board._shown = kept.value  # type: ignore[attr-defined]
            if self._wanted is not None and st.current("list"):
                wanted, self._wanted = self._wanted, None
                self.want(wanted)
        dash = st.get("dashboard")
        if dash is not None and self.dashboard.data is not dash.value:
            self.dashboard.show_data(dash.value, layer)
        stale = [k for k in (kept, dash) if k is not None and k.key != st.key()]
        if stale:
            self.job_bar.set_stale(f"Showing {html.escape(stale[0].what)}: read the features again for the "
                                   "SAE and model shown.", at_once=True)  # fmt: skip
        else:
            self.job_bar.set_stale(None)


__all__ = ["DASHBOARD_JOB", "STATS_JOB", "FeaturesPage"]
