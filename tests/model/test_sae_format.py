"""An SAE's folder in SAELens's format: written whole and read back equal; SAELens's own cfg.json (6.x and
5.x field names, a TopK SAE saved with rescale_acts_by_decoder_norm) opened with its encode and decode;
a hostile cfg.json or safetensors refused in one line, before a tensor is allocated."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from model.config import GPTConfig
from model.interp.sae.format import CFG_FILE, WEIGHTS_FILE, SAEFileError, load_sae, save_sae
from model.interp.sae.sae import SAEConfig, SparseAutoencoder
from model.interp.sae.site import Site

D_IN, D_SAE = 16, 64


@pytest.fixture
def model_config() -> GPTConfig:
    """A model whose layer 1 z is 4 heads × 4 = 16 wide, and d_model 16."""
    return GPTConfig(vocab_size=10, context_length=8, n_layers=2, d_model=16, n_heads=4)


def random_sae(seed=0) -> SparseAutoencoder:
    sae = SparseAutoencoder(SAEConfig(Site("z", 1), D_IN, D_SAE, architecture="topk", k=5, model_name="m"))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return sae


def test_round_trip_is_exact_and_cfg_has_saelens_fields(tmp_path, model_config):
    sae = random_sae()
    save_sae(sae, tmp_path / "sae")
    cfg = json.loads((tmp_path / "sae" / CFG_FILE).read_text())
    assert cfg["architecture"] == "topk" and cfg["k"] == 5 and (cfg["d_in"], cfg["d_sae"]) == (D_IN, D_SAE)
    assert cfg["metadata"]["hook_name"] == "blocks.1.attn.hook_z" == cfg["hook_name"]
    assert cfg["reshape_activations"] == "hook_z" and cfg["metadata"]["sae_lens_version"] >= "6"
    assert cfg["activation_fn_kwargs"] == {"k": 5}  # what SAELens before 6 reads
    back = load_sae(tmp_path / "sae", model_config=model_config)
    for name, p in sae.named_parameters():
        assert torch.equal(getattr(back, name), p), name
    x = torch.randn(7, D_IN, generator=torch.Generator().manual_seed(3))
    assert torch.equal(back(x), sae(x))
    assert back.config.site == Site("z", 1) and back.config.model_name == "m"


def test_saving_again_replaces_the_folder_whole(tmp_path):
    save_sae(random_sae(seed=0), tmp_path / "sae", extra={"note.txt": b"first"})
    save_sae(random_sae(seed=1), tmp_path / "sae")
    assert sorted(p.name for p in (tmp_path / "sae").iterdir()) == [CFG_FILE, WEIGHTS_FILE]
    assert [p.name for p in tmp_path.iterdir()] == ["sae"]  # no temporary folder left beside it


def write_saelens(folder: Path, cfg: dict, tensors: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CFG_FILE).write_text(json.dumps(cfg))
    save_file(tensors, folder / WEIGHTS_FILE)
    return folder


def saelens_topk_cfg(**changes) -> dict:
    """A cfg.json as SAELens 6.x's TopKSAEConfig.to_dict() writes it."""
    cfg = {
        "d_in": D_IN, "d_sae": D_SAE, "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": True,
        "normalize_activations": "none", "reshape_activations": "none", "k": 5,
        "rescale_acts_by_decoder_norm": True, "architecture": "topk",
        "metadata": {"sae_lens_version": "6.5.1", "model_name": "gpt2",
                     "hook_name": "blocks.1.hook_resid_pre", "hook_head_index": None, "prepend_bos": True},
    }  # fmt: skip
    cfg.update(changes)
    return cfg


def weights(seed=0, d_in=D_IN, d_sae=D_SAE) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {
        "W_enc": torch.randn(d_in, d_sae, generator=g),
        "b_enc": torch.randn(d_sae, generator=g),
        "W_dec": torch.randn(d_sae, d_in, generator=g) * 3,  # rows far from unit norm
        "b_dec": torch.randn(d_in, generator=g),
    }


def saelens_topk(t: dict, x: torch.Tensor, rescale: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """SAELens's TopKSAE.encode and decode, written out (sae_lens/saes/topk_sae.py)."""
    n = t["W_dec"].norm(dim=-1)
    pre = (x - t["b_dec"]) @ t["W_enc"] + t["b_enc"]
    pre = pre * n if rescale else pre
    top = pre.topk(5, dim=-1)
    f = torch.zeros_like(pre).scatter_(-1, top.indices, top.values.relu())
    return f, (f / n if rescale else f) @ t["W_dec"] + t["b_dec"]


@pytest.mark.parametrize("rescale", [True, False])
def test_an_saelens_topk_sae_opens_with_its_encode_and_decode(tmp_path, model_config, rescale):
    t = weights()
    folder = write_saelens(tmp_path / "s", saelens_topk_cfg(rescale_acts_by_decoder_norm=rescale), t)
    sae = load_sae(folder, model_config=model_config)
    assert sae.config.site == Site("resid_pre", 1) and sae.config.model_name == "gpt2"
    x = torch.randn(9, D_IN, generator=torch.Generator().manual_seed(1)) * 2
    f, x_hat = saelens_topk(t, x, rescale)
    torch.testing.assert_close(sae.encode(x), f, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sae.decode(sae.encode(x)), x_hat, rtol=1e-5, atol=1e-5)


def test_a_saelens_5x_cfg_opens(tmp_path, model_config):
    """Before 6.0: flat hook_point, activation_fn_str "topk" with its k in activation_fn_kwargs."""
    cfg = {"architecture": "standard", "d_in": D_IN, "d_sae": D_SAE, "activation_fn_str": "topk",
           "activation_fn_kwargs": {"k": 5}, "apply_b_dec_to_input": True, "finetuning_scaling_factor": False,
           "context_size": 128, "model_name": "gpt2", "hook_point": "blocks.0.hook_mlp_out", "hook_layer": 0,
           "hook_head_index": None, "normalize_activations": "none", "dtype": "torch.float32"}  # fmt: skip
    t = weights()
    sae = load_sae(write_saelens(tmp_path / "old", cfg, t), model_config=model_config)
    assert sae.config.architecture == "topk" and sae.config.k == 5 and sae.config.site == Site("mlp_out", 0)
    x = torch.randn(4, D_IN, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(sae.decode(sae.encode(x)), saelens_topk(t, x, False)[1], rtol=1e-5, atol=1e-5)


def hostile_cases():
    """(name, cfg changes, tensors changes, the refusal's words)."""
    big = weights()
    big["b_enc"] = torch.zeros(D_SAE + 1)
    nan = weights()
    nan["W_dec"][3, 2] = math.nan
    extra = {**weights(), "scaling_factor": torch.ones(D_SAE)}
    half = {k: v.half() for k, v in weights().items()}
    return [
        ("architecture", {"architecture": "jumprelu"}, None, "architecture 'jumprelu'"),
        ("hook", {"metadata": {"hook_name": "blocks.1.hook_q_input"}}, None, "not a site"),
        ("layer", {"metadata": {"hook_name": "blocks.7.hook_resid_pre"}}, None, "layers 0 to 1"),
        ("d_in", {"d_in": 24}, weights(d_in=24), "d_in is 24 but the model's residual stream"),
        ("missing", {"d_sae": None}, None, "d_sae is 'None'"),
        ("huge", {"d_in": 1 << 20, "d_sae": 1 << 24}, None, "GiB of float32 weights"),
        ("bool", {"d_sae": True}, None, "d_sae is 'True'"),
        ("k", {"k": D_SAE + 1}, None, "k is"),
        ("normalised", {"normalize_activations": "layer_norm"}, None, "normalize_activations"),
        ("head", {"metadata": {"hook_name": "blocks.1.attn.hook_z", "hook_head_index": 2}}, None,
         "hook_head_index"),
        ("shape", {}, big, "b_enc is [65] but cfg.json says [64]"),
        ("names", {}, extra, "holds W_dec, W_enc, b_dec, b_enc, scaling_factor"),
        ("dtype", {}, half, "F16 but cfg.json's dtype is float32"),
        ("nan", {}, nan, "W_dec holds NaN"),
    ]  # fmt: skip


CASES = hostile_cases()


@pytest.mark.parametrize("name,cfg_changes,tensors,words", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_folder_is_refused_in_one_line(tmp_path, model_config, name, cfg_changes, tensors, words):
    cfg = saelens_topk_cfg()
    for key, value in cfg_changes.items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    folder = write_saelens(tmp_path / name, cfg, tensors if tensors is not None else weights())
    with pytest.raises(SAEFileError) as err:
        load_sae(folder, model_config=model_config)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_header_claiming_huge_tensors_is_refused_before_reading(tmp_path, model_config, monkeypatch):
    """The header says W_enc is 10^6 × 10^6 in a file of a few bytes: refused from the header alone."""
    folder = write_saelens(tmp_path / "h", saelens_topk_cfg(), weights())
    header = {"W_enc": {"dtype": "F32", "shape": [10**6, 10**6], "data_offsets": [0, 4 * 10**12]}}
    text = json.dumps(header).encode()
    (folder / WEIGHTS_FILE).write_bytes(len(text).to_bytes(8, "little") + text)
    monkeypatch.setattr("model.interp.sae.format.load_file", lambda *a: pytest.fail("tensors were read"))
    with pytest.raises(SAEFileError, match="holds W_enc; an SAE is"):
        load_sae(folder, model_config=model_config)


@pytest.mark.parametrize(
    "text,words",
    [
        ("[1, 2]", "not a JSON object"),
        ("{", "not valid JSON"),
        (" " * (2 << 20), "more than an SAE's config"),
    ],
)
def test_a_cfg_that_is_not_a_config_is_refused(tmp_path, text, words):
    folder = write_saelens(tmp_path / "c", saelens_topk_cfg(), weights())
    (folder / CFG_FILE).write_text(text)
    with pytest.raises(SAEFileError, match=words):
        load_sae(folder)


def test_a_truncated_weights_file_is_refused(tmp_path, model_config):
    folder = write_saelens(tmp_path / "t", saelens_topk_cfg(), weights())
    data = (folder / WEIGHTS_FILE).read_bytes()
    (folder / WEIGHTS_FILE).write_bytes(data[:-100])
    with pytest.raises(SAEFileError) as err:
        load_sae(folder, model_config=model_config)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", [CFG_FILE, WEIGHTS_FILE])
def test_a_fifo_in_place_of_a_file_is_refused_without_opening_it(tmp_path, name):
    import os

    folder = write_saelens(tmp_path / "f", saelens_topk_cfg(), weights())
    (folder / name).unlink()
    os.mkfifo(folder / name)  # opening it to read would wait forever
    with pytest.raises(SAEFileError, match="regular file"):
        load_sae(folder)
