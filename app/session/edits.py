"""What the setup panels hold that Start must wait for: :class:`Edits` (``session.edits``).

A panel reports its edited value's problems after every edit (``Session.set_edit``); a valid edit
also becomes the session's input (``set_config``, ``set_train_settings``). Start's rule
(:meth:`~app.session.training_run.TrainingRun.problems`) reads :meth:`Edits.problems` first, so a
disabled Start names the panel's own first problem. Qt-free.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the panels whose edits gate Start, in the order their problems are named, and the line said for
#: a panel that is not valid but names no problem
PANELS: dict[str, str] = {
    "Model panel": "fix the model configuration (Model panel)",
    "Training panel": "fix the training settings (Training panel)",
}


@dataclass(frozen=True)
class PanelEdit:
    """A panel's edited value: its problems (first first) and whether it is valid."""

    problems: tuple[str, ...] = ()
    valid: bool = True


class Edits:
    """The panels' edits, by panel name (:data:`PANELS`)."""

    def __init__(self) -> None:
        self._edits: dict[str, PanelEdit] = {}

    def set(self, panel: str, problems: list[str] | tuple[str, ...], valid: bool) -> bool:
        """Record ``panel``'s edit; True when it differs from the one recorded."""
        if panel not in PANELS:
            raise KeyError(f"unknown panel {panel!r} (one of {', '.join(PANELS)})")
        edit = PanelEdit(tuple(problems), bool(valid))
        if self._edits.get(panel, PanelEdit()) == edit:
            return False
        self._edits[panel] = edit
        return True

    def get(self, panel: str) -> PanelEdit:
        return self._edits.get(panel, PanelEdit())

    def problems(self) -> list[str]:
        """Every panel's problems, each with its panel named ("… (Model panel)"), then a line for
        each panel that is not valid without naming a problem; empty when Start need not wait."""
        named = [f"{p} ({panel})" for panel in PANELS for p in self.get(panel).problems]
        unnamed = [
            line
            for panel, line in PANELS.items()
            if not self.get(panel).valid and not self.get(panel).problems
        ]
        return named + unnamed


__all__ = ["PANELS", "Edits", "PanelEdit"]
