"""Persistent user settings (window geometry, dock layout, last config, last directories).

Backed by ``QSettings``. By default Qt's native per-user store is used (organisation
``AttentionLab``, application ``attention-lab``). Setting the environment variable
``ATTENTION_LAB_SETTINGS`` to a file path stores everything in that INI file instead: tests, the
screenshot command and the benchmarks point it at a temporary file so they neither read nor
overwrite the user's own settings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings

ENV_VAR = "ATTENTION_LAB_SETTINGS"
ORGANISATION = "AttentionLab"
APPLICATION = "attention-lab"
#: The folder of the last file dialog of any kind (where a kind's first dialog starts).
RECENT_DIR = "dirs/_recent"


class AppSettings:
    """A thin typed wrapper over ``QSettings`` with the keys the window uses.

    Values that are dicts (configs, training settings) are stored as JSON strings so that every
    backend round-trips them identically.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        path = path if path is not None else os.environ.get(ENV_VAR)
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.qsettings = QSettings(str(path), QSettings.Format.IniFormat)
        else:
            self.qsettings = QSettings(ORGANISATION, APPLICATION)

    # ---- raw access ----------------------------------------------------------------------------
    def value(self, key: str, default: Any = None) -> Any:
        return self.qsettings.value(key, default)

    def set_value(self, key: str, value: Any) -> None:
        self.qsettings.setValue(key, value)

    def sync(self) -> None:
        self.qsettings.sync()

    # ---- bytes (geometry, dock state) ----------------------------------------------------------
    def get_bytes(self, key: str) -> QByteArray | None:
        value = self.qsettings.value(key)
        if isinstance(value, QByteArray) and not value.isEmpty():
            return value
        if isinstance(value, (bytes, bytearray)) and value:
            return QByteArray(bytes(value))
        return None

    def set_bytes(self, key: str, value: QByteArray) -> None:
        self.qsettings.setValue(key, value)

    # ---- JSON dicts (configs) ------------------------------------------------------------------
    def get_json(self, key: str) -> dict | None:
        text = self.qsettings.value(key)
        if not isinstance(text, str) or not text:
            return None
        try:
            data = json.loads(text)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def set_json(self, key: str, data: dict) -> None:
        self.qsettings.setValue(key, json.dumps(data))

    # ---- strings and directories ---------------------------------------------------------------
    def get_str(self, key: str, default: str = "") -> str:
        value = self.qsettings.value(key, default)
        return value if isinstance(value, str) else default

    def last_dir(self, kind: str) -> str:
        """Where a file dialog for ``kind`` starts: the folder remembered for it by
        :meth:`set_last_dir` (``checkpoint``, ``run``, ``export``, ``text``, ``history``, ...).

        When that folder is gone, the nearest folder above it that still exists; for a kind never
        used yet, the folder of the last dialog of any kind; the home folder only when there is none.
        """
        for key in (f"dirs/{kind}", RECENT_DIR):
            d = self.get_str(key)
            if not d:
                continue
            p = Path(d)
            while not p.is_dir() and p.parent != p:
                p = p.parent
            if p.is_dir() and p.parent != p:  # the root itself says nothing about the user's files
                return str(p)
        return str(Path.home())

    def set_last_dir(self, kind: str, path: str | os.PathLike) -> None:
        """Remember ``path`` for ``kind``'s next dialog: a folder itself, a file its folder.

        Dialogs pass the folder the next one should start in: the *parent* of a folder the user
        picked (so that it shows among the others there), the file itself for a file.
        """
        p = Path(path)
        folder = str(p if p.is_dir() else p.parent)
        self.qsettings.setValue(f"dirs/{kind}", folder)
        self.qsettings.setValue(RECENT_DIR, folder)


def window_settings(widget: Any) -> AppSettings | None:
    """The :class:`AppSettings` of the window holding ``widget`` (a tab's dialogs remember their
    folders in it), or None outside such a window."""
    settings = getattr(widget.window(), "settings", None)
    return settings if isinstance(settings, AppSettings) else None
