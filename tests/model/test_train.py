"""Trainer: determinism, exact resume, schedule, weight-decay groups, clipping, divergence, threads."""

from __future__ import annotations

import itertools
import json
import math
import threading

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from model.config import ConfigError, GPTConfig
from model.io.checkpoint.saved import load_checkpoint
from model.text.corpora import TextCorpus
from model.text.sources import resolve_source
from model.train.probes import Prober
from model.train.recipes import recommended_settings
from model.train.settings import ON_CONTINUE, TrainEvent, TrainSettings, continued, eta_seconds, lr_at
from model.train.trainer import Trainer, TrainingDiverged

TEXT = "".join(f"def f{i}(x):\n    return x * {i} + {i % 7}\n\n" for i in range(120))


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def source():
    return TextCorpus(TEXT, name="tiny")


def tiny_config(**kw) -> GPTConfig:
    base = dict(n_layers=2, d_model=32, n_heads=2, context_length=32)
    base.update(kw)
    return GPTConfig(**base)


def tiny_settings(**kw) -> TrainSettings:
    base = dict(steps=6, batch_size=4, seq_len=16, lr=3e-3, warmup=2, eval_every=3, eval_batches=2, threads=1)
    base.update(kw)
    return TrainSettings(**base)


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_same_weights(a, b) -> None:
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k


def test_same_seed_same_weights_other_seed_differs(source):
    a = Trainer(tiny_config(), source, tiny_settings())
    b = Trainer(tiny_config(), source, tiny_settings())
    c = Trainer(tiny_config(), source, tiny_settings(seed=1))
    ea, eb, _ = a.run(), b.run(), c.run()
    assert_same_weights(a.model, b.model)
    assert [e.train_loss for e in ea] == [e.train_loss for e in eb]
    assert not torch.equal(a.model.tok_emb.weight, c.model.tok_emb.weight)


def test_training_lowers_the_loss(source):
    t = Trainer(tiny_config(), source, tiny_settings(steps=30, eval_every=30, lr=1e-2))
    first = t.evaluate()
    assert first == pytest.approx(math.log(source.vocab_size), rel=0.1)  # a fresh model predicts ~uniformly
    t.run()
    assert t.evaluate() < first - 0.5


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_resume_continues_exactly(source, tmp_path, dropout):
    """N+M steps straight == N steps, save, load, M steps (weights, losses, optimizer moments)."""
    cfg, settings = tiny_config(dropout=dropout), tiny_settings(steps=8)
    straight = Trainer(cfg, source, settings)
    straight.run()

    first = Trainer(cfg, source, settings)
    first.run(steps=3)
    first.save(tmp_path / "ckpt")
    torch.manual_seed(1234)  # the global RNG moving in between must not matter
    resumed = Trainer.from_checkpoint(tmp_path / "ckpt", source=source)
    assert resumed.step == 3
    resumed.run()
    assert resumed.step == 8
    assert_same_weights(straight.model, resumed.model)
    assert resumed.history == [
        {**h, "tokens_per_s": r["tokens_per_s"], "elapsed": r["elapsed"]}
        for h, r in zip(straight.history, resumed.history)
    ]
    sa, sb = straight.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        assert torch.equal(sa[i]["exp_avg_sq"], sb[i]["exp_avg_sq"])


def test_resume_rebuilds_a_named_source(tmp_path):
    src = resolve_source("task:copy")
    t = Trainer(tiny_config(), src, tiny_settings(steps=4))
    t.run(steps=2)
    t.save(tmp_path / "c")
    r = Trainer.from_checkpoint(tmp_path / "c")
    assert r.source.name == "task:copy" and r.tokenizer == src.tokenizer
    r.run()
    assert r.step == 4


def test_lr_schedule_warmup_then_cosine_to_floor():
    s = TrainSettings(steps=100, lr=1e-3, warmup=10, min_lr=1e-4)
    lrs = [lr_at(i, s) for i in range(120)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert all(a < b for a, b in itertools.pairwise(lrs[:10]))  # rises during warmup
    assert all(a >= b for a, b in itertools.pairwise(lrs[10:100]))  # then only falls
    assert lrs[55] == pytest.approx((1e-3 + 1e-4) / 2, rel=0.02)  # halfway down the cosine
    assert lrs[99] == pytest.approx(1e-4, rel=0.01) and lrs[119] == 1e-4  # the floor, then flat
    assert TrainSettings(lr=2e-3).floor_lr == pytest.approx(2e-4)


@examples(max_examples=200, deadline=None)
@given(
    steps=st.integers(1, 400),
    warmup=st.integers(0, 60),
    step=st.integers(0, 800),
    more=st.integers(1, 400),
    choice=st.sampled_from(ON_CONTINUE),
)
def test_a_continued_schedule_is_what_on_continue_says(steps, warmup, step, more, choice):
    """Continue from ``step`` with a budget of ``more``: "continue" never changes the rate at the step
    it goes on from and only falls after the warm-up; "stretch" is the one schedule over the new
    total; "restart" warms up anew; all end at the floor on the new last step."""
    old = TrainSettings(steps=steps, warmup=warmup, lr=1e-3, min_lr=1e-4)
    new = continued(old, old.replace(steps=more, on_continue=choice), step)
    target = more if step < more else step + more
    assert new.steps == target
    if target == steps:  # the end it already had: the schedule is the one it had
        assert [lr_at(i, new) for i in range(step, target)] == [lr_at(i, old) for i in range(step, target)]
        return
    rates = [lr_at(i, new) for i in range(step, target + 2)]
    if choice == "continue":
        assert rates[0] == pytest.approx(lr_at(step, old))
        if step >= warmup:
            assert all(a >= b - 1e-15 for a, b in itertools.pairwise(rates))
    elif choice == "stretch":
        assert rates == pytest.approx([lr_at(i, old.replace(steps=target)) for i in range(step, target + 2)])
    else:
        assert rates[0] == pytest.approx(1e-3 * (1 / warmup if warmup else 1))
    warm = warmup if new.schedule_peak is None else 0
    if target - new.schedule_from > warm:  # a warm-up longer than the schedule never ends (as ever)
        assert rates[-1] == pytest.approx(old.floor_lr) and lr_at(target - 1, new) >= old.floor_lr - 1e-15


def test_events_report_lr_and_val_loss_when_due(source):
    t = Trainer(tiny_config(), source, tiny_settings(steps=7, eval_every=3))
    events = t.run()
    assert [e.step for e in events] == list(range(1, 8))
    assert [e.step for e in events if e.val_loss is not None] == [3, 6, 7]  # every 3 and the last
    assert [e.lr for e in events] == pytest.approx([lr_at(i, t.settings) for i in range(7)])
    assert all(e.tokens_per_s > 0 and e.grad_norm > 0 for e in events)
    assert events[-1].tokens_seen == 7 * 4 * 16
    assert all(a.elapsed < b.elapsed for a, b in itertools.pairwise(events))
    assert json.loads(json.dumps(events[0].to_dict()))["step"] == 1
    assert t.history == [e.to_dict() for e in events]


def test_weight_decay_on_matrices_only(source):
    t = Trainer(tiny_config(), source, tiny_settings(weight_decay=0.3))
    groups = {id(p): g["weight_decay"] for g in t.optimizer.param_groups for p in g["params"]}
    decayed = {n for n, p in t.model.named_parameters() if groups[id(p)] == 0.3}
    assert decayed == {n for n, p in t.model.named_parameters() if p.dim() >= 2}
    assert "blocks.0.attn.q_proj.bias" not in decayed and "blocks.0.norm1.weight" not in decayed
    assert "blocks.0.attn.q_proj.weight" in decayed
    assert {g["weight_decay"] for g in t.optimizer.param_groups} == {0.3, 0.0}
    groups = t.model.optimizer_groups(0.3)  # the model's own grouping, nanoGPT's configure_optimizers
    assert [g["names"] for g in groups] == t.param_names and set(groups[0]["names"]) == decayed


def test_gradients_are_clipped_before_the_step(source):
    t = Trainer(tiny_config(), source, tiny_settings(grad_clip=0.01))
    seen = []
    original = t.optimizer.step

    def spy(*a, **k):
        seen.append(math.sqrt(sum(float(p.grad.pow(2).sum()) for p in t.params if p.grad is not None)))
        return original(*a, **k)

    t.optimizer.step = spy
    event = t.train_step()
    assert event.grad_norm > 0.05  # the reported norm is the one before clipping
    assert seen[0] == pytest.approx(0.01, rel=1e-3)


def test_non_finite_loss_stops_and_keeps_last_good_weights(source, tmp_path):
    t = Trainer(tiny_config(), source, tiny_settings(steps=10))
    t.run(steps=2)
    t.save(tmp_path / "good")
    good = weights(t.model)
    forward = t.model.forward

    def poisoned(idx, targets=None, **kw):
        logits, loss = forward(idx, targets, **kw)
        return logits, loss * float("nan")

    t.model.forward = poisoned
    with pytest.raises(TrainingDiverged) as info:
        t.run()
    assert info.value.step == 3 and "step 3" in str(info.value) and "learning rate" in str(info.value)
    assert t.step == 2
    for k, v in weights(t.model).items():
        assert torch.equal(v, good[k]), k
    loaded = load_checkpoint(tmp_path / "good")
    assert loaded.train_state["step"] == 2


def test_probe_trace_is_cheap_and_does_not_disturb_training(source):
    plain = Trainer(tiny_config(), source, tiny_settings())
    prober = Prober()
    settings = tiny_settings(probe_every=2, probe_prompt="def f1(x):")
    probed = Trainer(tiny_config(), source, settings, callbacks={"on_step_end": [prober]})
    plain.run()
    events = probed.run()
    assert_same_weights(plain.model, probed.model)  # probes use no training randomness, change no weight
    traced = [e for e in events if e.trace is not None]
    assert [e.step for e in traced] == [2, 4, 6]
    w = traced[0].trace["pattern", 1]
    assert w.dtype == torch.float16 and tuple(w.shape) == (1, 2, 10, 10)
    assert probed.model.training
    assert "trace" not in traced[0].to_dict()
    # a prompt longer than the context keeps its end; unknown characters are substituted
    long = prober.trace(probed, "é" + "x = 1\n" * 20)
    assert long.seq_len == 32


def test_pause_resume_stop_from_another_thread(source):
    t = Trainer(tiny_config(), source, tiny_settings(steps=100_000, eval_every=1000))
    reached = {3: threading.Event(), 6: threading.Event()}

    def callback(event: TrainEvent) -> None:
        for n, flag in reached.items():
            if event.step >= n:
                flag.set()

    worker = threading.Thread(target=t.run, kwargs={"callback": callback}, daemon=True)
    worker.start()
    assert reached[3].wait(30)
    control = t.control
    control.pause()
    assert control.paused and control.wait_until_paused(30) and control.waiting
    held = t.step
    assert worker.is_alive()
    control.resume()
    assert reached[6].wait(30) and t.step > held
    control.pause()
    assert control.wait_until_paused(30)
    control.stop()  # also wakes the paused loop
    worker.join(30)
    assert not worker.is_alive() and control.stopped and t.step < 100_000
    assert t.run(steps=2) == []  # stop is sticky ...
    control.clear_stop()
    control.resume()
    assert len(t.run(steps=2)) == 2  # ... until cleared


def test_callbacks_run_in_order_after_each_step_the_prober_first(source):
    t = Trainer(
        tiny_config(), source, tiny_settings(steps=4, probe_every=2), callbacks={"on_step_end": [Prober()]}
    )
    calls = []

    def first(trainer, event):
        calls.append(("first", event.step, event.trace is not None))

    def second(trainer, event):
        assert trainer is t
        calls.append(("second", event.step, event.trace is not None))

    t.add_callback("on_step_end", first)
    t.add_callback("on_step_end", second)
    t.run(steps=2)
    assert calls == [("first", 1, False), ("second", 1, False), ("first", 2, True), ("second", 2, True)]
    t.remove_callback("on_step_end", first)
    t.run(steps=1)
    assert calls[-1] == ("second", 3, False) and len(calls) == 5
    assert t.history[-1]["elapsed"] >= t.history[-2]["elapsed"] > 0
    with pytest.raises(KeyError):
        t.add_callback("on_no_such_moment", first)


def test_prober_posts_numpy_frames_of_the_owners_prompt(source):
    frames, owner = [], {"prompt": "def f1(x):"}
    prober = Prober(prompt=lambda: owner["prompt"], post=frames.append)  # read at each probe: never copied
    t = Trainer(
        tiny_config(), source, tiny_settings(steps=4, probe_every=2), callbacks={"on_step_end": [prober]}
    )
    t.run(steps=2)
    owner["prompt"] = "return x"
    assert prober.refresh(t) is not None
    assert [(f.step, f.prompt) for f in frames] == [(2, "def f1(x):"), (2, "return x")]
    assert frames[0].weights.dtype == np.float16 and frames[0].weights.shape[:2] == (2, 2)
    owner["prompt"] = ""  # an empty owner prompt falls back to the trainer's own
    assert prober.refresh(t) is not None and frames[-1].prompt == t.probe_prompt
    t.settings = t.settings.replace(probe_every=0)
    assert prober.refresh(t) is None and len(frames) == 3  # probing off: no frame


def test_run_control_calls_soon_between_steps_even_while_paused(source):
    t = Trainer(tiny_config(), source, tiny_settings(steps=100_000, eval_every=1000))
    states, ran_at = [], []
    t.control.on_state = states.append
    worker = threading.Thread(target=t.run, daemon=True)
    t.control.pause()
    worker.start()
    assert t.control.wait_until_paused(30) and t.step == 0 and states == ["paused"]
    done = threading.Event()
    t.control.call_soon(lambda: (ran_at.append((threading.current_thread() is worker, t.step)), done.set()))
    assert done.wait(30) and ran_at == [(True, 0)]  # woke the paused loop, ran in its thread, no step
    assert t.control.wait_until_paused(30) and t.step == 0
    t.control.resume()
    t.control.stop()
    worker.join(30)
    assert not worker.is_alive() and t.control.stopped


def test_settings_can_change_between_steps(source):
    t = Trainer(tiny_config(), source, tiny_settings(steps=4))
    t.run(steps=2)

    def longer(event: TrainEvent) -> None:
        if event.step == 3:
            t.settings = t.settings.replace(steps=6, seq_len=8, batch_size=2, lr=1e-3)

    events = t.run(callback=longer)
    assert [e.step for e in events] == [3, 4, 5, 6]  # the new total is honoured by the running loop
    assert events[1].tokens_seen - events[0].tokens_seen == 2 * 8
    assert events[1].lr == pytest.approx(lr_at(3, t.settings))
    with pytest.raises(ConfigError, match="seq_len=64"):
        t.settings = t.settings.replace(seq_len=64)
    assert t.seq_len == 8


def test_threads_are_set_in_the_training_thread_only(source):
    before = torch.get_num_threads()
    seen = []
    t = Trainer(tiny_config(), source, tiny_settings(steps=1, threads=before + 1))
    worker = threading.Thread(target=lambda: (t.run(), seen.append(torch.get_num_threads())))
    worker.start()
    worker.join(30)
    assert seen == [before + 1]
    assert torch.get_num_threads() == before


def test_settings_validation_and_json_round_trip(source):
    s = tiny_settings(probe_every=5)
    assert TrainSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    with pytest.raises(ConfigError) as info:
        TrainSettings(steps=0, lr=-1.0, batch_size=2.5).validate()
    text = str(info.value)
    assert "steps=0" in text and "lr=-1.0" in text and "batch_size=2.5" in text
    with pytest.raises(ConfigError, match="unknown training setting 'stepz'"):
        TrainSettings.from_dict({"stepz": 3})
    with pytest.raises(ConfigError, match="seq_len=64 is longer than the model's context_length=32"):
        Trainer(tiny_config(), source, tiny_settings(seq_len=64))
    with pytest.raises(ConfigError, match="vocab_size=5"):
        Trainer(tiny_config(vocab_size=5), source, tiny_settings())


def test_task_sources_train_on_scored_targets_only(source):
    task = resolve_source("task:copy")
    t = Trainer(tiny_config(), task, tiny_settings())
    _, y = t._batch("train", torch.Generator().manual_seed(0))
    _, _, mask = task.get_masked_batch("train", 4, 16, torch.Generator().manual_seed(0))
    assert torch.equal(y == -100, ~mask) and bool((~mask).any())
    settings = recommended_settings(resolve_source("task:induction")).validate()
    assert settings.probe_every > 0


def test_sample_continues_the_prompt(source):
    t = Trainer(tiny_config(), source, tiny_settings())
    a = t.sample("def f", max_new_tokens=12, seed=3)
    assert len(a) == 12 and a == t.sample("def f", max_new_tokens=12, seed=3)
    assert t.model.training


def test_eta_from_the_recent_pace():
    history = [{"step": s, "elapsed": 0.5 * s} for s in range(1, 31)]
    assert eta_seconds(history, 30, 50) == pytest.approx(10.0)  # 20 steps at 0.5 s
    assert eta_seconds(history, 60, 50) == 0.0
    assert eta_seconds(history[:1], 1, 50) is None and eta_seconds(history, 30, 0) is None
    assert eta_seconds([{"step": 1, "elapsed": 1.0}, {"step": 1, "elapsed": 2.0}], 1, 9) is None


#: Every part of today's block at once, small enough to train here
TODAY = dict(
    n_experts=4,
    n_experts_per_token=2,
    n_shared_experts=1,
    moe_dense_layers=1,
    router_aux_loss=0.01,
    kv_lora_rank=8,
    q_lora_rank=12,
    positions="rope",
    attn_sinks=True,
    attn_softcap=20.0,
    final_softcap=30.0,
    sliding_window=8,
    window_pattern="LG",
    norm_position="sandwich",
    norm="rmsnorm",
    mlp="swiglu",
)


def test_todays_block_trains_reports_its_router_load_and_resumes_exactly(source, tmp_path):
    """A tiny MoE with latent attention, sinks, soft-caps and local/global layers learns on the CPU; each
    event carries the router's load per expert of every MoE layer; N+M steps == N, save, load, M."""
    cfg, settings = tiny_config(**TODAY), tiny_settings(steps=30, eval_every=30, lr=1e-2)
    t = Trainer(cfg, source, settings)
    first = t.evaluate()
    events = t.run()
    assert t.evaluate() < first - 0.5
    load = events[-1].router_load
    assert load is not None and len(load) == 1 and len(load[0]) == 4  # layer 1 of 2 (layer 0 dense)
    assert sum(load[0]) == pytest.approx(1.0) and all(0 <= f <= 1 for f in load[0])
    assert json.loads(json.dumps(t.history[-1]))["router_load"] == load

    settings = tiny_settings(steps=6)
    straight = Trainer(cfg, source, settings)
    straight.run()
    part = Trainer(cfg, source, settings)
    part.run(steps=3)
    part.save(tmp_path / "ckpt")
    resumed = Trainer.from_checkpoint(tmp_path / "ckpt", source=source)
    resumed.run()
    assert_same_weights(straight.model, resumed.model)
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in straight.history]
