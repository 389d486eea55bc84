"""Training an SAE on the starter's layer-1 z, streamed from its corpus: it learns (variance explained far
above an untrained SAE's at L0 ≤ k), it resumes where it stopped to the very SAE of a run never stopped,
and its settings are refused in one line; evaluation measures as SAELens does (an exact SAE recovers
all of the loss, a zero one none of it)."""

from __future__ import annotations

import json

import pytest
import torch

from model.api import open_model
from model.interp.sae.evaluate import evaluate_sae
from model.interp.sae.format import load_sae
from model.interp.sae.sae import SAEConfig, SparseAutoencoder
from model.interp.sae.site import Site
from model.interp.sae.stream import ActivationStream
from model.interp.sae.train import SAETrainError, SAETrainSettings, train_sae
from model.progress import Cancelled, Progress, reporting

CORPUS = "task:induction"


@pytest.fixture(scope="module")
def lm():
    return open_model("assets/starter")


def settings(**changes) -> SAETrainSettings:
    base = dict(site=Site("z", 1), corpus=CORPUS, tokens=8192, d_sae=512, k=16, lr=1e-3, batch_tokens=1024,
                seq_len=64)  # fmt: skip
    return SAETrainSettings(**{**base, **changes})  # type: ignore[arg-type]


def test_training_learns_what_an_untrained_sae_does_not(lm):
    result = train_sae(lm.model, lm.tokenizer, settings(tokens=32_000))
    untrained = SparseAutoencoder(result.sae.config)
    untrained.reset_parameters(seed=0)
    kw = dict(corpus=CORPUS, n_tokens=4096, seq_len=64)
    trained, before = (evaluate_sae(lm.model, lm.tokenizer, s, **kw) for s in (result.sae, untrained))
    assert trained.variance_explained > 0.5 > before.variance_explained + 0.2
    assert trained.l0 <= 16 and trained.dead < 512 // 4
    fve = result.curves["fve"]
    assert len(fve) == result.steps and fve[-5:].mean() > fve[:5].mean() + 0.2
    assert result.tokens == result.curves["tokens"][-1] >= 32_000


def test_the_l1_penalty_of_a_relu_sae_makes_it_sparser(lm):
    """ReLU with λ Σ f_i ‖W_dec,i‖: the same run (same seed, same batches) with λ = 5 fires fewer features
    per token than with λ = 0."""
    kw = dict(architecture="standard", tokens=8000, lr=1e-2)
    free, penalised = (
        train_sae(lm.model, lm.tokenizer, settings(l1_coefficient=l1, **kw)) for l1 in (0.0, 5.0)
    )
    assert free.curves["l0"][0] == penalised.curves["l0"][0]  # the same start
    assert penalised.curves["l0"][-3:].mean() < 0.85 * free.curves["l0"][-3:].mean()


def test_a_stopped_run_resumes_to_the_same_sae(lm, tmp_path):
    whole = train_sae(lm.model, lm.tokenizer, settings(), out=tmp_path / "whole")
    progress = Progress()

    def stop_at_3(step):
        if step.step == 3:
            progress.cancel()

    with reporting(progress), pytest.raises(Cancelled):
        train_sae(lm.model, lm.tokenizer, settings(), out=tmp_path / "cut", on_step=stop_at_3)
    assert load_sae(tmp_path / "cut") is not None  # the state was saved when it stopped
    resumed = train_sae(lm.model, lm.tokenizer, settings(), out=tmp_path / "cut")
    assert resumed.resumed_at == 3 and resumed.steps == whole.steps == 8
    for name, p in whole.sae.named_parameters():
        assert torch.equal(getattr(resumed.sae, name), p), name
    for name, curve in whole.curves.items():
        assert (resumed.curves[name] == curve).all(), name
    on_disk = load_sae(tmp_path / "cut", model_config=lm.config)
    assert torch.equal(on_disk.W_dec, whole.sae.W_dec) and torch.equal(on_disk.b_enc, whole.sae.b_enc)
    again = train_sae(lm.model, lm.tokenizer, settings(), out=tmp_path / "cut")  # finished: nothing to do
    assert again.resumed_at == 8 and torch.equal(again.sae.W_enc, whole.sae.W_enc)
    with pytest.raises(SAETrainError, match=r"other settings .*lr"):
        train_sae(lm.model, lm.tokenizer, settings(lr=2e-3), out=tmp_path / "cut")


def test_an_out_folder_with_other_files_is_refused(lm, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SAETrainError, match="holds other files"):
        train_sae(lm.model, lm.tokenizer, settings(), out=tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "changes,words",
    [
        ({"d_sae": 0, "expansion": 2}, "expansion=2"),
        ({"d_sae": 100}, "d_sae=100"),
        ({"k": 0}, "k=0"),
        ({"lr": float("nan")}, "lr=nan"),
        ({"seq_len": 65}, "seq_len=65"),
        ({"site": Site("z", 2)}, "layer 2"),
        ({"architecture": "gated"}, "architecture='gated'"),
        ({"corpus": " "}, "corpus is empty"),
    ],
)
def test_settings_a_run_cannot_take_are_refused_in_one_line(lm, changes, words):
    with pytest.raises(ValueError) as err:
        train_sae(lm.model, lm.tokenizer, settings(**changes))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_stream_reads_batches_only_as_deep_as_the_site_and_resumes_on_the_same_ones(lm):
    stream = ActivationStream.for_tokens(lm.model, lm.tokenizer, Site("resid_pre", 1), CORPUS, tokens=4000,
                                         batch_tokens=500, seq_len=64)  # fmt: skip
    later_blocks: list[str] = []
    with lm.model.hooks({"blocks.1.attn.pattern": lambda x, hook: later_blocks.append("ran")}):
        got = list(stream.batches())
    assert not later_blocks  # block 1's attention never ran for a site entering block 1
    assert [b.x.shape for b in got] == [torch.Size([stream.tokens_per_batch, 128])] * stream.n_batches
    assert stream.total_tokens >= 4000
    again = list(stream.batches(start=5))
    assert [b.index for b in again] == list(range(5, stream.n_batches))
    assert all(torch.equal(a.x, b.x) for a, b in zip(again, got[5:], strict=True))


def exact_sae(d_in: int, site: Site) -> SparseAutoencoder:
    """ReLU features ``[x, −x]`` decoded back: ``decode(encode(x)) = relu(x) − relu(−x) = x``."""
    sae = SparseAutoencoder(SAEConfig(site, d_in, 2 * d_in, architecture="standard"))
    eye = torch.eye(d_in)
    with torch.no_grad():
        sae.W_enc.copy_(torch.cat([eye, -eye], dim=1))
        sae.W_dec.copy_(torch.cat([eye, -eye], dim=0))
        sae.b_enc.zero_()
        sae.b_dec.zero_()
    return sae


@pytest.mark.parametrize("site", [Site("z", 1), Site("mlp_out", 0)])
def test_an_exact_sae_recovers_all_the_loss_and_a_zero_one_none(lm, site):
    kw = dict(corpus=CORPUS, n_tokens=1024, seq_len=64, batch_tokens=512)
    exact = evaluate_sae(lm.model, lm.tokenizer, exact_sae(site.d_in(lm.config), site), **kw)
    assert exact.loss_sae == pytest.approx(exact.loss_clean, abs=1e-4)
    assert exact.loss_recovered == pytest.approx(1.0, abs=1e-3)
    assert exact.variance_explained == pytest.approx(1.0, abs=1e-6) and exact.dead == 0
    zero = exact_sae(site.d_in(lm.config), site)
    with torch.no_grad():
        zero.W_dec.zero_()
    nothing = evaluate_sae(lm.model, lm.tokenizer, zero, **kw)
    assert nothing.loss_sae == pytest.approx(nothing.loss_zero, abs=1e-5)
    assert nothing.loss_recovered == pytest.approx(0.0, abs=1e-3)
    # SAELens's variance explained, 1 − E‖x − x̂‖² / (E‖x‖² − ‖E x‖²), with x̂ = 0
    stream = ActivationStream.for_tokens(lm.model, lm.tokenizer, site, CORPUS, tokens=1024, batch_tokens=512,
                                         seq_len=64, seed=1)  # fmt: skip
    x = torch.cat([b.x for b in stream.batches()]).double()
    total = x.pow(2).sum(1).mean() - x.mean(0).pow(2).sum()
    assert nothing.variance_explained == pytest.approx(float(1 - x.pow(2).sum(1).mean() / total), rel=1e-6)
    assert nothing.tokens == len(x)


def test_the_public_api_trains_opens_and_evaluates(lm, tmp_path):
    import model

    result = model.sae_train(lm, "mlp_out", 0, CORPUS, out=tmp_path / "sae", features=512, tokens=2048,
                             batch_tokens=1024, seq_len=33, k=8)  # fmt: skip
    assert result.steps == 2 and result.sae.config.model_name == "starter"
    opened = model.open_sae(tmp_path / "sae", lm)
    assert torch.equal(opened.W_enc, result.sae.W_enc) and opened.config.site == Site("mlp_out", 0)
    ev = model.sae_eval(lm, opened, n_tokens=512)  # on the corpus it was trained on, at its seq_len
    assert ev.tokens == 512 and ev.l0 <= 8 and ev.d_sae == 512


def test_a_state_file_changed_by_hand_is_refused_in_one_line(lm, tmp_path):
    from safetensors.torch import load_file, save_file

    from model.interp.sae.train import STATE_FILE

    progress = Progress()
    with reporting(progress), pytest.raises(Cancelled):
        train_sae(lm.model, lm.tokenizer, settings(), out=tmp_path, on_step=lambda s: progress.cancel())
    path = tmp_path / STATE_FILE
    with open(path, "rb") as fh:
        header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    tensors = load_file(path)
    tensors["sae.W_dec"] = tensors["sae.W_dec"][:, :5].contiguous()  # the wrong shape
    save_file(tensors, path, metadata=header["__metadata__"])
    with pytest.raises(SAETrainError, match="cannot be resumed") as err:
        train_sae(lm.model, lm.tokenizer, settings(), out=tmp_path)
    assert "\n" not in str(err.value)
