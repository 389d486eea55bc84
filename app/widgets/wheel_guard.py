"""Spin boxes and combo boxes that the mouse wheel changes only once they have the focus.

In a long form inside a scroll area (the Model and Training panels, the Budget tab's editor) the
wheel scrolls the form; Qt's default lets a spin box under the pointer take the wheel, so scrolling
past "Layers" turned 2 into 4. :func:`guard_wheel` makes a guarded widget take the focus only by click
or Tab (``Qt.StrongFocus``) and pass a wheel event it gets without the focus on to its parent, which
scrolls. A focused widget still steps by wheel, as a person who clicked into it expects.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractScrollArea, QAbstractSpinBox, QApplication, QComboBox, QWidget


class _WheelGuard(QObject):
    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.Wheel or not isinstance(obj, QWidget) or obj.hasFocus():
            return False
        area = obj.parentWidget()
        while area is not None and not isinstance(area, QAbstractScrollArea):
            area = area.parentWidget()
        if area is not None:  # the form's scroll area scrolls, as if the field were not there
            QApplication.sendEvent(area.viewport(), event)
        else:
            event.ignore()  # not accepted: Qt offers it to the parent next
        return True


_GUARD: _WheelGuard | None = None


def guard_wheel(*widgets: QWidget) -> None:
    """Let the wheel change each of ``widgets`` (spin boxes, combo boxes) only while it has the focus."""
    global _GUARD
    if _GUARD is None:
        _GUARD = _WheelGuard()
    for w in widgets:
        if isinstance(w, (QAbstractSpinBox, QComboBox)):
            w.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
            w.installEventFilter(_GUARD)


__all__ = ["guard_wheel"]
