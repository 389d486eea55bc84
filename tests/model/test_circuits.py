"""Circuits from the weights (``model.interp.analysis.circuits``) against a dense numpy computation, and
path patching (``model.interp.analysis.patching.path_patch``) against plain head patching.

The dense reference below is written from the raw parameters alone (numpy, float64, every d × d
matrix formed): the norms' gains folded in, LayerNorm's centring as the projection P = I − 11ᵀ/d,
GQA's shared key/value heads, RoPE as a rotation matrix built here from its formula. On RoPE: QK
circuits and Q/K-composition depend on the offset between a query and its key; the app shows them at
one relative offset (0 by default: the unrotated W_Q W_Kᵀ), and
``test_the_rope_qk_circuit_at_an_offset_predicts_the_models_scores`` checks that the circuit at offset
Δ is what the model computes for a query Δ positions after its key (and that Δ = 0's is not, for
Δ ≠ 0). OV circuits, V-composition and copying are the same at every offset (tested too).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import model.interp.analysis.circuits as C
from model.config import GPTConfig
from model.interp.analysis.patching import patch_heads, path_patch, path_patch_joint
from model.nn.gpt import init_model


@pytest.fixture
def shipped_starter():
    """The starter model's folder (assets/starter); skipped when it is not built (``make starter``)."""
    from model.io.checkpoint import starter

    if not (starter.STARTER_DIR / "model.safetensors").is_file():
        pytest.skip("no starter model built (make starter)")
    return starter.STARTER_DIR


# ---------------------------------------------------------------------------------------------
# the dense reference
# ---------------------------------------------------------------------------------------------


def _gain(norm):
    """(gain [n] or None, centres) of a norm module, from its parameters."""
    w = getattr(norm, "weight", None)
    w = None if w is None else w.detach().double().numpy()
    name = type(norm).__name__
    if name == "LayerNorm":
        return w, True
    if name == "OffsetRMSNorm":
        return 1.0 + w, False
    return w, False


def _fold(gain, centre, d):
    """The d × d matrix a row vector passes through a norm by (scale left out): P diag(γ)."""
    P = np.eye(d) - np.ones((d, d)) / d if centre else np.eye(d)
    return P @ np.diag(gain if gain is not None else np.ones(d))


def _rope_matrix(k: int, r: int, position: int, base: float) -> np.ndarray:
    """R with rope(x) = x R for a head of k dimensions, the first r rotated in pairs (i, i + r/2) by
    position · base^(−2i/r) (GPT-NeoX / Llama's half split)."""
    R = np.eye(k)
    h = r // 2
    for i in range(h):
        a = position * base ** (-2 * i / r)
        c, s = np.cos(a), np.sin(a)
        R[i, i], R[i + h, i], R[i, i + h], R[i + h, i + h] = c, -s, s, c
    return R


def dense(model, offset: int = 0):
    """Every head's W_QK and W_OV [L, H, d, d], the embedding E [V, d] and the unembedding U [d, V] as
    the circuits see them."""
    cfg = model.config
    L, H, Hkv, k, d = cfg.core.n_layers, cfg.attention.n_heads, cfg.kv_heads, cfg.d_head, cfg.core.d_model
    n_rep = H // Hkv
    QK, OV = np.zeros((L, H, d, d)), np.zeros((L, H, d, d))
    for l, block in enumerate(model.blocks):
        a = block.attn

        def w(lin):
            return lin.weight.detach().double().numpy()

        Wq, Wk, Wv, Wo = w(a.q_proj), w(a.k_proj), w(a.v_proj), w(a.o_proj)
        read = np.eye(d)
        if cfg.normalization.norm_position in ("pre", "sandwich"):
            read = _fold(*_gain(block.norm1), d)
        write = np.eye(d)
        if cfg.normalization.norm_position == "sandwich":
            write = _fold(*_gain(block.post_norm1), d)
        if cfg.normalization.norm_position == "output":
            write = _fold(*_gain(block.norm1), d)
        if cfg.normalization.norm == "layernorm" and cfg.normalization.norm_position in ("pre", "sandwich"):
            write = write @ (np.eye(d) - np.ones((d, d)) / d)
        for h in range(H):
            g = h // n_rep
            q = Wq[h * k : (h + 1) * k].T  # [d, k]
            kk = Wk[g * k : (g + 1) * k].T
            v = Wv[g * k : (g + 1) * k].T
            if cfg.attention.qk_rmsnorm:
                q = q @ np.diag(_gain(a.q_norm)[0])  # per head: one [k] gain shared by the heads
                kk = kk @ np.diag(_gain(a.k_norm)[0])
            if cfg.positional.positions == "rope":
                r = cfg.rotary_dim
                q = q @ _rope_matrix(k, r, offset, cfg.positional.rope_base)
                kk = kk @ _rope_matrix(k, r, 0, cfg.positional.rope_base)
            o = Wo[:, h * k : (h + 1) * k].T  # [k, d]
            QK[l, h] = (read @ q) @ (read @ kk).T
            OV[l, h] = (read @ v) @ (o @ write)
    E = model.tok_emb.weight.detach().double().numpy()
    U = (
        (model.lm_head.weight if model.lm_head is not None else model.tok_emb.weight)
        .detach()
        .double()
        .numpy()
        .T
    )
    if model.norm_f is not None:
        U = _fold(*_gain(model.norm_f), d) @ U
    return QK, OV, E, U


def dense_scores(QK, OV) -> np.ndarray:
    L, H = QK.shape[:2]
    out = np.full((3, L, H, L, H), np.nan)
    fro = np.linalg.norm
    for l1 in range(L):
        for h1 in range(H):
            for l2 in range(l1 + 1, L):
                for h2 in range(H):
                    ov, qk, ov2 = OV[l1, h1], QK[l2, h2], OV[l2, h2]
                    out[0, l1, h1, l2, h2] = fro(ov @ qk) / (fro(ov) * fro(qk))
                    out[1, l1, h1, l2, h2] = fro(ov @ qk.T) / (fro(ov) * fro(qk))
                    out[2, l1, h1, l2, h2] = fro(ov @ ov2) / (fro(ov) * fro(ov2))
    return out


def _uneven(model, std: float = 0.3, seed: int = 0) -> None:
    """Weights that make every circuit different: matrices N(0, std²/fan_in · 4), gains around 1, biases."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 1:  # norm gains (Gemma's 1 + γ: γ around 0)
                base = 0.0 if "Offset" in type(model.get_submodule(name.rsplit(".", 1)[0])).__name__ else 1.0
                p.copy_(base + 0.5 * torch.rand(p.shape, generator=g) - 0.25)
            elif p.dim() == 1:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(std * torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5 * 2)


VARIANTS = {
    "MHA, LayerNorm, learned positions, biases": {},
    "MHA without biases": {"bias": "none", "norm_bias": False},
    "GQA, RMSNorm, RoPE": {"n_kv_heads": 2, "norm": "rmsnorm", "positions": "rope", "bias": "none"},
    "MQA, RoPE (half rotated), q/k biases": {
        "n_kv_heads": 1, "positions": "rope", "rotary_pct": 0.5, "bias": "qkv",
    },
    "Gemma-like: sandwich, 1 + γ norms, QK-norm": {
        "norm": "rmsnorm", "norm_position": "sandwich", "norm_offset": True, "qk_rmsnorm": True,
        "positions": "rope", "n_kv_heads": 2, "bias": "none",
    },
    "OLMo-2-like: output norms": {"norm": "rmsnorm", "norm_position": "output", "bias": "none"},
    "head_dim ≠ d / H, tied embeddings": {"head_dim": 12, "tie_embeddings": True},
    "mixture of experts": {"n_experts": 4, "n_experts_per_token": 2},
}  # fmt: skip


def _model(seed: int = 0, **overrides):
    base = {"vocab_size": 40, "context_length": 32, "n_layers": 3, "d_model": 32, "n_heads": 4}
    cfg = GPTConfig(**{**base, **overrides})
    model = init_model(cfg, seed=seed)
    _uneven(model, seed=seed)
    return model.eval()


# ---------------------------------------------------------------------------------------------
# circuits against the dense reference
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(VARIANTS))
def test_circuits_and_composition_scores_match_a_dense_computation(name):
    model = _model(**VARIANTS[name])
    QK, OV, E, U = dense(model)
    hw = C.head_weights(model, dtype=torch.float64)
    np.testing.assert_allclose(hw.qk().dense().numpy(), QK, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(hw.ov().dense().numpy(), OV, rtol=1e-9, atol=1e-12)
    want = dense_scores(QK, OV)
    got = C.composition_scores(hw)
    np.testing.assert_allclose(got.scores, want, rtol=1e-8, atol=1e-12)  # NaN where l2 ≤ l1 in both
    # the float32 weights (what the app uses) agree to float32 precision
    np.testing.assert_allclose(C.composition_scores(model).scores, want, rtol=2e-4, atol=1e-6)

    heads = C.head_circuits(model, hw)
    k = hw.shape[3]
    for l in range(QK.shape[0]):
        for h in range(QK.shape[1]):
            np.testing.assert_allclose(
                heads.qk_svals[l, h], np.linalg.svd(QK[l, h])[1][:k], rtol=1e-6, atol=1e-9
            )
            np.testing.assert_allclose(
                heads.ov_svals[l, h], np.linalg.svd(OV[l, h])[1][:k], rtol=1e-6, atol=1e-9
            )
            assert heads.qk_rank[l, h] == np.linalg.matrix_rank(QK[l, h])
            assert heads.ov_rank[l, h] == np.linalg.matrix_rank(OV[l, h])
            np.testing.assert_allclose(heads.qk_norm[l, h], np.linalg.norm(QK[l, h]), rtol=1e-6)
            # copying from every eigenvalue of the full OV circuit W_E W_OV W_U [V, V]
            lam = np.linalg.eigvals(E @ OV[l, h] @ U)
            mag = np.abs(lam)
            np.testing.assert_allclose(heads.copying[l, h], mag[lam.real > 0].sum() / mag.sum(), atol=1e-6)
            np.testing.assert_allclose(heads.copying_signed[l, h], lam.real.sum() / mag.sum(), atol=1e-6)
    # the full circuits over some tokens
    tokens = [3, 0, 17, 39]
    np.testing.assert_allclose(
        C.full_ov_circuit(model, 2, 1, tokens, hw), E[tokens] @ OV[2, 1] @ U, rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(
        C.full_qk_circuit(model, 1, 3, tokens, hw), E[tokens] @ QK[1, 3] @ E[tokens].T, rtol=1e-5, atol=1e-7
    )
    ids, _values = C.promoted_tokens(model, tokens, 2, 1, top=5, hw=hw)
    dense_rows = E[tokens] @ OV[2, 1] @ U
    assert (ids == np.argsort(-dense_rows, axis=1)[:, :5]).all()


def test_factored_matrices_give_the_dense_matrix_numbers():
    g = torch.Generator().manual_seed(1)
    A, B = (
        torch.randn(2, 3, 20, 5, generator=g, dtype=torch.float64),
        torch.randn(2, 3, 5, 20, generator=g, dtype=torch.float64),
    )
    fm = C.FactoredMatrix(A, B)
    M = (A @ B).numpy()
    np.testing.assert_allclose(fm.norm().numpy(), np.linalg.norm(M, axis=(-2, -1)), rtol=1e-10)
    np.testing.assert_allclose(fm.singular_values().numpy(), np.linalg.svd(M)[1][..., :5], rtol=1e-9)
    lam = np.sort_complex(fm.eigenvalues().numpy()[0, 0])
    dense_lam = np.linalg.eigvals(M[0, 0])
    dense_lam = np.sort_complex(dense_lam[np.argsort(-np.abs(dense_lam))[:5]])
    np.testing.assert_allclose(lam, dense_lam, rtol=1e-7, atol=1e-9)
    assert fm.T.shape == (2, 3, 20, 20)
    # a rank-deficient factor (a zero column): the Cholesky factor falls back to an eigendecomposition
    A2 = A.clone()
    A2[..., 0] = 0.0
    np.testing.assert_allclose(
        C.FactoredMatrix(A2, B).norm().numpy(), np.linalg.norm((A2 @ B).numpy(), axis=(-2, -1)), rtol=1e-9
    )


def test_the_rope_qk_circuit_at_an_offset_predicts_the_models_scores():
    """q_t · k_s = (x_t / r_t) W_QK(t − s) (x_s / r_s)ᵀ for RMSNorm's per-token scale r and no biases;
    W_QK(0), the default, is right only on the diagonal: RoPE circuits depend on position."""
    model = _model(positions="rope", norm="rmsnorm", bias="none", n_kv_heads=2, rotary_pct=0.5)
    cfg = model.config
    layer, head = 1, 3
    T = 12
    ids = torch.randint(0, cfg.core.vocab_size, (1, T), generator=torch.Generator().manual_seed(2))
    got = {}

    def keep(x, hook):
        got[hook.name] = x.detach().double()

    names = [f"blocks.{layer}.resid_pre", f"blocks.{layer}.attn.q", f"blocks.{layer}.attn.k"]
    with torch.no_grad(), model.hooks([(n, keep) for n in names]):
        model(ids)
    x = got[names[0]][0]  # [T, d]
    r = torch.sqrt((x * x).mean(-1) + cfg.normalization.norm_eps)
    xs = (x / r[:, None]).numpy()
    q = got[names[1]][0, head].numpy()  # [T, k] after RoPE
    k = got[names[2]][0, head // cfg.n_rep].numpy()
    actual = q @ k.T
    W = [
        C.head_weights(model, rope_offset=delta, dtype=torch.float64, layers=[layer]).qk().dense()[0, head]
        for delta in range(T)
    ]
    wrong = 0
    for t in range(T):
        for s in range(t + 1):
            np.testing.assert_allclose(xs[t] @ W[t - s].numpy() @ xs[s], actual[t, s], rtol=1e-5, atol=1e-6)
            wrong += not np.isclose(xs[t] @ W[0].numpy() @ xs[s], actual[t, s], rtol=1e-3, atol=1e-4)
    assert wrong > T * (T - 1) / 2 * 0.8  # almost every pair with t ≠ s differs from the offset-0 circuit
    # values do not rotate: OV circuits and V-composition are the same at every offset, Q/K are not
    a, b = C.composition_scores(model), C.composition_scores(model, rope_offset=5)
    np.testing.assert_allclose(a.scores[2], b.scores[2], rtol=1e-6)
    assert not np.allclose(a.scores[:2], b.scores[:2], equal_nan=True)
    QK5, _OV, _E, _U = dense(model, offset=5)  # the model's rotation tables are float32
    got5 = C.head_weights(model, rope_offset=5, dtype=torch.float64).qk().dense().numpy()
    np.testing.assert_allclose(got5, QK5, rtol=1e-5, atol=1e-7)


def test_the_chance_score_is_that_of_random_matrices_of_the_same_shapes():
    base = C.baseline_scores(64, 16)
    assert base.shape == (C.BASELINE_SAMPLES,)
    np.testing.assert_array_equal(base, C.baseline_scores(64, 16))  # fixed seed
    assert abs(np.mean(base**2) * 64 - 1) < 0.05  # E[score²] = 1/d exactly
    assert 0.9 / 8 < base.mean() < 1 / 8  # the mean just below √(1/d)
    # a random model composes at chance: its scores average the baseline
    model = init_model(GPTConfig(vocab_size=40, context_length=32, n_layers=3, d_model=64, n_heads=4), seed=3)
    comp = C.composition_scores(model)
    assert comp.baseline == pytest.approx(float(base.mean()))
    assert abs(np.nanmean(comp.scores) / comp.baseline - 1) < 0.1
    assert comp.baseline_rms == pytest.approx(1 / 8)


def test_bfloat16_products_stay_within_a_thousandth_of_float32():
    model = _model(n_layers=4, d_model=128, n_heads=8)
    a = C.composition_scores(model, precision="float32").scores
    b = C.composition_scores(model, precision="bfloat16").scores
    np.testing.assert_allclose(b, a, rtol=2e-3, atol=1e-5)


def test_strongest_and_reads_from_order_the_pairs():
    comp = C.composition_scores(_model())
    top = comp.strongest(top=5)
    assert [s for *_x, s in top] == sorted((s for *_x, s in top), reverse=True)
    kind, w, r, s = top[0]
    assert comp.scores[C.KINDS.index(kind), w[0], w[1], r[0], r[1]] == s and w[0] < r[0]
    assert all(e[0] == "V" for e in comp.strongest("v", top=4))
    assert len(comp.strongest()) == 3 * 3 * 4 * 4  # every pair of a later layer, nothing else
    reads = comp.reads_from(*r)
    assert reads[0][0] == kind or reads[0][2] >= s
    assert len(reads) == 3 * r[0] * comp.n_heads and comp.reads_from(0, 0) == []
    assert len(comp.writes_to(0, 0)) == 3 * 2 * comp.n_heads


@pytest.mark.parametrize(
    "overrides, words",
    [({"norm_position": "post"}, "Post-LN"), ({"kv_lora_rank": 8, "positions": "rope"}, "latent attention")],
)
def test_what_the_head_algebra_cannot_express_is_refused_in_one_line(overrides, words):
    model = init_model(
        GPTConfig(vocab_size=40, context_length=32, n_layers=2, d_model=32, n_heads=4, **overrides)
    )
    with pytest.raises(C.CircuitsUnsupported, match=words) as err:
        C.model_circuits(model)
    assert "\n" not in str(err.value)


def test_circuits_bundle_their_notes_and_arrays():
    got = C.model_circuits(_model(positions="rope", norm="rmsnorm"), rope_offset=2)
    assert got.rope_offset == 2 and any("RoPE" in n for n in got.notes)
    arrays = got.arrays()
    assert arrays["composition"].shape == (3, 3, 4, 3, 4)
    assert arrays["rope_offset"] == 2 and arrays["copying"].shape == (3, 4)
    assert all(a.dtype != object for a in arrays.values())


# ---------------------------------------------------------------------------------------------
# the starter model's induction circuit
# ---------------------------------------------------------------------------------------------
def test_the_starters_induction_head_reads_its_keys_from_a_previous_token_head(shipped_starter):
    """The shipped starter (2 layers × 4 heads, d 128, d_k 32, trained on task:induction; named heads:
    previous-token L0H1, L0H3, induction L1H3). Measured: K-composition L0H1 → L1H3 = 0.264 and
    L0H3 → L1H3 = 0.227, the induction head's two strongest inputs, against a chance score of 0.088
    (mean of 256 random pairs; 95th percentile 0.092; √(1/d) = 0.088): 3.0× and 2.6× chance. Its Q-
    and V-compositions with them are 0.11 or less. The heads' copying scores are 0.97 – 1.00."""
    from model.io.checkpoint import starter
    from model.io.pretrained import open_model

    ckpt = open_model(shipped_starter)
    named = starter.named_heads(ckpt.model, ckpt.tokenizer, "vsqyrnmezgcovsqyrnmezgco")
    prev, induction = set(named["previous-token"]), named["induction"]
    assert induction == [(1, 3)] and prev == {(0, 1), (0, 3)}, starter.describe(named)
    comp = C.model_circuits(ckpt.model).composition
    kind, writer, score = comp.reads_from(1, 3, 1)[0]
    assert (kind, writer) == ("K", (0, 1)) and score == pytest.approx(0.264, abs=0.002)
    k_scores = {w: s for kd, w, s in comp.reads_from(1, 3) if kd == "K"}
    assert k_scores[(0, 3)] == pytest.approx(0.227, abs=0.002)
    assert comp.baseline == pytest.approx(0.0883, abs=0.0005)
    for w in prev:  # both previous-token heads compose into the induction head's keys above chance
        assert k_scores[w] > 2.5 * comp.baseline and k_scores[w] > comp.baseline_p95
        assert comp.scores[0, w[0], w[1], 1, 3] < 0.12 and comp.scores[2, w[0], w[1], 1, 3] < 0.12


# ---------------------------------------------------------------------------------------------
# path patching
# ---------------------------------------------------------------------------------------------
def _no_mlp(model):
    """The sender's only readers become the next layer's heads and the final norm."""
    with torch.no_grad():
        for block in model.blocks:
            for p in block.mlp.parameters():
                p.zero_()
    return model


PATH_VARIANTS = {
    "MHA, LayerNorm": {},
    "GQA, RoPE, RMSNorm": {"n_kv_heads": 2, "positions": "rope", "norm": "rmsnorm", "bias": "none"},
    "sandwich norms": {"norm_position": "sandwich", "norm": "rmsnorm"},
}


def _prompts(vocab: int = 40, T: int = 12):
    g = torch.Generator().manual_seed(0)
    clean = torch.randint(0, vocab, (T,), generator=g)
    corrupt = clean.clone()
    corrupt[3], corrupt[7] = (clean[3] + 5) % vocab, (clean[7] + 3) % vocab
    return clean, corrupt


@pytest.mark.parametrize("name", list(PATH_VARIANTS))
def test_path_patching_every_receiver_and_the_direct_path_at_once_is_plain_head_patching(name):
    """Identity 1 (exact): in a model where a layer-0 sender is read only by layer 1's heads and the
    final norm (2 layers, MLPs zero), patching the sender's write into every layer-1 head's q, k and v
    and into the final norm, jointly, gives the logit difference plain patching of the sender gives."""
    model = _no_mlp(_model(n_layers=2, **PATH_VARIANTS[name])).double()
    clean, corrupt = _prompts()
    sender = (0, 1)
    pp = path_patch(model, clean, corrupt, sender)
    plain = patch_heads(model, clean, corrupt, answer=pp.answer, wrong=pp.wrong)
    assert abs(pp.total) > 1e-4  # a real effect (float64: 10⁻¹² would do)
    joint = path_patch_joint(model, clean, corrupt, sender, [(1, h, "qkv") for h in range(4)], direct=True)
    assert joint == pytest.approx(pp.total, rel=1e-9, abs=1e-13)
    # and plain head patching (patch_heads keeps float32 logits) measured the same
    assert plain.patched[sender] - plain.corrupt_diff == pytest.approx(pp.total, abs=1e-6)
    total = pp.total
    # without the direct path, or with only the keys, it is something else
    keys = path_patch_joint(model, clean, corrupt, sender, [(1, h, "k") for h in range(4)])
    assert keys != pytest.approx(total, rel=1e-3)
    assert pp.effects.shape == (3, 2, 4) and np.isnan(pp.effects[:, 0]).all()


@pytest.mark.parametrize("name", list(PATH_VARIANTS))
def test_path_effects_add_up_to_plain_head_patching_for_a_small_write(name):
    """Identity 2 (first order): with the sender's W_O scaled by 10⁻⁴, total = direct + Σ over layer 1's
    heads of the effects through q, k and v, to 10⁻³ of the total (the rest is O(‖Δ‖²))."""
    model = _no_mlp(_model(n_layers=2, **PATH_VARIANTS[name])).double()
    k = model.config.d_head
    with torch.no_grad():
        model.blocks[0].attn.o_proj.weight[:, k : 2 * k] *= 1e-4
    clean, corrupt = _prompts()
    pp = path_patch(model, clean, corrupt, (0, 1))
    assert abs(pp.total) > 1e-9
    assert pp.direct + np.nansum(pp.effects) == pytest.approx(pp.total, rel=1e-3)
    assert abs(pp.interaction) < 1e-3 * abs(pp.total)


def test_path_patching_measures_the_layers_asked_and_refuses_post_ln():
    model = _model(n_layers=3)
    clean, corrupt = _prompts()
    pp = path_patch(model, clean, corrupt, (0, 2), layers=[2])
    assert np.isnan(pp.effects[:, :2]).all() and np.isfinite(pp.effects[:, 2]).all()
    full = path_patch(model, clean, corrupt, (0, 2))
    np.testing.assert_allclose(pp.effects[:, 2], full.effects[:, 2], rtol=1e-5, atol=1e-6)
    assert pp.total == pytest.approx(full.total) and pp.direct == pytest.approx(full.direct)
    arrays = pp.arrays()
    assert arrays["path_effects"].shape == (3, 3, 4) and arrays["sender"].tolist() == [0, 2]
    with pytest.raises(ValueError, match="after the sender"):
        path_patch(model, clean, corrupt, (1, 0), layers=[1])
    with pytest.raises(ValueError, match="not one of"):
        path_patch(model, clean, corrupt, (3, 0))
    post = init_model(
        GPTConfig(vocab_size=40, context_length=32, n_layers=2, d_model=32, n_heads=4, norm_position="post")
    )
    with pytest.raises(ValueError, match="Post-LN"):
        path_patch(post, clean, corrupt, (0, 0))


def test_the_starters_path_patching_uses_an_induction_corruption(shipped_starter):
    from model.interp.causal import induction_corruption, patching_of, path_patching_of
    from model.io.pretrained import open_model

    ckpt = open_model(shipped_starter)
    tok, model = ckpt.tokenizer, ckpt.model
    prompt = "vsqyrnmezgcovsqyrnmezgco"
    ids = tok.encode(prompt)
    corrupt, at, new = induction_corruption(ids, model.config.core.vocab_size)
    assert at == 11 and ids[at] == ids[-1] and new not in ids and corrupt[:at] == ids[:at]
    res = path_patching_of(model, tok, ids, None, (0, 1), prompt=prompt)
    assert "induction corruption" in res.corruption and res.answer_label == "v"
    p = res.paths
    assert p.gap > 5 and p.restored(p.total) > 0.5  # the previous-token head carries most of it
    plain = patching_of(model, tok, ids, tok.decode(corrupt), answer="v", wrong=res.wrong_label)
    assert p.restored(p.total) == pytest.approx(plain.heads.restored[0, 1], abs=1e-4)
    # through layer 1's keys more than through its queries or values (K-composition)
    assert np.nansum(p.effects[1]) > np.nansum(np.abs(p.effects[0])) + np.nansum(np.abs(p.effects[2]))
