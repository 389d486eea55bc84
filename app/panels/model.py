"""The model configuration panel: every GPTConfig field as a widget, grouped, validated as you type.

The form is a :class:`~app.widgets.dataclass_form.DataclassForm` (:func:`gpt_config_form`, which
the Budget tab's editor uses too). Each field's tooltip is its line from
``model.config.FIELD_HELP``. After every edit the form builds a :class:`GPTConfig` and asks it for
``problems()``: each problem is listed under the form, the fields it names are outlined in red, and
:attr:`ConfigPanel.valid` turns False (the Train tab disables Start on ``validityChanged``). A valid
config is handed to the session with ``Session.set_config``. Fields that have no effect under the
other choices are switched off (``norm_bias`` under RMSNorm). Fields added to GPTConfig later appear
automatically in "Other".
"""

from __future__ import annotations

import contextlib
import html
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from app.model_files import check_fits
from app.widgets.dataclass_form import DataclassForm, FieldSpec
from app.widgets.layouts import pin_above, scrolled
from model.budget.arithmetic import parameters
from model.budget.sizing import ModelTooLarge
from model.config import CHOICES, FIELD_HELP, GPTConfig, default_config

#: Field groups, in order; fields not listed go into "Other".
GROUPS: list[tuple[str, list[str]]] = [
    ("Size", ["context_length", "n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff"]),
    (
        "Architecture",
        [
            "positions",
            "attn_scale",
            "causal",
            "norm",
            "norm_position",
            "norm_bias",
            "mlp",
            "bias",
            "tie_embeddings",
        ],
    ),
    ("Numerical details", ["dropout", "norm_eps", "gelu_approx", "rope_base"]),
    (
        "Llama-era parts",
        [
            "sliding_window",
            "qk_rmsnorm",
            "parallel_residual",
            "rotary_pct",
            "embed_scale",
            "norm_offset",
            "rope_scaling",
            "rope_factor",
            "rope_low_freq_factor",
            "rope_high_freq_factor",
            "rope_original_context",
            "rope_beta_fast",
            "rope_beta_slow",
            "rope_truncate",
            "rope_attn_factor",
        ],
    ),
    (
        "Today's block",
        [
            "window_pattern",
            "rope_local_base",
            "qk_norm_scope",
            "attn_scale_dim",
            "attn_softcap",
            "final_softcap",
            "attn_sinks",
            "n_experts",
            "n_experts_per_token",
            "n_shared_experts",
            "expert_d_ff",
            "moe_dense_layers",
            "router",
            "router_aux_loss",
            "router_choice_bias",
            "router_groups",
            "router_topk_groups",
            "router_scale",
            "swiglu_limit",
            "kv_lora_rank",
            "q_lora_rank",
            "qk_rope_head_dim",
            "qk_nope_head_dim",
            "v_head_dim",
        ],
    ),
]

#: Human labels (the config name follows in grey, so users learn the literature's names).
LABELS: dict[str, str] = {
    "vocab_size": "Vocabulary",
    "context_length": "Context length",
    "n_layers": "Layers",
    "d_model": "Model width",
    "n_heads": "Query heads",
    "n_kv_heads": "Key/value heads",
    "head_dim": "Head size",
    "d_ff": "MLP hidden width",
    "mlp": "MLP",
    "norm": "Normalisation",
    "norm_position": "Norm position",
    "norm_bias": "Norm bias",
    "positions": "Positions",
    "attn_scale": "Score scaling",
    "causal": "Causal mask",
    "bias": "Biases",
    "tie_embeddings": "Tie embeddings",
    "dropout": "Dropout",
    "norm_eps": "Norm ε",
    "gelu_approx": "GELU form",
    "rope_base": "RoPE base",
    "rope_scaling": "RoPE scaling",
    "rope_factor": "RoPE scaling factor",
    "rope_low_freq_factor": "Low-frequency factor",
    "rope_high_freq_factor": "High-frequency factor",
    "rope_original_context": "Original context",
    "rotary_pct": "Rotary fraction",
    "sliding_window": "Sliding window",
    "qk_rmsnorm": "QK-norm",
    "embed_scale": "Embeddings × √d",
    "norm_offset": "RMSNorm × (1 + γ)",
    "parallel_residual": "Parallel block",
    "window_pattern": "Local/global layers",
    "attn_softcap": "Score soft-cap",
    "final_softcap": "Logit soft-cap",
    "attn_sinks": "Attention sinks",
    "n_experts": "Experts",
    "n_experts_per_token": "Experts per token",
    "n_shared_experts": "Shared experts",
    "expert_d_ff": "Expert hidden width",
    "moe_dense_layers": "Dense first layers",
    "router": "Router weights",
    "router_aux_loss": "Load-balancing loss",
    "kv_lora_rank": "Latent KV rank",
    "q_lora_rank": "Latent Q rank",
    "qk_rope_head_dim": "Rotary part of a head",
    "qk_nope_head_dim": "Plain part of a head",
    "v_head_dim": "Value head size",
    "rope_beta_fast": "YaRN β fast",
    "rope_beta_slow": "YaRN β slow",
    "rope_truncate": "YaRN: whole periods",
    "rope_attn_factor": "YaRN attention factor",
    "rope_local_base": "RoPE base, local layers",
    "qk_norm_scope": "QK-norm over",
    "attn_scale_dim": "Scale by 1/√ of",
    "router_choice_bias": "Router choice bias",
    "router_groups": "Router groups",
    "router_topk_groups": "Groups chosen",
    "router_scale": "Routed weight scale",
    "swiglu_limit": "SwiGLU clamp",
}

#: Upper bounds for the integer spin boxes (generous: the Budget tab is for 7B-scale configs).
INT_MAX: dict[str, int] = {
    "context_length": 10_485_760,  # Llama 4 Scout reads 10M tokens
    "n_layers": 256,
    "d_model": 65536,
    "n_heads": 1024,
    "n_kv_heads": 1024,
    "head_dim": 4096,
    "d_ff": 262144,
    "sliding_window": 1048576,
    "rope_original_context": 1048576,
    "n_experts": 1024,
    "n_experts_per_token": 1024,
    "n_shared_experts": 64,
    "expert_d_ff": 262144,
    "moe_dense_layers": 256,
    "kv_lora_rank": 65536,
    "q_lora_rank": 65536,
    "qk_rope_head_dim": 4096,
    "qk_nope_head_dim": 4096,
    "v_head_dim": 4096,
}

#: Fields switched off while they have no effect on the model.
ENABLE_RULES = {
    "norm_bias": lambda v: v.get("norm") == "layernorm",  # RMSNorm has no shift β
    "gelu_approx": lambda v: v.get("mlp") in ("gelu", "geglu"),  # relu and swiglu use no GELU
    "rope_base": lambda v: v.get("positions") == "rope",  # only rotary positions have a base
    "rope_scaling": lambda v: v.get("positions") == "rope",
    "rotary_pct": lambda v: v.get("positions") == "rope",
    "rope_factor": lambda v: v.get("rope_scaling") in ("linear", "llama3", "yarn"),
    "rope_low_freq_factor": lambda v: v.get("rope_scaling") == "llama3",
    "rope_high_freq_factor": lambda v: v.get("rope_scaling") == "llama3",
    "rope_original_context": lambda v: v.get("rope_scaling") in ("llama3", "yarn"),
    **{
        name: (lambda v: v.get("rope_scaling") == "yarn")
        for name in ("rope_beta_fast", "rope_beta_slow", "rope_truncate", "rope_attn_factor")
    },
    "rope_local_base": lambda v: v.get("positions") == "rope" and bool(v.get("window_pattern")),
    "qk_norm_scope": lambda v: bool(v.get("qk_rmsnorm")),
    "attn_scale_dim": lambda v: v.get("attn_scale") == "sqrt_dk",
    "swiglu_limit": lambda v: v.get("mlp") == "swiglu",
    "norm_offset": lambda v: v.get("norm") == "rmsnorm",
    "parallel_residual": lambda v: v.get("norm_position") == "pre",
    "window_pattern": lambda v: v.get("sliding_window") is not None,
    **{
        name: (lambda v: v.get("n_experts") is not None)
        for name in (
            "n_experts_per_token",
            "n_shared_experts",
            "expert_d_ff",
            "moe_dense_layers",
            "router",
            "router_aux_loss",
            "router_choice_bias",
            "router_groups",
            "router_topk_groups",
            "router_scale",
        )
    },
    **{
        name: (lambda v: v.get("kv_lora_rank") is not None)
        for name in ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    },
}

#: Problems that name no ``field=`` but belong to one.
PROBLEM_FIELDS = {"must be even for rope": "head_dim"}


def gpt_config_form(
    *,
    groups: list[tuple[str, list[str]]] = GROUPS,
    int_max: dict[str, int] = INT_MAX,
    **options: Any,
) -> DataclassForm:
    """A :class:`DataclassForm` of every GPTConfig field: grouped, labelled, tooltips from
    ``FIELD_HELP``, choices from ``CHOICES``, dropout as a spin box, the enable rules above."""
    specs = {name: FieldSpec(maximum=m) for name, m in int_max.items()}
    specs["dropout"] = FieldSpec(minimum=0.0, maximum=0.95, decimals=2, step=0.05)
    specs["sliding_window"] = FieldSpec(maximum=int_max.get("sliding_window", 1048576), special="off")
    for name, special in (("n_experts", "dense"), ("kv_lora_rank", "off"), ("q_lora_rank", "full")):
        specs[name] = FieldSpec(maximum=int_max.get(name, 65536), special=special)
    for name in ("n_shared_experts", "moe_dense_layers"):  # 0 is a value here, not "unset"
        specs[name] = FieldSpec(minimum=0, maximum=int_max.get(name, 256))
    specs["router_aux_loss"] = FieldSpec(minimum=0.0, maximum=10.0, decimals=3, step=0.01)
    for name in ("attn_softcap", "final_softcap"):
        specs[name] = FieldSpec(special="off")
    specs["window_pattern"] = FieldSpec(special="every layer (e.g. LG, LLLLLG)")
    return DataclassForm(
        GPTConfig,
        groups=groups,
        labels=LABELS,
        tips=FIELD_HELP,
        specs=specs,
        choices=CHOICES,
        enable_rules=ENABLE_RULES,
        problem_fields=PROBLEM_FIELDS,
        **options,
    )


class ConfigPanel(QWidget):
    """Edits a GPTConfig. ``config()`` returns what the widgets say; ``valid`` whether it validates."""

    #: the edited config (GPTConfig, perhaps invalid) after every change
    configEdited = Signal(object)
    #: True when the edited config has no problems
    validityChanged = Signal(bool)

    def __init__(self, session=None, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session

        layout = scrolled(self)

        self.form = gpt_config_form(
            fixed={"vocab_size": None}, error_prefix="Fix before training:\n", errors_below=False
        )
        self.form.valueChanged.connect(self._on_edited)
        self.form.validityChanged.connect(self.validityChanged)
        self.widgets = self.form.widgets
        self.vocab_label = QLabel("set by the tokenizer")
        self.vocab_label.setToolTip(FIELD_HELP["vocab_size"])
        self.vocab_label.setWordWrap(True)  # "49152 (set by the tokenizer)" in a 320 px dock: two lines
        self.form.forms["Size"].insertRow(0, self.form.label("vocab_size"), self.vocab_label)
        layout.addWidget(self.form)

        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setToolTip("Sizes derived from the fields above")
        layout.addWidget(self.summary)
        self.error_label = self.form.error_label
        self.error_label.setObjectName("configErrors")
        #: problems of this config with the Training panel's settings (``set_related_problems``)
        self.related_label = QLabel()
        self.related_label.setObjectName("configRelated")
        self.related_label.setWordWrap(True)
        self.related_label.setStyleSheet("color: #c02020;")
        self.related_label.hide()
        pin_above(self, self.related_label)
        pin_above(self, self.error_label)  # both in sight however far the form is scrolled
        buttons = QHBoxLayout()
        self.reset_button = QPushButton("Reset to default")
        self.reset_button.setToolTip("The built-in default: a small GPT-2-style model that trains on the CPU")
        self.reset_button.clicked.connect(lambda: self.set_config(default_config(self.vocab_size)))
        buttons.addWidget(self.reset_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        layout.addStretch(1)

        if session is not None:
            self.set_config(session.config)
            session.dataChanged.connect(lambda src: self.set_vocab_size(src.tokenizer.vocab_size))
            session.configChanged.connect(self._on_session_config)
            session.trainingStateChanged.connect(lambda st: self.setEnabled(st == "idle"))
            if session.tokenizer is not None:
                self.set_vocab_size(session.tokenizer.vocab_size)
        else:
            self.set_config(default_config())

    @property
    def valid(self) -> bool:
        return self.form.valid

    @property
    def vocab_size(self) -> int | None:
        return self.form.fixed["vocab_size"]

    # ---- reading and writing -------------------------------------------------------------------
    def set_vocab_size(self, vocab: int | None) -> None:
        self.vocab_label.setText(f"{vocab} (set by the tokenizer)" if vocab else "set by the tokenizer")
        self.form.set_fixed("vocab_size", vocab)

    def set_config(self, config: GPTConfig) -> None:
        """Show ``config`` in the widgets (one change afterwards, not one per field)."""
        if config.vocab_size:
            self.form.fixed["vocab_size"] = config.vocab_size
            self.vocab_label.setText(f"{config.vocab_size} (set by the tokenizer)")
        self.form.set_value(config)

    def config(self) -> GPTConfig:
        """The config the widgets describe (not validated; text that is not a number stays text)."""
        return self.form.value()

    def problems(self) -> list[str]:
        return self.form.problems()

    def set_related_problems(self, problems: list[str]) -> None:
        """Show what this config cannot do with the Training panel's settings (a sequence longer
        than the context): said here too, where the user is editing, not only in that panel."""
        text = "With the Training panel's settings:\n• " + "\n• ".join(problems) if problems else ""
        self.related_label.setText(text)
        self.related_label.setVisible(bool(text))

    # ---- reacting ------------------------------------------------------------------------------
    def _on_session_config(self, config: GPTConfig) -> None:
        if config.to_dict() != self.config().to_dict():
            self.set_config(config)

    def _on_edited(self, cfg: GPTConfig) -> None:
        valid = self.form.valid
        self.summary.setText(self._summary(cfg) if valid else "")
        self.configEdited.emit(cfg)
        if valid and self.session is not None and not self.session.is_training:
            try:
                self.session.set_config(cfg)
            except Exception as exc:  # e.g. the tokenizer's vocabulary changed meanwhile
                self.error_label.setText(str(exc))

    def _summary(self, cfg: GPTConfig) -> str:
        parts = [f"d_k = {cfg.d_head}", f"MLP hidden = {cfg.hidden}"]
        if cfg.kv_heads == 1 and cfg.n_heads > 1:
            parts.append("multi-query attention (MQA)")
        elif cfg.kv_heads < cfg.n_heads:
            parts.append(f"grouped-query attention: {cfg.n_rep} query heads per K/V head")
        if cfg.vocab_size:
            with contextlib.suppress(Exception):
                parts.append(f"{parameters(cfg).total:,} parameters")
        text = " · ".join(parts)
        if cfg.vocab_size and self.session is not None:
            try:
                check_fits(cfg, device=self.session.device, settings=self.session.train_settings)
            except ModelTooLarge as exc:  # said beside the fields; New run and Start refuse it too
                text += (
                    f"<br><span style='color:#c02020'>This model does not fit: {html.escape(str(exc))}</span>"
                )
            except Exception:
                pass
        return text
