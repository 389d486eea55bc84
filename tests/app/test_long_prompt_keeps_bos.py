"""One prompt rule on every path: a Llama-family prompt longer than the context keeps its BOS.

A Llama tokenizer puts ``<s>`` first, and the model was trained to see it there. A prompt longer than
the context is cut to its last tokens, and the BOS stays in front. This test feeds one such prompt
through each path that reads a prompt: a training run's probe (the Prober), the idle model's probe
(the session), the Attention tab, its Patching page (the corrupted prompt) and the History tab's
snapshot of a checkpoint. Each must keep the BOS and the same last tokens.
"""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from model.interp.prompt import encode_prompt
from model.io.history.revisions import open_source
from model.io.history.traced import History
from model.train.probes import Prober

TIMEOUT = 30_000
CONTEXT = 16
WORDS = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
TEXT = f"{WORDS} sixteen seventeen eighteen nineteen twenty"
#: The same words with two of the cut-off start swapped: as many tokens, and a swap patching can read.
CORRUPT = TEXT.replace("one two", "two one", 1)


@pytest.fixture
def llama(tmp_path, write_hf_family):
    """A tiny Llama-family folder with a context of 16 tokens: its path and the model opened."""
    from model.io.pretrained import open_model

    directory = tmp_path / "llama"
    directory.mkdir()
    write_hf_family(directory, "llama", max_position_embeddings=CONTEXT)
    return directory, open_model(directory)


def _expected(tok) -> list[str]:
    """BOS, then the last CONTEXT − 1 tokens of the text: checked against the tokenizer itself."""
    full = tok.encode(TEXT)
    bos = list(tok.prefix_ids)
    assert bos and full[: len(bos)] == bos and len(full) > CONTEXT  # a BOS tokenizer, a prompt too long
    ids = bos + full[-(CONTEXT - len(bos)) :]
    assert list(encode_prompt(tok, TEXT, CONTEXT).ids) == ids
    return tok.token_strings(ids)


def _labels_of(tok, raw: list[str]) -> list[str]:
    from model.text.tokens import visible

    return [visible(s) for s in raw]


def test_every_path_keeps_the_bos_and_the_same_last_tokens(qtbot, llama, tmp_path, make_attention_session):
    directory, ckpt = llama
    model, tok = ckpt.model, ckpt.tokenizer
    want = _labels_of(tok, _expected(tok))
    assert want[0] == "<s>" and len(want) == CONTEXT

    # a training run's probe: the trainer's callback, as the app's worker and the CLI run it
    frames = []
    trainer = SimpleNamespace(
        model=model, tokenizer=tok, step=3, probe_prompt=TEXT, apply_threads=lambda: None
    )
    trace = Prober(post=frames.append).probe(trainer)
    assert int(trace.tokens[0, 0]) == tok.prefix_ids[0]
    assert frames[0].labels == want and frames[0].step == 3 and frames[0].weights.shape[-1] == CONTEXT

    # the session: the idle model's probe, the Attention tab and its Patching page
    from app.views.attention.tab import AttentionTab

    s = make_attention_session()
    try:
        s.load_checkpoint(directory)
        check = lambda f: f.prompt == TEXT  # noqa: E731
        with qtbot.waitSignal(s.traceUpdated, timeout=TIMEOUT, check_params_cb=check) as blk:
            s.probe.set(TEXT)
        assert blk.args[0].labels == want and s.latest_frame.labels == want

        tab = AttentionTab(s)
        qtbot.addWidget(tab)
        tab.resize(1000, 760)
        check = lambda r: r.prompt == TEXT  # noqa: E731
        with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT, check_params_cb=check) as blk:
            tab.set_prompt(TEXT)
            tab.show()
        insp = blk.args[0]
        assert insp.labels == want and insp.special == [0] and insp.dropped == len(tok.encode(TEXT)) - CONTEXT

        tab.state.causal_setup["patching"]["corrupt"] = CORRUPT
        with qtbot.waitSignal(
            tab.causalReady, timeout=TIMEOUT, check_params_cb=lambda k, _r: k == "patching"
        ) as b:
            tab.show_page("patching")
        res = b.args[1]
        assert res.labels == want
        corrupt_want = _labels_of(tok, tok.token_strings(list(encode_prompt(tok, CORRUPT, CONTEXT).ids)))
        assert res.corrupt_labels == corrupt_want and corrupt_want[0] == "<s>"
        assert res.corrupt_labels[1:] == want[1:]  # the swap is in the part left out: the rest lines up
        tab.shutdown()
    finally:
        s.shutdown(timeout=30)

    # the History tab's snapshot of a checkpoint (a folder of checkpoints, one step)
    root = tmp_path / "history"
    shutil.copytree(directory, root / "step-00000005")
    history = History(open_source(root), TEXT, cache_dir=tmp_path / "cache")
    snap = history.snapshot(0)
    assert snap.labels == want and snap.step == 5 and snap.weights.shape[-1] == CONTEXT
    again = History(open_source(root), TEXT, cache_dir=tmp_path / "cache").snapshot(0)
    assert again.from_cache and again.labels == want  # and the cache keeps them
