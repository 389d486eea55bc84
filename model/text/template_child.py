"""The process a model file's chat template is rendered in: Jinja2's immutable sandbox, as
``transformers`` runs it, inside a process of its own whose memory is limited.

Run as a script, ``python -I template_child.py MEMORY_BYTES``, by
:class:`model.text.template_process.TemplateProcess`; it imports only the standard library and Jinja2
(neither torch nor this package), so it starts in about 0.15 s, and it is started once and reused.

* **Memory.** Its address space is limited to ``MEMORY_BYTES`` (``RLIMIT_AS``): one expression that
  would build gigabytes (``'a' * 10**9``, ``tojson(indent=10**9)``, ``'%0999999999d' % 1``) raises
  MemoryError here, before it exists, and the app never holds it.
* **Time.** The parent waits a limited time for each answer and kills this process past it (a
  thread cannot be stopped, a process can). Before each render the CPU-time limit (``RLIMIT_CPU``) is
  set a little past the parent's, so a child whose parent died mid-render ends too.
* **Output.** At most ``max_chars`` characters, counted as the template writes them.
* **The sandbox.** ``ImmutableSandboxedEnvironment``: no attribute starting with ``_``, no mutation of
  lists or dicts, no loader (``include``, ``import`` and ``extends`` fail), ``range`` capped by Jinja2.

Protocol: the first line written is ``{"ready": true}``; then, for each JSON line read (``template``,
``messages``, ``add_generation_prompt``, ``bos_token``, ``eos_token``, ``max_chars``, ``seconds``), one
JSON line written: ``{"text": ...}`` or ``{"error": reason}``, the reason one line that completes "the
chat template ...". An empty line or the end of input ends the process.
"""

from __future__ import annotations

import contextlib
import json
import math
import resource  # POSIX, as model.budget.sizing
import sys
from typing import Any

from jinja2 import TemplateError, TemplateSyntaxError
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

#: The longest reason sent back (a Jinja2 message can quote the whole template)
MAX_REASON = 300
#: Compiled templates kept (a conversation renders the same template again at every turn)
KEEP_COMPILED = 4


class Refused(Exception):
    """The template called ``raise_exception(message)``: it refuses these messages."""


class TooLong(Exception):
    """The template wrote more than ``max_chars`` characters."""


def one_line(text: str) -> str:
    """``text`` on one line, at most :data:`MAX_REASON` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= MAX_REASON else flat[: MAX_REASON - 1] + "…"


def _raise_exception(message: str) -> None:
    raise Refused(message)


def _tojson(value: Any, indent: Any = None, **_: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def environment() -> ImmutableSandboxedEnvironment:
    """The sandbox, as ``transformers`` sets it up (``trim_blocks``, ``lstrip_blocks``,
    ``raise_exception``, ``tojson``)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise_exception
    env.filters["tojson"] = _tojson
    return env


_ENV = environment()
_COMPILED: dict[str, Any] = {}
#: The address space this process may use, in bytes (0: not limited); set by :func:`main`
_memory_limit = 0


def _compiled(template: str) -> Any:
    found = _COMPILED.get(template)
    if found is None:
        found = _ENV.from_string(template)
        if len(_COMPILED) >= KEEP_COMPILED:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[template] = found
    return found


def render(request: dict[str, Any]) -> str:
    """The template's text for the request's messages (raises what the template raises)."""
    limit = int(request["max_chars"])
    pieces, size = [], 0
    for piece in _compiled(request["template"]).generate(
        messages=request["messages"],
        add_generation_prompt=bool(request["add_generation_prompt"]),
        bos_token=request["bos_token"],
        eos_token=request["eos_token"],
    ):
        size += len(piece)
        if size > limit:
            raise TooLong
        pieces.append(piece)
    return "".join(pieces)


def answer(request: dict[str, Any]) -> dict[str, str]:
    """``{"text": ...}``, or ``{"error": reason}`` for whatever the template does wrong."""
    try:
        return {"text": render(request)}
    except Refused as exc:
        return {"error": f"refused these messages: {one_line(str(exc))}"}
    except TooLong:
        return {"error": f"wrote over {int(request['max_chars']):,} characters and was stopped"}
    except TemplateSyntaxError as exc:
        return {"error": f"cannot be compiled: {one_line(exc.message or '')} (line {exc.lineno})"}
    except SecurityError as exc:
        return {"error": f"was stopped by the sandbox: {one_line(str(exc))}"}
    except TemplateError as exc:
        return {"error": f"cannot be applied: {one_line(str(exc) or type(exc).__name__)}"}
    except MemoryError:
        return {
            "error": f"needed more than its memory limit of {_memory_limit / 2**20:g} MiB and was stopped"
        }
    except RecursionError:
        return {"error": "nests or recurses too deeply (a macro calling itself, or deeply nested brackets)"}
    except Exception as exc:  # whatever else a template's expression raises: TypeError, OverflowError, ...
        detail = one_line(str(exc))
        return {"error": f"failed: {type(exc).__name__}" + (f": {detail}" if detail else "")}


def _limit_cpu(seconds: float) -> None:
    """End this process (SIGXCPU) once it has used ``seconds`` more CPU time than now, plus a margin:
    the parent kills it first, unless the parent is gone."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used.ru_utime + used.ru_stime + seconds) + 2
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    with contextlib.suppress(ValueError, OSError):  # a hard limit set lower by whoever started us
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _limit_memory(limit: int) -> None:
    """Limit this process's address space to ``limit`` bytes (``RLIMIT_AS``; 0: no limit)."""
    global _memory_limit
    if limit <= 0:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    _memory_limit = limit


def main() -> None:
    _limit_memory(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            break
        try:
            request = json.loads(line)
            _limit_cpu(float(request.get("seconds", 10)))
            reply = answer(request)
        except (ValueError, KeyError, TypeError) as exc:  # a malformed request: the parent's bug
            reply = {"error": f"could not be rendered: {one_line(str(exc))}"}
        out.write(json.dumps(reply, ensure_ascii=True) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
