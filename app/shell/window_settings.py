"""The window's settings between launches: geometry, dock layout, current tab, the last model config
and the training settings, and each tab's own ``save_state`` / ``restore_state`` (a tab's hook that
fails is reported and skipped: a bad stored value never keeps the window from opening)."""

from __future__ import annotations

import contextlib
import traceback
from typing import Any

from model.config import GPTConfig

#: Settings layout version: bump when docks change so an old saved state is not restored.
STATE_VERSION = 1


def restore_window(win: Any) -> None:  # win: the MainWindow (typed loosely: no import cycle)
    """Put back the window's geometry, docks, current tab, last config and each tab's own state."""
    st = win.settings
    geometry = st.get_bytes("window/geometry")
    if geometry is not None:
        win.restoreGeometry(geometry)
    state = st.get_bytes("window/state")
    if state is not None:
        win.restoreState(state, STATE_VERSION)
    idx = st.value("window/tab")
    try:
        if idx is not None:
            win.tab_widget.setCurrentIndex(int(idx))
    except (TypeError, ValueError):
        pass
    cfg = st.get_json("last/config")
    if cfg:
        with contextlib.suppress(Exception):
            win.config_panel.set_config(GPTConfig.from_dict(cfg, validate=False))
    for tab in win.tabs.values():
        try:
            tab.restore_state(st)
        except Exception:
            traceback.print_exc()


def save_window(win: Any) -> None:
    """Store what :func:`restore_window` reads, then each tab's own state; sync to disk."""
    st = win.settings
    st.set_bytes("window/geometry", win.saveGeometry())
    own = win._docks_state  # the user's layout, not the current tab's choice
    st.set_bytes("window/state", own if own is not None else win.saveState(STATE_VERSION))
    st.set_value("window/tab", win.tab_widget.currentIndex())
    with contextlib.suppress(Exception):
        st.set_json("last/config", win.config_panel.config().to_dict())
    if win.train_settings_panel is not None:
        st.set_json("last/train_settings", win.train_settings_panel.values())
    for tab in win.tabs.values():
        try:
            tab.save_state(st)
        except Exception:
            traceback.print_exc()
    st.sync()
