"""`inspect` and `generate` open GGUF files of latent attention (deepseek2) and of gpt-oss, as the
Python API does (tests/model/test_gguf_mla.py holds them equal to transformers)."""

import copy

import torch

from app.cli import main
from model.interp.export import load_inspection
from model.io.gguf.load import load_gguf
from tests.gguf_mla_files import dequantized_into, write_deepseek2_gguf, write_gpt_oss_gguf


def test_inspect_a_gpt_oss_file_and_generate_from_a_deepseek2_one(tmp_path, capsys, write_hf_family):
    oss = write_hf_family(
        tmp_path / "oss",
        "gpt_oss",
        num_local_experts=4,
        num_experts_per_tok=2,
        head_dim=32,
        intermediate_size=32,
        sliding_window=8,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    )
    path = write_gpt_oss_gguf(tmp_path / "oss.gguf", oss, tmp_path / "oss", "Q8_0")
    out, prompt = tmp_path / "att.npz", "def f(x):\n    return x * 2 if x > 10 else print('big')"
    assert main(["inspect", "--checkpoint", str(path), "--prompt", prompt, "--out", str(out)]) == 0
    data = load_inspection(out)
    ids = torch.tensor([load_gguf(path).tokenizer.encode(prompt)])
    reference = copy.deepcopy(oss)
    dequantized_into(reference, path)
    with torch.no_grad():
        expected = reference(ids).logits[0].numpy()
    assert data["weights"].shape[:2] == (2, 4) and ids.shape[1] > 2 * oss.config.sliding_window
    assert abs(data["logits"] - expected).max() / abs(expected).max() < 1e-4

    ds = write_hf_family(
        tmp_path / "ds",
        "deepseek_v3",
        num_key_value_heads=4,
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        first_k_dense_replace=1,
        n_group=1,
        topk_group=1,
        kv_lora_rank=32,
        q_lora_rank=None,
        qk_rope_head_dim=8,
        qk_nope_head_dim=32,
        v_head_dim=32,
    )
    path = write_deepseek2_gguf(tmp_path / "ds.gguf", ds, tmp_path / "ds", "Q8_0")
    capsys.readouterr()
    argv = ["generate", "--checkpoint", str(path), "--prompt", "def ", "--max-new-tokens", "6", "--greedy"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("def ") and len(text) > len("def ")
