"""A Hugging Face folder's float16 / bfloat16 safetensors matrices kept as stored (mapped, widened to
float32 one layer at a time): the same logits as reading them into float32, tied heads and shards
included, the size check by what it holds, and a small model read into float32 by default."""

from __future__ import annotations

import pytest
import torch

from model.budget import sizing
from model.budget.sizing import Available, ModelTooLarge
from model.io import stored as policy
from model.io.hf.folder import load_hf_family
from model.nn.quantized import StoredEmbedding, StoredLinear, has_stored, stored_bytes

CASES = {
    "llama-bf16": ("llama", torch.bfloat16, {}),
    "qwen2-fp16-tied": ("qwen2", torch.float16, {"tie_word_embeddings": True}),
    "llama-bf16-sharded": ("llama", torch.bfloat16, {"shard": "20KB"}),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory, write_hf_family):
    made: dict = {}

    def get(case: str):
        if case not in made:
            family, dtype, extra = CASES[case]
            folder = tmp_path_factory.mktemp(case)
            theirs = write_hf_family(folder, family, dtype=dtype, **extra)
            made[case] = folder, theirs
        return made[case]

    return get


@pytest.mark.parametrize("case", list(CASES))
def test_kept_as_stored_equals_read_into_float32_and_transformers(folders, case):
    folder, theirs = folders(case)
    kept, full = load_hf_family(folder, stored=True), load_hf_family(folder, stored=False)
    assert has_stored(kept.model) and not has_stored(full.model)
    assert isinstance(kept.model.blocks[0].attn.q_proj, StoredLinear)
    assert isinstance(kept.model.tok_emb, StoredEmbedding)
    assert kept.model.num_params() == full.model.num_params()
    assert stored_bytes(kept.model) == 2 * sum(  # two bytes a value, every matrix
        p.numel() for name, p in full.model.named_parameters() if p.ndim == 2
    )
    ids = torch.tensor([[3, 17, 99, 5, 250, 8, 41, 7]])
    with torch.no_grad():
        ours, want, ref = kept.model(ids)[0], full.model(ids)[0], theirs(ids).logits
    assert torch.equal(ours, want)  # widening 16-bit values is exact; the same products
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)
    state = kept.model.state_dict()  # a saved copy is an ordinary float32 one
    for name, p in full.model.state_dict().items():
        assert torch.equal(state[name], p), name


def test_a_small_model_is_read_into_float32_by_default_and_a_large_one_kept(folders, monkeypatch):
    folder, _ = folders("llama-bf16")
    assert not has_stored(load_hf_family(folder).model)
    monkeypatch.setattr(policy, "STORED_ABOVE", 0)
    assert has_stored(load_hf_family(folder).model)
    assert not has_stored(load_hf_family(folder, dtype=torch.bfloat16).model)


def test_the_size_check_counts_what_is_kept_as_stored(folders, monkeypatch):
    folder, _ = folders("llama-bf16")
    monkeypatch.setattr(sizing, "available_memory", lambda device="cpu": Available(1 << 20, "MemAvailable"))
    with pytest.raises(ModelTooLarge) as caught:
        load_hf_family(folder, stored=True)
    message = str(caught.value)
    assert "\n" not in message and "weights as stored" in message


def test_the_model_s_description_says_its_matrices_are_kept_as_stored(folders):
    from model.io.pretrained import describe_origin

    folder, _ = folders("llama-bf16")
    kept, full = load_hf_family(folder, stored=True), load_hf_family(folder, stored=False)
    assert kept.meta["stored_bytes"] == stored_bytes(kept.model) > 0 and "stored_bytes" not in full.meta
    line = describe_origin(kept.meta)
    assert "matrices kept as stored (" in line and "made float32 one layer at a time" in line
    assert f"{full.model.num_params():,} parameters" in line  # the same count either way
    assert "kept as stored" not in describe_origin(full.meta)
