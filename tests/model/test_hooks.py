"""Hook points: their names, the three ways to run (plain, record, intervene) and run_with_trace()."""

import contextlib

import pytest
import torch

from model.config import GPTConfig
from model.interp.plan import inspection_need
from model.interp.prompt import encode_prompt
from model.interp.trace import ALL_KINDS, Recorder, run_with_trace
from model.nn.gpt import GPT, init_model
from model.nn.hooks import HookPoint, ablate_heads, patch, use_mask
from model.text.tokens import CharTokenizer

PER_LAYER = (
    "resid_pre",
    "attn.q",
    "attn.k",
    "attn.v",
    "attn.pattern_rows",
    "attn.scores",
    "attn.pattern",
    "attn.z",
    "attn.out",
    "resid_mid",
    "mlp.out",
    "resid_post",
)


def tiny(**kw) -> GPTConfig:
    base = dict(vocab_size=37, context_length=24, n_layers=2, d_model=32, n_heads=4)
    base.update(kw)
    return GPTConfig(**base)


def model_of(**kw) -> GPT:
    torch.manual_seed(0)
    return GPT(tiny(**kw)).eval()


@pytest.mark.parametrize(
    ("positions", "globals_"),
    [
        ("learned", ["embed", "pos_embed", "mask", "ln_final", "logits"]),
        ("sinusoidal", ["embed", "pos_embed", "mask", "ln_final", "logits"]),
        ("rope", ["embed", "mask", "ln_final", "logits"]),
        ("none", ["embed", "mask", "ln_final", "logits"]),
    ],
)
def test_hook_point_names_and_counts(positions, globals_):
    model = model_of(positions=positions, n_layers=4)
    names = list(model.hook_points())
    per_layer = [f"blocks.{l}.{p}" for l in range(4) for p in PER_LAYER]
    assert sorted(names) == sorted(globals_ + per_layer)
    assert len(names) == 4 * 12 + len(globals_)  # default 4-layer model: 53 (rope / none: 52)
    pts = model.hook_points()
    assert pts["blocks.2.attn.pattern"].layer == 2 and pts["embed"].layer == -1
    assert all(isinstance(p, HookPoint) and p.name == n for n, p in pts.items())
    # no parameters or buffers were added by the hook points
    assert not any("resid" in k or k.endswith((".q", ".z")) for k in model.state_dict())


@contextlib.contextmanager
def recording(model, kinds=None, layers=None, dtype=torch.float32):
    """A :class:`Recorder` attached by hand for the passes inside the block (what run_with_trace does)."""
    rec = Recorder(layers=layers, kinds=kinds, dtype=dtype, config=model.config)
    with model.hooks(rec.hooks(model.config.core.n_layers, model.config.n_rep)):
        yield rec


def test_plain_run_has_nothing_attached_and_contexts_detach():
    model = model_of()
    idx = torch.randint(0, 37, (1, 9))
    before, _ = model(idx)
    with recording(model, kinds=("pattern",)), model.hooks(ablate_heads({(0, 1): "zero"})):
        assert model.hook_points()["blocks.0.attn.z"].fns
    with pytest.raises(RuntimeError, match="boom"), model.hooks({"blocks.1.resid_post": _boom}):
        model(idx)
    assert not any(p.fns for p in model.hook_points().values())
    assert torch.equal(model(idx)[0], before)


def _boom(x, hook):
    raise RuntimeError("boom")


def test_unknown_hook_point_and_unknown_kind_are_clear_errors():
    model = model_of()
    with (
        pytest.raises(ValueError, match=r"no hook point named blocks\.0\.attn\.weights"),
        model.hooks({"blocks.0.attn.weights": lambda x, h: None}),
    ):
        pass
    with pytest.raises(ValueError, match="unknown trace kind 'attention'; valid kinds: q, k, v"):
        run_with_trace(model, torch.zeros(1, 3, dtype=torch.long), kinds=("attention",))
    tok = CharTokenizer.from_text("abcdef ")
    with pytest.raises(ValueError, match=r"valid kinds: .*ln_final"):
        run_with_trace(model, encode_prompt(tok, "abc", 16), kinds=("pattern", "attention"))


def test_a_recorder_attached_by_hand_gives_the_trace_of_run_with_trace():
    model = model_of(n_kv_heads=2)
    idx = torch.randint(0, 37, (2, 11))
    kinds = ("pattern", "k", "scores_raw", "ln_final")
    with recording(model, kinds=kinds, dtype=torch.float16) as rec:
        logits, _ = model(idx)
    got, want = rec.trace(idx), run_with_trace(model, idx, kinds=kinds)
    assert got.kinds == want.kinds == {"pattern", "k", "scores_raw", "ln_final"}
    assert got["pattern", 1].dtype == torch.float16 and got["k", 0].shape == (2, 4, 11, 8)
    torch.testing.assert_close(got["pattern", 1].float(), want["pattern", 1], atol=1e-3, rtol=1e-3)
    assert torch.equal(got.logits, logits) and torch.equal(got.mask, want.mask)


@pytest.mark.parametrize(
    ("old", "new"),
    [("weights", "pattern"), ("scores_scaled", "scores"), ("head_out", "z"), ("resid_final", "ln_final")],
)
def test_a_retired_kind_name_is_refused_naming_its_hook_name_wherever_a_kind_is_given(old, new):
    model = model_of()
    idx = torch.randint(0, 37, (1, 5))
    said = rf"^'{old}' is now '{new}'$"
    with pytest.raises(ValueError, match=said):
        run_with_trace(model, idx, kinds=(old,))
    with pytest.raises(ValueError, match=said):
        Recorder(kinds=[new, old], config=model.config)
    with pytest.raises(ValueError, match=said):
        inspection_need(model.config, 5, kinds=(old,))
    trace = run_with_trace(model, idx, kinds=(new,))
    for read in (lambda: trace[old, 0], lambda: trace.stack(old), lambda: trace.has(old, 0)):
        with pytest.raises(ValueError, match=said):
            read()


def test_a_predicate_over_hook_names_chooses_what_a_trace_records():
    model = model_of()
    idx = torch.randint(0, 37, (1, 9))
    trace = run_with_trace(model, idx, kinds=lambda name: name.startswith("resid") or name == "pattern")
    want = {k for k in ALL_KINDS if k.startswith("resid")} | {"pattern"}
    assert trace.kinds == want and trace.layers == [0, 1]
    by_list = run_with_trace(model, idx, kinds=sorted(want))
    keys = by_list.keys()
    assert sorted(trace.keys()) == sorted(keys)
    assert all(torch.equal(trace[k, l], by_list[k, l]) for k, l in keys)
    assert run_with_trace(model, idx, kinds=lambda name: False).kinds == set()


def test_recording_only_the_stream_keeps_the_fused_path():
    model = model_of()
    idx = torch.randint(0, 37, (1, 12))
    fast, _ = model(idx)
    trace = run_with_trace(model, idx, kinds=("resid_post", "z"))
    assert torch.equal(trace.logits, fast)  # no layer switched to the explicit softmax
    full = run_with_trace(model, idx)
    torch.testing.assert_close(full.logits, fast, rtol=1e-4, atol=1e-5)


def test_intervene_edits_an_activation_and_ablation_is_an_intervention():
    model = model_of()
    idx = torch.randint(0, 37, (1, 10))
    with model.hooks(ablate_heads({(1, 2): "zero"})):
        hooked, _ = model(idx)
    assert not torch.allclose(hooked, model(idx)[0])  # and leaving the block removes it
    # the same by hand: a function of the activation, on one head
    with model.hooks({"blocks.1.attn.z": lambda z, hook: z * torch.tensor([1.0, 1, 0, 1]).view(1, 4, 1, 1)}):
        by_hand, _ = model(idx)
    torch.testing.assert_close(by_hand, hooked, rtol=0, atol=1e-6)
    # hooks on one point run in the order they were added: the recording sees the ablation
    with model.hooks(ablate_heads({(0, 0): "zero"})), recording(model, kinds=("z",)) as rec:
        model(idx)
    assert (rec.trace(idx)["z", 0][:, 0] == 0).all()


def test_a_custom_mask_is_an_intervention():
    model = model_of()
    T = 8
    full = torch.ones(T, T, dtype=torch.bool)
    idx = torch.randint(0, 37, (1, T))
    with model.hooks(use_mask(full)), recording(model, kinds=("pattern",)) as rec:
        hooked, _ = model(idx)
    trace = rec.trace(idx)
    assert torch.equal(trace.mask, full) and (trace["pattern", 0][..., 0, 1:] > 0).all()
    with model.hooks(use_mask(full)):  # the fused path takes the same mask
        fast, _ = model(idx)
    torch.testing.assert_close(hooked, fast, rtol=1e-4, atol=1e-5)


def test_patching_everything_restores_the_clean_logits_and_patching_nothing_changes_nothing():
    model = model_of(n_layers=3)
    clean = torch.randint(0, 37, (1, 12), generator=torch.Generator().manual_seed(1))
    corrupt = clean.clone()
    corrupt[0, 3], corrupt[0, 7] = corrupt[0, 7].item(), corrupt[0, 3].item() + 1
    points = ["embed", "pos_embed"] + [f"blocks.{l}.{p}" for l in range(3) for p in ("attn.out", "mlp.out")]
    cache = {}
    with model.hooks({n: (lambda x, hook: cache.__setitem__(hook.name, x)) for n in points}):
        clean_logits, _ = model(clean)
    corrupt_logits, _ = model(corrupt)
    assert not torch.allclose(clean_logits, corrupt_logits)
    with model.hooks({n: patch(cache[n]) for n in points}):
        patched, _ = model(corrupt)
    assert torch.equal(patched, clean_logits)
    every = list(model.hook_points())
    fused = [n for n in every if not n.endswith(("attn.scores", "attn.pattern", "attn.pattern_rows"))]
    with model.hooks({n: (lambda x, hook: None) for n in fused}):
        untouched, _ = model(corrupt)
    assert torch.equal(untouched, corrupt_logits)
    # looking at the scores or weights switches to the explicit softmax: the trace path's logits
    with model.hooks({n: (lambda x, hook: None) for n in every}):
        untouched, _ = model(corrupt)
    assert torch.equal(untouched, run_with_trace(model, corrupt).logits)
    # one position of the residual stream: patch(value, index) leaves the other positions alone
    with model.hooks({"blocks.0.resid_pre": patch(cache["embed"] + cache["pos_embed"], (slice(None), 3))}):
        one, _ = model(corrupt)
    assert torch.equal(one[0, :3], corrupt_logits[0, :3]) and not torch.equal(one[0, 3], corrupt_logits[0, 3])


def test_run_with_trace_switches_to_eval_and_back():
    tok = CharTokenizer.from_text("hello world")
    model = init_model(tiny(vocab_size=tok.vocab_size, dropout=0.5), seed=0).train()
    ctx = model.config.core.context_length
    trace = run_with_trace(model, encode_prompt(tok, "hello", ctx), kinds=("pattern",))
    assert model.training
    assert trace.tokens.tolist() == [tok.encode("hello")]
    model.eval()
    again = run_with_trace(model, tok.encode("hello"), kinds=("pattern",))
    assert not model.training
    assert torch.equal(trace.logits, again.logits)  # no dropout: the recorded run was in eval mode
    long = run_with_trace(model, encode_prompt(tok, "hello world " * 3, ctx), kinds=("pattern",))
    assert long.seq_len == model.config.core.context_length
    assert set(ALL_KINDS) >= {"pattern", "ln_final"}


def test_hooks_act_only_in_the_thread_that_attached_them():
    """Training beside an inspection of the same model: an intervention (or a recording) attached by
    one thread never changes another thread's forward pass."""
    import threading

    model = model_of()
    idx = torch.randint(0, 37, (1, 9))
    with torch.no_grad():
        clean = model(idx)[0]
    inside, entered, release = {}, threading.Event(), threading.Event()

    def other_thread():
        with model.hooks(dict(ablate_heads({(0, 0): "zero", (1, 2): "zero"}))), torch.no_grad():
            inside["ablated"] = model(idx)[0]
            inside["seen"] = bool(model.hook_points()["blocks.0.attn.z"].fns)
            entered.set()
            release.wait(timeout=30)

    t = threading.Thread(target=other_thread)
    t.start()
    assert entered.wait(timeout=30)
    try:  # while the other thread holds its hooks attached
        assert inside["seen"] and not model.hook_points()["blocks.0.attn.z"].fns
        with torch.no_grad():
            assert torch.equal(model(idx)[0], clean)
            tr = run_with_trace(model, idx, kinds=("pattern",))
        assert tr.stack("pattern").shape == (2, 4, 9, 9)
    finally:
        release.set()
        t.join(timeout=30)
    assert not torch.equal(inside["ablated"], clean)
