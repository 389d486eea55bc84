"""A chat template read from a model file is rendered where nothing it does can escape, run on or
grow: Jinja2's sandbox inside a child process with a time limit and a memory limit. Each hostile
template below (attribute escapes, template injection as in CVE-2024-34359, loops that write nothing,
one expression of gigabytes, the exceptions of Python's built-ins) ends in one ChatTemplateError line
that names the file and the reason, within the time limit; the next template renders as before."""

from __future__ import annotations

import re
import time

import pytest

from model.text import template_process
from model.text.chat import MAX_CHARS, ChatTemplate, ChatTemplateError

#: The time limit in these tests (the default is a few seconds): a runaway template costs this much
LIMIT = 1.0
#: What a case may take beyond the limit: the answer's way back, or a child started again
SLACK = 10.0
SOURCE = "chat template in hostile.gguf (tokenizer.chat_template)"
SANDBOX = "stopped by the sandbox"
MEMORY = f"memory limit of {template_process.MEMORY_LIMIT_BYTES / 2**20:g} MiB"
TIME = f"time limit of {LIMIT:g} s"
DEEP = "nests or recurses too deeply"

HOSTILE = {
    # attribute escapes: the sandbox refuses every attribute starting with "_"
    "mro": ("{{ ''.__class__.__mro__ }}", SANDBOX),
    "cycler": ("{{ cycler.__init__.__globals__ }}", SANDBOX),
    "joiner": ("{{ joiner.__init__.__globals__.os }}", SANDBOX),
    "namespace": ("{{ namespace.__init__.__globals__ }}", SANDBOX),
    "self": ("{{ self.__init__.__globals__ }}", SANDBOX),
    "lipsum globals": ("{{ lipsum.__globals__['os'] }}", SANDBOX),
    "CVE-2024-34359": (
        "{% for x in ().__class__.__base__.__subclasses__() %}{% if 'warning' in x.__name__ %}"
        "{{ x()._module.__builtins__['__import__']('os').popen('touch PWNED') }}{% endif %}{% endfor %}",
        SANDBOX,
    ),
    # no loader: other templates (or files) cannot be read
    "include": ("{% include 'tokenizer_config.json' %}", "TypeError"),
    "import": ("{% import 'macros.jinja' as m %}x", "TypeError"),
    "extends": ("{% extends 'base.jinja' %}", "TypeError"),
    # time: loops that write nothing are never stopped by the output cap
    "nested loops": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        TIME,
    ),
    # memory: one expression builds gigabytes before anything is written
    "string times 10**9": ("{% set x = 'a' * 10**9 %}ok", MEMORY),
    "tojson indent": ("{{ messages|tojson(indent=10**9) }}", MEMORY),
    "format width": ("{{ '%0999999999d' % 1 }}", MEMORY),
    "center": ("{{ 'a'|center(10**9) }}", MEMORY),
    "indent": ("{{ 'a\nb'|indent(10**9) }}", MEMORY),
    "list times 10**9": ("{{ [0] * 10**9 }}", MEMORY),
    "batch": ("{{ [1]|batch(10**9, 0)|list }}", MEMORY),
    "lipsum": ("{{ lipsum(10**6) }}", f"({MEMORY}|{TIME})"),
    # output: at most MAX_CHARS characters
    "output": ("{% for i in range(100000) %}{{ 'abcdefghijklmnopqrstu' }}{% endfor %}", f"{MAX_CHARS:,}"),
    # the built-ins' own exceptions, each one line
    "range too big": ("{{ range(10**9)|list }}", "OverflowError"),
    "range step 0": ("{{ range(1, 2, 0)|list }}", "ValueError"),
    "wordwrap 0": ("{{ 'a b c'|wordwrap(0) }}", "ValueError"),
    "division by zero": ("{{ 1 // 0 }}", "ZeroDivisionError"),
    "truncate -5": ("{{ 'abc'|truncate(-5) }}", "AssertionError"),
    "recursive macro": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", DEEP),
    "5000 parentheses": ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", DEEP),
    "syntax": ("{% for %}", "cannot be compiled"),
    "raise_exception": ("{{ raise_exception('only user and assistant roles') }}", "refused these messages"),
    "empty": ("{% if false %}x{% endif %}", "wrote nothing"),
}


#: What :func:`model.text.chat.apply_chat_template` sends the child, for a template that works
REQUEST = {
    "template": "{{ messages[0]['content'] }}",
    "messages": [{"role": "user", "content": "x"}],
    "add_generation_prompt": True,
    "bos_token": "",
    "eos_token": "",
    "max_chars": MAX_CHARS,
}


@pytest.mark.parametrize("template, reason", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_template_ends_in_one_line_naming_the_file_and_the_reason(
    template, reason, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # where the injection would write
    chat = ChatTemplate(template, source=SOURCE)
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError) as caught:
        chat.prompt("system", [("user", "hi"), ("assistant", "hello")], "Hi", time_limit=LIMIT)
    took = time.monotonic() - t0
    message = str(caught.value)
    assert message.startswith(SOURCE + ": ") and "\n" not in message and len(message) < 500
    assert re.search(reason, message), message
    assert took < LIMIT + SLACK
    assert not (tmp_path / "PWNED").exists()
    # the next template renders as before (in a child started again after a kill)
    assert ChatTemplate("{{ messages[-1]['content'] }}!").prompt("", [], "Hi", time_limit=LIMIT) == "Hi!"


def test_one_child_renders_every_template_and_a_runaway_one_is_replaced():
    process = template_process.TemplateProcess()
    try:
        assert process.render(REQUEST, LIMIT) == ("x", "")
        assert process.render(REQUEST, LIMIT) == ("x", "")
        assert process.starts == 1  # reused, not started per render
        loop = {**REQUEST, "template": HOSTILE["nested loops"][0]}
        text, reason = process.render(loop, 0.3)
        assert text is None and "time limit of 0.3 s" in reason
        assert process.render(REQUEST, LIMIT) == ("x", "") and process.starts == 2
    finally:
        process.close()


CHILDREN = {
    # a child that dies in the middle of a render (the interpreter crashed, the kernel killed it)
    "dies": (
        "import sys\nprint('{\"ready\": true}', flush=True)\nsys.stdin.readline()\nsys.exit(3)\n",
        "crashed the process that renders it (exit status 3)",
    ),
    # a child that never says it is ready
    "never starts": (
        "raise SystemExit(4)\n",
        "could not be rendered: its process did not start (exit status 4)",
    ),
}


@pytest.mark.parametrize("script, reason", list(CHILDREN.values()), ids=list(CHILDREN))
def test_a_child_that_dies_is_one_line_and_the_next_render_starts_a_good_one(
    script, reason, tmp_path, monkeypatch
):
    process = template_process.TemplateProcess()
    real = template_process.CHILD_SCRIPT
    try:
        bad = tmp_path / "child.py"
        bad.write_text(script, encoding="utf-8")
        monkeypatch.setattr(template_process, "CHILD_SCRIPT", bad)
        assert process.render(REQUEST, LIMIT) == (None, reason)
        monkeypatch.setattr(template_process, "CHILD_SCRIPT", real)
        assert process.render(REQUEST, LIMIT) == ("x", "")
        monkeypatch.setattr(template_process.sys, "executable", str(tmp_path / "no-python"))
        process.close()
        text, why = process.render(REQUEST, LIMIT)
        assert text is None and why.startswith("could not be rendered: its process could not start (")
    finally:
        process.close()


def test_messages_without_a_role_are_refused_naming_the_template_before_any_process_runs():
    from model.text.chat import apply_chat_template

    with pytest.raises(ChatTemplateError, match=f"^{re.escape(SOURCE)}: each message must be a dict"):
        apply_chat_template("{{ messages }}", [{"content": "no role"}], source=SOURCE)
