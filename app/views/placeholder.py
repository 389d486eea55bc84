"""Placeholder tabs: what a tab will hold, until its module exists (and what broke, if it failed)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

#: What each later tab will show, in the user's words.
PLANNED: dict[str, str] = {
    "Attention": (
        "Type a prompt and study every head: the L×H grid of attention heatmaps with token labels, "
        "one head large with hover values, the attention pipeline step by step (QKᵀ, scale, mask, "
        "softmax, × V), the lines view, per-head metrics (previous-token, induction, sink heads), "
        "head ablation and the next-token panel."
    ),
    "Labs": (
        "Live experiments with the theory: the causal mask (and what goes wrong without it), softmax "
        "saturation and the 1/√d_k scale, the residual stream and logit lens, positions (sinusoidal, "
        "RoPE), Pre-LN vs Post-LN gradients, and the three-token worked example."
    ),
    "Compare": (
        "Train or load two or more configurations side by side: overlaid loss curves, a table of "
        "losses, speed, parameters and KV cache, head grids of the same prompt and A − B differences."
    ),
    "Budget": (
        "Parameters, FLOPs per token, KV cache, training memory and cost of any configuration, "
        "with presets of real models (GPT-2, Llama 2 7B, Mistral 7B, ...)."
    ),
}


class PlaceholderTab(QWidget):
    """A tab whose module is not there yet (or failed to load): says what it will hold."""

    def __init__(self, session=None, parent: QWidget | None = None, *, title: str = "", error: str = ""):
        super().__init__(parent)
        self.title = title
        layout = QVBoxLayout(self)
        layout.setContentsMargins(40, 40, 40, 40)
        heading = QLabel(f"<h2>{title}</h2>")
        heading.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(1)
        layout.addWidget(heading)
        if error:
            text = f"<p>This tab could not be loaded:</p><p><tt>{_escape(error)}</tt></p>"
        else:
            planned = _escape(PLANNED.get(title, "Coming soon."))
            text = f"<p>{planned}</p><p><i>Coming in a later version.</i></p>"
        body = QLabel(text)
        body.setWordWrap(True)
        body.setAlignment(Qt.AlignmentFlag.AlignHCenter)
        body.setMaximumWidth(720)
        body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        row = QVBoxLayout()
        row.addWidget(body, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addLayout(row)
        layout.addStretch(2)
        self.message = body


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
