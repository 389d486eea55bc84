"""A sharded Hugging Face model's index names files inside its folder: a name that climbs out (or is
absolute) is refused before anything is opened; a shard that is a link into a cache (``../../blobs``,
as the Hugging Face cache lays snapshots out) still loads."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from model.io.checkpoint.saved import CheckpointError
from model.io.pretrained import open_model


def shard(tmp_path, gpt2_tokenizer_dir, write_hf_gpt2):
    folder = tmp_path / "snapshots" / "abc"
    folder.mkdir(parents=True)
    reference = write_hf_gpt2(folder, gpt2_tokenizer_dir, seed=2)
    tensors = load_file(str(folder / "model.safetensors"))
    (folder / "model.safetensors").unlink()
    return folder, reference, tensors


@pytest.mark.parametrize("name", ["../../../../../../etc/passwd", "/etc/passwd", "a/../../x.safetensors"])
def test_a_shard_outside_the_folder_is_refused(tmp_path, gpt2_tokenizer_dir, write_hf_gpt2, name):
    folder, _, tensors = shard(tmp_path, gpt2_tokenizer_dir, write_hf_gpt2)
    weight_map = dict.fromkeys(tensors, name)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match="outside the model folder"):
        open_model(folder)


def test_a_shard_linked_into_a_cache_loads(tmp_path, gpt2_tokenizer_dir, write_hf_gpt2):
    folder, reference, tensors = shard(tmp_path, gpt2_tokenizer_dir, write_hf_gpt2)
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    save_file(tensors, str(blobs / "0123abcd"))
    (folder / "model-00001-of-00001.safetensors").symlink_to("../../blobs/0123abcd")
    weight_map = dict.fromkeys(tensors, "model-00001-of-00001.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    ckpt = open_model(folder)
    ids = torch.tensor([ckpt.tokenizer.encode("the cat")])
    with torch.no_grad():
        assert (ckpt.model(ids)[0] - reference(ids).logits).abs().max().item() < 1e-4
