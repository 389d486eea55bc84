"""The session's inputs announce their own changes, the panels' edits gate Start through the one rule
(TrainingRun.problems), and Start does not write the training settings back (issue 40.1)."""

from __future__ import annotations

import pytest

from app.session.edits import PANELS, Edits
from model.config import ConfigError


@pytest.fixture
def tiny_session(qtbot, tiny_config, tiny_settings):
    """A session without a window on a tiny untrained model of ``task:copy``."""
    from app.session.session import Session

    s = Session()
    s.sample_every = 0
    s.set_device("cpu")
    s.set_source("task:copy")
    s.set_config(tiny_config)
    s.set_train_settings(tiny_settings.replace(steps=2, probe_every=0))
    s.build_model()
    yield s
    s.shutdown()


def test_edits_name_each_panels_problems_in_panel_order_then_the_invalid_ones():
    edits = Edits()
    assert edits.problems() == []
    assert edits.set("Training panel", ["seq_len 64 > context_length 32"], False)
    assert not edits.set("Training panel", ["seq_len 64 > context_length 32"], False)  # no change
    assert edits.set("Model panel", [], False)  # invalid, but no problem named (text in a number field)
    assert edits.problems() == [
        "seq_len 64 > context_length 32 (Training panel)",
        PANELS["Model panel"],
    ]
    assert edits.set("Model panel", ["n_heads 3 does not divide d_model 16"], False)
    assert edits.problems()[0] == "n_heads 3 does not divide d_model 16 (Model panel)"
    with pytest.raises(KeyError, match="unknown panel"):
        edits.set("Data panel", [], True)


def test_training_settings_announce_their_change_once_and_are_validated_when_set(qtbot, tiny_session):
    s = tiny_session
    seen = []
    s.trainSettingsChanged.connect(seen.append)
    new = s.train_settings.replace(steps=s.train_settings.steps + 1)
    s.set_train_settings(new)
    s.set_train_settings(new.replace())  # an equal value says nothing
    assert seen == [new]
    with pytest.raises(ConfigError):
        s.set_train_settings(new.replace(batch_size=0))
    assert s.train_settings == new  # nothing changed


def test_a_panels_edit_blocks_start_with_its_own_words_and_start_raises_them(qtbot, tiny_session):
    s = tiny_session
    assert s.run.problems() == []
    panels = []
    s.editsChanged.connect(panels.append)
    s.set_edit("Model panel", ["d_model must be a multiple of n_heads"], False)
    s.set_edit("Model panel", ["d_model must be a multiple of n_heads"], False)
    assert panels == ["Model panel"]
    assert s.run.problems()[0] == "d_model must be a multiple of n_heads (Model panel)"
    assert s.run.plan().kind == "blocked"
    with pytest.raises(ConfigError, match="Model panel"):
        s.start_training()
    assert s.state == "idle"
    s.set_edit("Model panel", [], True)
    assert s.run.problems() == []


def test_start_leaves_the_sessions_training_settings_as_they_were_set(qtbot, tiny_session):
    s = tiny_session
    before = s.train_settings.replace(device="auto")
    s.set_train_settings(before)
    changed = []
    s.trainSettingsChanged.connect(changed.append)
    with qtbot.waitSignal(s.trainingFinished, timeout=60_000):
        s.start_training()
    assert s.train_settings is before and changed == []  # the run filled its device in its own copy
    assert s.trainer.settings.device == "cpu"


def test_a_new_sources_vocabulary_is_announced_as_a_config_change(qtbot):
    """No model yet: the next model's config takes the new data's vocabulary, and says so."""
    from app.session.session import Session

    s = Session()
    s.set_source("task:copy")
    before = s.config.core.vocab_size
    configs, sources = [], []
    s.configChanged.connect(configs.append)
    s.dataChanged.connect(lambda src: sources.append((src, s.config)))
    s.set_source("builtin:primer")
    assert s.config.core.vocab_size == s.source.tokenizer.vocab_size != before
    assert configs == [s.config]
    assert sources == [(s.source, s.config)]  # the data's listeners see the config it made


def test_a_trainer_of_another_model_announces_its_config(qtbot, tiny_session):
    from model.train.trainer import Trainer

    s = tiny_session
    other = s.config.replace(n_layers=s.config.core.n_layers + 1)
    trainer = Trainer(other, s.source, s.train_settings)
    seen = []
    s.configChanged.connect(lambda config: seen.append((config, s.model)))
    s.install_trainer(trainer, fresh=True)
    assert seen == [(trainer.model.config, trainer.model)]
    assert s.config == trainer.model.config


def test_every_input_set_on_the_session_announces_itself(qtbot, tiny_session):
    """``config``, ``source`` and ``device`` cannot change silently, whoever sets them."""
    from model.text.sources import resolve_source

    s = tiny_session
    seen = []
    for signal in (s.configChanged, s.dataChanged, s.deviceChanged):
        signal.connect(seen.append)
    config = s.config.replace(n_layers=s.config.core.n_layers + 1)
    source = resolve_source("task:copy")
    s.config = config
    s.source = source
    s.config = config.replace()  # an equal value says nothing
    s.set_device("cpu")  # the same device: nothing
    assert seen == [config, source]


def test_the_session_is_made_and_driven_without_a_qapplication():
    """A fresh interpreter: no QApplication, no Qt widget module, no event loop: a script (or a
    notebook's thread) sets the inputs and builds a model, and hears each change as it happens."""
    import subprocess
    import sys

    script = """
import sys
from app.session.session import Session
from model.config import GPTConfig
s = Session()
heard = []
for signal in (s.deviceChanged, s.dataChanged, s.configChanged, s.modelChanged):
    signal.connect(heard.append)
s.set_device("cpu")
s.set_source("task:copy")
s.set_config(GPTConfig(context_length=32, n_layers=2, d_model=16, n_heads=2))
s.build_model(seed=0)
from PySide6.QtCore import QCoreApplication
assert QCoreApplication.instance() is None
assert "PySide6.QtWidgets" not in sys.modules
assert s.model is not None and s.model.config == s.config and s.config.core.n_layers == 2
assert heard[0] == "cpu" and heard[2] is s.source, heard  # (heard[1]: the source's vocabulary)
assert heard[-2:] == [s.config, s.model], heard
import threading
elsewhere = threading.Thread(target=s.set_source, args=("builtin:primer",))
elsewhere.start()
elsewhere.join()
# heard at once, no event loop to queue them for: the data, its vocabulary, the model rebuilt for it
assert heard[-3:-1] == [s.config, s.source] and heard[-1] is s.model, heard
assert s.shutdown(30)
print("driven")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "driven", out.stderr[-2000:]


def test_a_view_that_is_gone_is_neither_kept_alive_nor_called_by_the_session(qtbot):
    import gc
    import weakref

    from app.session.session import Session

    s = Session()
    heard = []

    class View:
        def on_data(self, source):
            heard.append(source)

    view = View()
    s.dataChanged.connect(view.on_data)
    s.set_source("task:copy")
    assert heard == [s.source]
    gone = weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None  # the session did not keep it alive
    s.set_source("task:copy")
    assert heard == [heard[0]] and s.dataChanged.receivers() == 0
