"""DataclassForm: fields to widgets and back, tooltips, inline validation and enable rules."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit

from app.widgets.dataclass_form import DataclassForm, FieldSpec, format_float, parse_float
from app.widgets.typed_spin import TypedSpinBox
from model.config import AttentionPart, CorePart, GPTConfig, NormPart


@dataclass
class Recipe:
    """A toy dataclass with one field of every kind the form knows."""

    servings: int = field(default=4, metadata={"help": "How many people eat"})
    oven: int | None = field(default=None, metadata={"help": "Oven temperature; auto = no oven"})
    salt: float = field(default=0.25, metadata={"help": "Grams of salt"})
    sugar: float | None = None
    spice: str = "mild"
    vegan: bool = False
    title: str = "soup"

    def problems(self) -> list[str]:
        out = []
        if not isinstance(self.salt, float) or self.salt < 0:
            out.append(f"salt={self.salt!r} must be a number >= 0")
        if self.servings > 10 and not self.vegan:
            out.append(f"servings={self.servings} needs vegan=True above 10")
        return out


def _recipe_form(qtbot, **options) -> DataclassForm:
    form = DataclassForm(
        Recipe,
        groups=[("Basics", ["servings", "title"])],
        choices={"spice": ("mild", "hot")},
        specs={"oven": FieldSpec(maximum=300)},
        enable_rules={"sugar": lambda v: not v["vegan"]},
        **options,
    )
    qtbot.addWidget(form)
    return form


def test_round_trip_value_to_form_to_value(qtbot):
    form = _recipe_form(qtbot)
    kinds = {n: type(w) for n, w in form.widgets.items()}
    assert kinds == {
        "servings": TypedSpinBox,
        "title": QLineEdit,
        "oven": TypedSpinBox,
        "salt": QLineEdit,
        "sugar": QLineEdit,
        "spice": QComboBox,
        "vegan": QCheckBox,
    }
    assert list(form.forms) == ["Basics", "Other"]  # ungrouped fields go last
    for value in (
        Recipe(),
        Recipe(servings=2, oven=180, salt=0.1234567891, sugar=3e-4, spice="hot", vegan=True, title="cake"),
    ):
        form.set_value(value)
        assert form.value() == value
    assert form.widgets["oven"].maximum() == 300


def test_gpt_config_round_trips_through_the_model_and_budget_forms(qtbot):
    from app.panels.model import ConfigPanel
    from app.views.budget.tab import budget_config_form

    panel = ConfigPanel()
    editor = budget_config_form()
    qtbot.addWidget(panel)
    qtbot.addWidget(editor)
    cfg = GPTConfig(
        vocab_size=50257,
        n_layers=3,
        n_kv_heads=2,
        mlp="swiglu",
        norm="rmsnorm",
        positions="rope",
        dropout=0.1,
        norm_eps=1e-6,
        rope_base=500000.0,
        tie_embeddings=True,
    )
    panel.set_config(cfg)
    assert panel.config() == cfg
    editor.set_value(cfg)
    assert editor.value() == cfg
    assert isinstance(editor.widgets["dropout"], QDoubleSpinBox)
    assert "vocab_size" in editor.widgets and "vocab_size" not in panel.widgets  # the tokenizer's


def test_tooltips_come_from_field_metadata_or_the_tips_given(qtbot):
    form = _recipe_form(qtbot, tips={"title": "What to call it"})
    assert form.widgets["servings"].toolTip() == "How many people eat"
    assert form.widgets["oven"].toolTip().startswith("Oven temperature")
    assert form.widgets["title"].toolTip() == "What to call it"
    assert form.widgets["spice"].toolTip() == "spice"  # nothing said: the field's name
    assert form.label("salt").toolTip() == "Grams of salt"
    assert "servings" in form.label("servings").text()  # the field's own name beside the label

    from app.panels.model import ConfigPanel

    panel = ConfigPanel()
    qtbot.addWidget(panel)
    # a config field's tooltip and choices are what its one declaration, in its part, says
    assert panel.widgets["n_kv_heads"].toolTip() == AttentionPart.declared("n_kv_heads")["help"]
    assert panel.vocab_label.toolTip() == CorePart.declared("vocab_size")["help"]
    norm_position = panel.widgets["norm_position"]
    assert isinstance(norm_position, QComboBox)
    shown = [norm_position.itemText(i) for i in range(norm_position.count())]
    assert shown == list(NormPart.declared("norm_position")["choices"])


@dataclass
class Pizza:
    """A toy dataclass whose string fields declare their choices in their metadata, as config fields do."""

    crust: str = field(default="thin", metadata={"help": "The base", "choices": ("thin", "thick")})
    cheese: str = field(default="mozzarella", metadata={"choices": ("mozzarella", "none")})

    def problems(self) -> list[str]:
        return []


def test_choices_come_from_field_metadata_or_the_choices_given(qtbot):
    form = DataclassForm(Pizza, choices={"cheese": ("none", "feta")})
    qtbot.addWidget(form)
    crust, cheese = form.widgets["crust"], form.widgets["cheese"]
    assert isinstance(crust, QComboBox) and isinstance(cheese, QComboBox)
    assert [crust.itemText(i) for i in range(crust.count())] == ["thin", "thick"]
    assert [cheese.itemText(i) for i in range(cheese.count())] == ["none", "feta"]  # given: it wins
    crust.setCurrentIndex(1)
    assert form.value() == Pizza(crust="thick", cheese="none")


def test_an_invalid_value_flags_its_field_and_says_why(qtbot):
    form = _recipe_form(qtbot, error_prefix="Fix:\n")
    form.set_value(Recipe())
    assert form.valid and form.error_label.text() == ""
    with qtbot.waitSignal(form.validityChanged, timeout=5000) as got:
        form.widgets["salt"].setText("a pinch")
    assert got.args == [False] and not form.valid
    assert form.value().salt == "a pinch"  # text that is not a number stays text for validation
    assert form.error_label.text().startswith("Fix:\n• salt='a pinch'")
    assert "border" in form.widgets["salt"].styleSheet()
    assert "⚠ salt='a pinch'" in form.widgets["salt"].toolTip()
    assert form.widgets["servings"].styleSheet() == ""
    with qtbot.waitSignal(form.validityChanged, timeout=5000) as got:
        form.widgets["salt"].setText("0.5")
    assert got.args == [True] and form.error_label.text() == ""
    assert form.widgets["salt"].toolTip() == "Grams of salt"
    # a problem naming two fields outlines both
    form.set_field("servings", 12)
    assert {"servings", "vegan"} == form.fields_named(form.problems()[0])
    assert "border" in form.widgets["vegan"].styleSheet()


def test_value_changed_fires_once_per_set_value(qtbot):
    form = _recipe_form(qtbot)
    seen = []
    form.valueChanged.connect(seen.append)
    form.set_value(Recipe(servings=2, spice="hot", vegan=True))
    assert seen == [Recipe(servings=2, spice="hot", vegan=True)]


def test_enable_rules_switch_fields_off_while_they_have_no_effect(qtbot):
    form = _recipe_form(qtbot)
    assert form.widgets["sugar"].isEnabled()
    form.set_field("vegan", True)
    assert not form.widgets["sugar"].isEnabled()


@pytest.mark.parametrize("make", ["panel", "budget"])
def test_norm_bias_is_disabled_under_rmsnorm(qtbot, make):
    from app.panels.model import ConfigPanel
    from app.views.budget.tab import budget_config_form

    form = ConfigPanel().form if make == "panel" else budget_config_form()
    qtbot.addWidget(form)
    form.set_value(GPTConfig(norm="rmsnorm"))
    assert not form.widgets["norm_bias"].isEnabled() and not form.row_labels["norm_bias"].isEnabled()
    form.set_field("norm", "layernorm")
    assert form.widgets["norm_bias"].isEnabled() and form.row_labels["norm_bias"].isEnabled()
    form.set_field("norm", "rmsnorm")
    assert not form.widgets["norm_bias"].isEnabled()
    # the same rule for the other fields without effect: GELU's form, RoPE's base
    form.set_value(GPTConfig(mlp="swiglu", positions="learned"))
    assert not form.widgets["gelu_approx"].isEnabled() and not form.widgets["rope_base"].isEnabled()
    form.set_value(GPTConfig(mlp="gelu", positions="rope"))
    assert form.widgets["gelu_approx"].isEnabled() and form.widgets["rope_base"].isEnabled()


def test_float_text_formats_and_parses_exactly():
    for v in (3e-4, 1e-5, 10000.0, 0.1234567891, 500000.0):
        assert float(format_float(v)) == v
    assert format_float(1e-5) == "1e-05" and format_float(None) == ""
    assert parse_float(" 2.5 ") == 2.5 and parse_float("", optional=True) is None
    assert parse_float("fast") == "fast" and parse_float("") == ""


def test_todays_block_fields_have_groups_and_switch_on_with_their_feature(qtbot):
    """gpt-oss's and DeepSeek-V3's configs (YaRN, the clamped SwiGLU, the router's groups) round-trip
    through the Model panel; their fields sit in named groups, on only while they have an effect."""
    from app.panels.model import ConfigPanel
    from model.budget import presets

    panel = ConfigPanel()
    qtbot.addWidget(panel)
    assert "Other" not in panel.form.forms  # every field of GPTConfig has its group
    for name in ("gpt-oss-20b", "deepseek-v3"):
        cfg = presets.get(name).gpt_config()
        panel.set_config(cfg)
        assert panel.config() == cfg.replace(vocab_size=panel.config().core.vocab_size)
    w = panel.widgets
    assert w["rope_factor"].isEnabled() and w["rope_beta_fast"].isEnabled()  # DeepSeek's YaRN
    assert w["router_groups"].isEnabled() and w["attn_scale_dim"].isEnabled()
    assert w["swiglu_limit"].isEnabled()  # a SwiGLU model may clamp it
    panel.set_config(GPTConfig(positions="rope"))
    assert not w["rope_beta_fast"].isEnabled() and not w["router_groups"].isEnabled()
    assert not w["qk_norm_scope"].isEnabled() and not w["rope_local_base"].isEnabled()
