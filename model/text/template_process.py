"""The child process every chat template from a model file is rendered in, with a time limit and a
memory limit that hold whatever the template does.

Jinja2's sandbox stops a template from reaching Python objects, but bounds neither time (two nested
loops of 100,000 that write nothing) nor the size of one expression (``'a' * 10**9`` builds a
gigabyte before any output is counted), and a thread cannot be stopped. So the template runs in
:mod:`model.text.template_child`, a Python process importing only Jinja2, started once and reused:

* its address space is limited to :data:`MEMORY_LIMIT_BYTES`: an expression past it is a MemoryError
  there, and the reason comes back;
* each render has :data:`TIME_LIMIT_S` seconds of wall-clock time (counted from the request, not from
  the child's start): past it the child is killed, and the next render starts a fresh one;
* a child that dies (a crash of the interpreter, the kernel's kill) is an error of that render, and
  is started again for the next;
* a render whose caller cancels it (the window's Cancel) is killed within :data:`CANCEL_POLL_S`.

:func:`render` is the one entry point (:func:`model.text.chat.apply_chat_template` calls it); it is
thread-safe (one render at a time) and never raises: it returns the text or the reason it failed.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = [
    "CANCELLED",
    "MEMORY_LIMIT_BYTES",
    "START_TIMEOUT_S",
    "TIME_LIMIT_S",
    "TemplateProcess",
    "render",
]

#: Wall-clock seconds one chat template may take to render. Real templates take milliseconds (SmolLM2's
#: ~1 ms once compiled); a few seconds leave room for a loaded machine and end a runaway one quickly.
TIME_LIMIT_S = 2.0
#: Bytes of address space the rendering process may use (``RLIMIT_AS``). It idles at ~25 MB; a
#: template's output is capped at a million characters, so 256 MiB is room to spare for any real one.
MEMORY_LIMIT_BYTES = 256 * 2**20
#: Seconds the rendering process may take to start (Python and Jinja2: ~0.15 s on an idle machine)
START_TIMEOUT_S = 30.0

#: How often a render asks whether it was cancelled (a Cancel takes effect within this)
CANCEL_POLL_S = 0.05
#: The reason of a render cancelled while it ran
CANCELLED = "was cancelled"

#: The script the child runs (by path, in isolated mode: it needs nothing of this package)
CHILD_SCRIPT = Path(__file__).with_name("template_child.py")


class _Cancelled(Exception):
    """The caller cancelled the render while the child ran it."""


class TemplateProcess:
    """One rendering child, started on first use and again after it was killed or died.

    ``memory_bytes``: its address-space limit. :meth:`render` sends one request and waits at most
    ``seconds`` for the answer; :meth:`close` ends the child.
    """

    def __init__(self, memory_bytes: int = MEMORY_LIMIT_BYTES):
        self.memory_bytes = memory_bytes
        self._proc: subprocess.Popen[str] | None = None
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        #: how many children were started (a test reads it: a reused child is not started again)
        self.starts = 0

    def render(
        self, request: dict[str, Any], seconds: float, cancelled: Callable[[], bool] | None = None
    ) -> tuple[str | None, str]:
        """``(text, "")``, or ``(None, reason)`` where reason completes "the chat template ...".
        ``cancelled`` is asked every :data:`CANCEL_POLL_S` while the child renders: True kills it
        (reason :data:`CANCELLED`)."""
        with self._lock:
            proc, reason = self._started()
            if proc is None:
                return None, reason
            assert proc.stdin is not None
            try:
                proc.stdin.write(json.dumps({**request, "seconds": seconds}) + "\n")
                proc.stdin.flush()
                line = self._answer(time.monotonic() + seconds, cancelled)
            except queue.Empty:
                self._kill()
                return None, f"ran past its time limit of {seconds:g} s and was stopped"
            except _Cancelled:
                self._kill()
                return None, CANCELLED
            except OSError:
                line = None
            if line is None:  # the child died: killed for its memory, or crashed
                code = self._kill()
                return None, f"crashed the process that renders it (exit status {code})"
            answer = json.loads(line)
            if "text" in answer:
                return str(answer["text"]), ""
            return None, str(answer.get("error") or "failed")

    def _answer(self, deadline: float, cancelled: Callable[[], bool] | None) -> str | None:
        """The child's next line (None: it ended) by ``deadline`` (``time.monotonic()``), else
        queue.Empty; _Cancelled as soon as ``cancelled()`` says so."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise queue.Empty
            try:
                return self._answers.get(timeout=min(left, CANCEL_POLL_S) if cancelled else left)
            except queue.Empty:
                if cancelled is not None and cancelled():
                    raise _Cancelled from None

    def close(self) -> None:
        """End the child (the next render starts another)."""
        with self._lock:
            self._kill()

    # ---- the child ---------------------------------------------------------------------------------
    def _started(self) -> tuple[subprocess.Popen[str] | None, str]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc, ""
        self._kill()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", str(CHILD_SCRIPT), str(int(self.memory_bytes))],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                encoding="utf-8",
            )
        except OSError as exc:  # no interpreter to start, no process left to make
            return None, f"could not be rendered: its process could not start ({exc.strerror or exc})"
        self.starts += 1
        self._proc, self._answers = proc, queue.Queue()
        assert proc.stdout is not None
        threading.Thread(
            target=_read_lines, args=(proc.stdout, self._answers), name="chat-template-reader", daemon=True
        ).start()
        try:
            ready = self._answers.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            ready = None
        if ready is None or not json.loads(ready).get("ready"):
            code = self._kill()
            return None, f"could not be rendered: its process did not start (exit status {code})"
        return proc, ""

    def _kill(self) -> int | None:
        """Kill the child, if any; its exit status."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
        code = proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        return code


def _read_lines(stream: IO[str], into: queue.Queue[str | None]) -> None:
    """Each line of the child's output into ``into``, then None when it ends."""
    try:
        for line in stream:
            into.put(line)
    except (OSError, ValueError):  # the pipe closed under us: the child was killed
        pass
    into.put(None)


_SHARED = TemplateProcess()
atexit.register(_SHARED.close)


def render(
    request: dict[str, Any], seconds: float, cancelled: Callable[[], bool] | None = None
) -> tuple[str | None, str]:
    """``request`` rendered by the shared child within ``seconds`` unless ``cancelled()`` (see
    :meth:`TemplateProcess.render`)."""
    return _SHARED.render(request, seconds, cancelled)
