"""The Train tab's bar while it follows a run folder: what is followed, its newest checkpoint, stop."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget


class FollowBar(QWidget):
    """Shown while the session follows a run folder (File → Follow a run folder…), hidden otherwise.

    "Open newest checkpoint" makes the run's newest checkpoint the session's model (the Attention tab
    then shows it); "Stop following" ends the follow, leaving the curves and frames on screen.
    """

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel()
        self.label.setObjectName("followLabel")
        self.label.setWordWrap(True)
        row.addWidget(self.label, 1)
        self.open_button = QPushButton("Open newest checkpoint")
        self.open_button.setObjectName("followOpenButton")
        self.open_button.setToolTip("Load the run's newest checkpoint as the current model (Attention tab)")
        self.open_button.clicked.connect(lambda: session.follow.open_checkpoint())
        row.addWidget(self.open_button)
        self.stop_button = QPushButton("Stop following")
        self.stop_button.setObjectName("followStopButton")
        self.stop_button.clicked.connect(lambda: session.follow.stop())
        row.addWidget(self.stop_button)
        session.trainingStateChanged.connect(lambda *_: self.refresh())
        session.followUpdated.connect(lambda *_: self.refresh())
        self.refresh()

    def refresh(self) -> None:
        worker = self.session.follow.worker
        self.setVisible(worker is not None)
        if worker is None:
            return
        ranks = f", {worker.world_size} processes" if worker.world_size > 1 else ""
        ckpt = worker.checkpoint_step
        newest = f"newest checkpoint: step {ckpt}" if ckpt is not None else "no checkpoint yet"
        status = worker.status or "waiting"
        self.label.setText(f"Following <b>{worker.path}</b> ({status}{ranks}); {newest}")
        self.open_button.setEnabled(ckpt is not None)
