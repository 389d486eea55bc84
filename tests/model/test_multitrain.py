import threading

import pytest
import torch

from model.config import ConfigError, GPTConfig
from model.text.sources import resolve_source
from model.train.multitrain import TrainerGroup, variant_configs
from model.train.settings import TrainSettings
from model.train.trainer import TrainingDiverged

BASE = GPTConfig(context_length=32, n_layers=1, d_model=16, n_heads=2)


def settings(**kw):
    base = dict(steps=4, batch_size=4, seq_len=16, eval_every=2, eval_batches=1, warmup=1, seed=3)
    base.update(kw)
    return TrainSettings(**base)


def test_variants_are_validated_and_named():
    cfgs = variant_configs(BASE, {"mha": {}, "mqa": {"n_kv_heads": 1}})
    assert cfgs["mqa"].attention.n_kv_heads == 1 and cfgs["mha"] == BASE
    with pytest.raises(ConfigError) as err:
        variant_configs(BASE, {"bad": {"n_kv_heads": 3}, "typo": {"n_head": 2}})
    text = str(err.value)
    assert "variant 'bad'" in text and "variant 'typo'" in text and "n_head" in text


def test_group_trains_every_variant_on_the_same_batches():
    source = resolve_source("task:prev_token")
    group = TrainerGroup({"a": BASE, "b": BASE.replace(causal=False)}, source, settings())
    seen = {"a": [], "b": []}
    for name, t in group.trainers.items():
        original = t._batch

        def spy(split, gen, _orig=original, _name=name):
            x, y = _orig(split, gen)
            if split == "train":
                seen[_name].append(x.clone())
            return x, y

        t._batch = spy
    events = group.run()
    assert [e.name for e in events] == ["a", "b"] * 4
    assert group.step == 4
    assert all(torch.equal(x, y) for x, y in zip(seen["a"], seen["b"], strict=True))
    rows = group.summary()
    assert [r["name"] for r in rows] == ["a", "b"]
    assert all(r["steps"] == 4 and r["val_loss"] is not None and r["params"] > 0 for r in rows)
    # the same shape differs only in the mask: same parameter count, same FLOPs
    assert rows[0]["params"] == rows[1]["params"]


def test_stop_from_another_thread_ends_the_loop():
    source = resolve_source("task:prev_token")
    group = TrainerGroup({"a": BASE}, source, settings(steps=10_000))
    done = threading.Event()
    count = 0

    def on_event(_ev):
        nonlocal count
        count += 1
        if count == 3:
            threading.Thread(target=lambda: (group.control.stop(), done.set())).start()
            assert done.wait(10)

    group.run(callback=on_event)
    assert group.control.stopped and 3 <= count < 10_000
    assert group.trainers["a"].control is group.control  # one control: a stop also cuts a validation short


def test_a_diverging_variant_is_dropped_and_reported_the_others_go_on():
    source = resolve_source("task:prev_token")
    group = TrainerGroup({"a": BASE, "bad": BASE, "c": BASE}, source, settings(steps=5))
    bad = group.trainers["bad"]
    forward = bad.model.forward

    def poisoned(x, y=None, **kw):
        logits, loss = forward(x, y, **kw)
        return logits, loss * float("nan") if bad.step >= 2 else loss

    bad.model.forward = poisoned
    events = group.run()
    dropped = [e for e in events if e.diverged is not None]
    assert [(e.name, e.event) for e in dropped] == [("bad", None)]
    assert isinstance(dropped[0].diverged, TrainingDiverged) and "step 3" in str(dropped[0].diverged)
    assert set(group.diverged) == {"bad"} and group.active == ["a", "c"]
    assert bad.step == 2 and group.step == 5
    assert [e.name for e in events if e.event is not None] == ["a", "bad", "c"] * 2 + ["a", "c"] * 3
    assert [r["steps"] for r in group.summary()] == [5, 2, 5]


def test_every_variant_diverging_ends_the_loop():
    source = resolve_source("task:prev_token")
    group = TrainerGroup({"a": BASE}, source, settings(steps=50))
    group.trainers["a"].model.forward = lambda x, y=None, **kw: (None, torch.tensor(float("inf")))
    events = group.run()
    assert len(events) == 1 and events[0].diverged is not None
    assert group.active == [] and group.step == 0
