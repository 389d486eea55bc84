"""Reading and writing the session's model: a checkpoint (or any model ``open_model`` reads), the
shipped starter, Save, and whether a model fits this machine before one is made. Plain functions
that hand back what they read; the :class:`~app.session.session.Session` shows it
(``Session.load_checkpoint``, ``open_starter``, ``save_checkpoint``). Every torch step here holds
the process-wide ``compute_lock``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model.budget.sizing import ModelTooLarge, check, human_bytes, load_need, training_need
from model.runtime import compute_lock

# model/'s trainer, loaders and data are imported where they are used: together they take ~0.15 s
# to import, which the window's first paint does not wait for (app/shell/gui.py)
if TYPE_CHECKING:
    from app.session.model_slot import ModelSlot
    from model.config import GPTConfig
    from model.nn.gpt import GPT
    from model.train.settings import TrainSettings
    from model.train.trainer import Trainer


@dataclass
class OpenedModel:
    """What :func:`open_model_file` read: the model, in eval mode on the session's device."""

    model: GPT
    tokenizer: Any
    #: the run to continue (the file had training state that could be restored), else None
    trainer: Trainer | None
    #: the loss history the file recorded
    history: list[dict]
    #: the data to train it on (the run's own, or one its tokenizer reads), its spec; None: keep
    source: Any
    spec: str
    #: what the files say about the model (name, kind, ...)
    meta: dict = field(default_factory=dict)
    #: a remark for the status bar (why training starts afresh), or ""
    note: str = ""


def open_model_file(
    path: str, *, device: Any, source: Any, source_spec: str, stored: bool | None = None
) -> OpenedModel:
    """Read the model at ``path`` (``model.io.pretrained.open_model``: our checkpoints, a Hugging
    Face directory, a nanoGPT ``ckpt.pt``) and, when it has training state, the run to continue.

    When that state cannot be restored (a moved text file) the model still opens and ``note`` says
    why training starts afresh; without it, the data is ``source`` if the model's tokenizer reads
    it, else one it does (``data_for_model``). ``stored``: ``open_model``'s (how the matrices are
    held); where it does not apply, ``note`` says so. Raises ``CheckpointError`` (or another clear
    error) when the model cannot be read.
    """
    from model.io.pretrained import open_model
    from model.text.sources import data_for_model
    from model.train.trainer import Trainer

    note = ""
    with compute_lock:
        ckpt = open_model(path, device="cpu", stored=stored)
        opening_note = str((ckpt.meta or {}).pop("note", ""))  # said once, in the status bar, not kept
        trainer = None
        if ckpt.train_state is not None:
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    trainer = Trainer.from_checkpoint(path, device=str(device or "cpu"))
                if caught:
                    note = str(caught[-1].message)
            except Exception as exc:  # the model is fine; only continuing the run is not
                note = f"training state not restored ({exc}); Start fine-tunes the weights afresh"
    if trainer is not None:
        model, tokenizer, history = trainer.model, trainer.tokenizer, list(trainer.history)
        source = trainer.source
        spec = getattr(source, "name", "")
    else:
        model, tokenizer, history = ckpt.model, ckpt.tokenizer, []
        if ckpt.train_state:
            history = list(ckpt.train_state.get("history") or [])
        source, spec, why = data_for_model(tokenizer, source, source_spec)
        note = note or why
        if device is not None and str(model.device) != str(device):
            with compute_lock:
                model.to(device)
    model.eval()
    note = "; ".join(n for n in (opening_note, note) if n)
    return OpenedModel(model, tokenizer, trainer, history, source, spec, dict(ckpt.meta or {}), note)


def save_model_file(path: str, slot: ModelSlot, *, source_spec: str) -> None:
    """Write the model of ``slot`` to ``path``: with its run's training state when it has one."""
    from model.io.checkpoint.saved import save_checkpoint

    with compute_lock:
        if slot.trainer is not None:
            slot.trainer.save(path)
        elif slot.model is None:
            raise ValueError("there is no model to save")
        else:
            meta = {"source": source_spec, "name": Path(path).name}
            save_checkpoint(path, slot.model, slot.tokenizer, meta=meta)


def starter_note(model: GPT, tokenizer: Any, prompt: str) -> str:
    """The status bar's line once the shipped starter is shown: what trained it, its named heads."""
    from model.io.checkpoint.starter import STARTER_SOURCE, describe, named_heads

    with compute_lock:
        named = named_heads(model, tokenizer, prompt)
    heads = describe({r: h for r, h in named.items() if r in ("previous-token", "induction")})
    return (
        f"Starter model, trained by Attention Lab on {STARTER_SOURCE}"
        f"{': ' + heads if heads else ''}. Start trains a fresh model."
    )


#: The settings a size refusal names, as the Training panel labels them.
SETTING_LABELS = {"seq_len": "Sequence length", "batch_size": "Batch size"}


def in_window_words(
    exc: ModelTooLarge, *, seq_len_auto: bool = False, model_where: str = "Model panel"
) -> str:
    """A size refusal as the window says it, in one line: what the work needs, what this machine
    lets it use, and the value to lower where the window has it (a Training panel field, or the
    model's own value, in ``model_where``); no command-line flag, no environment variable
    (``seq_len_auto``: the sequence length is "auto", the model's context)."""
    need = exc.need
    head = (
        f"{need.what[:1].upper()}{need.what[1:]} needs about {human_bytes(need.total)}, and "
        f"{human_bytes(exc.usable)} of this machine's memory may be used"
    )

    def value(fix) -> str:
        label = SETTING_LABELS.get(fix.field, fix.field)
        now = f"{fix.value:,}"
        if fix.field == "seq_len" and seq_len_auto:
            now = f"auto = the model's context, {now}"
        return f"{label} ({now}) to {fix.to:,}"

    if exc.fixes:
        return f"{head}: lower {' or '.join(value(f) for f in exc.fixes[:2])} in the Training panel"
    return f"{head}: the model itself is too large ({model_where}: lower {need.lower})"


def check_fits(
    config: GPTConfig, *, device: Any, settings: TrainSettings | None, model_where: str = "Model panel"
) -> None:
    """Raise :class:`model.budget.sizing.ModelTooLarge` (one line in the window's words,
    :func:`in_window_words`: need, memory, what to lower) unless ``config`` fits this machine: to
    hold it (``settings`` None), or to train it with the batch and sequence length of ``settings``.
    Milliseconds; nothing is allocated."""
    if settings is not None:
        seq = min(int(settings.seq_len or config.core.context_length), int(config.core.context_length))
        need = training_need(config, batch=int(settings.batch_size), seq_len=seq)
    else:
        need = load_need(
            config, copies=1, what=f"a model of {config.core.n_layers} layers × d_model {config.core.d_model}"
        )
    try:
        check(need, device=device or "cpu")
    except ModelTooLarge as exc:
        auto = settings is not None and settings.seq_len is None
        exc.args = (in_window_words(exc, seq_len_auto=auto, model_where=model_where),)
        raise


__all__ = ["OpenedModel", "check_fits", "open_model_file", "save_model_file", "starter_note"]
