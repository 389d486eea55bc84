"""Opening the families of today's block exactly: Mixtral, Qwen3-MoE, DeepSeek-V3, gpt-oss, Gemma 2,
Gemma 3, OLMo 2 and Phi-3 (model.families).

The reference is ``transformers`` itself (test-only), as in test_families.py: each case is a tiny random
model of the family with uneven weights (norm weights ≠ 1, biases, sinks and DeepSeek's choice bias
non-zero), eager attention, saved with ``save_pretrained`` (two cases sharded with an index, two in
bfloat16), beside a tokenizer.json. Each family's own part is switched on and sized so that it acts:
windows shorter than the sequences (local layers matter), soft-caps and gpt-oss's SwiGLU limit small
enough to bite, YaRN on gpt-oss and DeepSeek (with mscale on the scores), a local RoPE base and a
scaled global one on Gemma 3, grouped routing with a choice bias on DeepSeek, dense first layers on
Qwen3-MoE and DeepSeek. Ours must give the same logits (≤ 1e-4), attention weights (≤ 1e-5), 20 greedy
tokens, token ids, and for the mixtures of experts the same experts for every token in every layer;
the budget's count must equal the model's numel.
"""

from __future__ import annotations

import json
import shutil
import time
import tracemalloc

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from model.budget.arithmetic import parameters
from model.interp.trace import run_with_trace
from model.io.checkpoint.saved import CheckpointError
from model.io.hf.families import family_config
from model.io.pretrained import detect, open_model
from model.io.weights import build_from_state_dict
from model.nn.generate import generate

_YARN_DEEPSEEK = {
    "rope_type": "yarn",
    "rope_theta": 10000.0,
    "factor": 4.0,
    "original_max_position_embeddings": 16,
    "mscale": 1.0,
    "mscale_all_dim": 0.8,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
}
_YARN_GPT_OSS = {
    "rope_type": "yarn",
    "rope_theta": 1000.0,
    "factor": 8.0,
    "original_max_position_embeddings": 16,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
}

#: case -> (model_type, writer options)
CASES = {
    "mixtral-window-sharded": (
        "mixtral",
        dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=12, shard="40KB"),
    ),
    "qwen3_moe-dense-first": (
        "qwen3_moe",
        dict(
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=16,
            head_dim=12,
            mlp_only_layers=[0],
            norm_topk_prob=True,
        ),
    ),
    "deepseek_v3-mla-grouped-yarn-bf16": (
        "deepseek_v3",
        dict(
            num_hidden_layers=3,
            num_key_value_heads=4,
            n_routed_experts=8,
            num_experts_per_tok=2,
            n_shared_experts=1,
            moe_intermediate_size=16,
            first_k_dense_replace=1,
            n_group=4,
            topk_group=2,
            kv_lora_rank=12,
            q_lora_rank=20,
            qk_rope_head_dim=8,
            qk_nope_head_dim=8,
            v_head_dim=6,
            rope_parameters=_YARN_DEEPSEEK,
            dtype=torch.bfloat16,
        ),
    ),
    "deepseek_v3-full-q-not-interleaved": (
        "deepseek_v3",
        dict(
            num_key_value_heads=4,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_shared_experts=2,
            moe_intermediate_size=16,
            first_k_dense_replace=0,
            n_group=1,
            topk_group=1,
            kv_lora_rank=12,
            q_lora_rank=None,
            qk_rope_head_dim=4,
            qk_nope_head_dim=8,
            v_head_dim=8,
            rope_interleave=False,
        ),
    ),
    "gpt_oss-sinks-yarn": (
        "gpt_oss",
        dict(
            num_local_experts=4,
            num_experts_per_tok=2,
            head_dim=8,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"],
            swiglu_limit=2.0,
            rope_parameters=_YARN_GPT_OSS,
        ),
    ),
    "gemma2-softcaps-sharded": (
        "gemma2",
        dict(
            num_hidden_layers=3,
            head_dim=16,
            query_pre_attn_scalar=24,
            sliding_window=8,
            final_logit_softcapping=5.0,
            attn_logit_softcapping=3.0,
            shard="60KB",
        ),
    ),
    "gemma3_text-local-rope": (
        "gemma3_text",
        dict(
            num_hidden_layers=4,
            head_dim=16,
            query_pre_attn_scalar=12,
            sliding_window=8,
            layer_types=["sliding_attention"] * 3 + ["full_attention"],
            rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 100000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 1000.0},
            },
        ),
    ),
    "olmo2-qk-norm-all": ("olmo2", dict()),
    "phi3-fused-window-bf16": (
        "phi3",
        dict(
            sliding_window=10,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
            dtype=torch.bfloat16,
        ),
    ),
}

MOE = [case for case, (mt, _) in CASES.items() if mt in ("mixtral", "qwen3_moe", "deepseek_v3", "gpt_oss")]


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def today_models(tmp_path_factory, write_hf_family):
    """case -> (directory, transformers' model, our Checkpoint), each written and opened once."""
    made: dict = {}

    def get(case: str):
        if case not in made:
            model_type, options = CASES[case]
            directory = tmp_path_factory.mktemp(case)
            reference = write_hf_family(directory, model_type, **options)
            made[case] = directory, reference, open_model(directory)
        return made[case]

    return get


@pytest.fixture(params=list(CASES))
def family(request, today_models):
    return today_models(request.param)


def _ids(ckpt, text: str, n: int) -> torch.Tensor:
    return torch.tensor([ckpt.tokenizer.encode(text)[:n]])


def test_detected_and_the_budget_counts_every_parameter(family):
    directory, reference, ckpt = family
    model_type = reference.config.model_type
    assert detect(directory) == (f"hf-{model_type}", directory)
    assert ckpt.meta["kind"] == f"hf-{model_type}" and not ckpt.model.training
    numel = sum(p.numel() for p in ckpt.model.parameters())
    assert parameters(ckpt.config).total == numel == ckpt.meta["n_params"]
    stored = sum(b.numel() for n, b in reference.named_buffers() if n.endswith("e_score_correction_bias"))
    assert numel == reference.num_parameters() + stored  # DeepSeek's choice bias: their buffer, our parameter


def test_token_ids_match_transformers(family, tricky_texts):
    directory, _, ckpt = family
    theirs = PreTrainedTokenizerFast.from_pretrained(str(directory))
    for text in tricky_texts:
        assert ckpt.tokenizer.encode(text) == theirs(text)["input_ids"], text


def test_logits_match_transformers(family, tricky_texts):
    _, reference, ckpt = family
    for text in tricky_texts:
        ids = _ids(ckpt, text, 48)
        with torch.no_grad():
            expected = reference(ids).logits
            ours, _ = ckpt.model(ids)
        assert (ours - expected).abs().max().item() <= 1e-4, text
        assert expected.std().item() > 0.5  # uneven random weights: logits far from a constant


def test_attention_weights_match_transformers_past_the_window(family, tricky_texts):
    _, reference, ckpt = family
    ids = _ids(ckpt, tricky_texts[1], 40)
    window = ckpt.config.attention.sliding_window
    assert window is None or ids.shape[1] > 2 * window  # local layers see only part of it
    with torch.no_grad():
        expected = torch.stack(reference(ids, output_attentions=True).attentions)[:, 0]  # [L, H, T, T]
    ours = torch.from_numpy(run_with_trace(ckpt.model, ids, kinds=("pattern",)).stack("pattern"))
    assert ours.shape == expected.shape
    assert (ours - expected).abs().max().item() <= 1e-5


def test_greedy_generation_matches_transformers(family, tricky_texts):
    _, reference, ckpt = family
    ids = _ids(ckpt, tricky_texts[0], 20)
    reference.generation_config.eos_token_id = None  # 20 tokens whatever comes
    with torch.no_grad():
        expected = reference.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=20, do_sample=False, pad_token_id=0
        )
        ours = generate(ckpt.model, ids, 20, greedy=True)  # KV-cached decoding
    assert ours.shape[1] == ids.shape[1] + 20
    assert ours.tolist() == expected.tolist()


def _their_choices(reference, ids: torch.Tensor) -> dict[int, torch.Tensor]:
    """layer -> the experts transformers' own routers chose for each token [T, k], sorted per token."""
    got: dict[int, torch.Tensor] = {}
    hooks = []
    for i, layer in enumerate(reference.model.layers):
        router = getattr(layer.mlp, "router", None) or getattr(layer.mlp, "gate", None)
        if router is None or not hasattr(router, "top_k"):
            continue  # a dense layer
        hooks.append(router.register_forward_hook(lambda m, a, out, i=i: got.__setitem__(i, out[2])))
    try:
        with torch.no_grad():
            reference(ids)
    finally:
        for h in hooks:
            h.remove()
    return {i: t.sort(dim=-1).values for i, t in got.items()}


@pytest.mark.parametrize("case", MOE)
def test_each_token_goes_to_the_same_experts(today_models, case, tricky_texts):
    _, reference, ckpt = today_models(case)
    cfg = ckpt.config
    for text in tricky_texts[:3]:
        ids = _ids(ckpt, text, 40)
        theirs = _their_choices(reference, ids)
        trace = run_with_trace(ckpt.model, ids, kinds=("chosen",))
        assert trace.layers == sorted(theirs) == [i for i in range(cfg.core.n_layers) if cfg.is_moe_layer(i)]
        for i in trace.layers:
            ours = trace["chosen", i][0].sort(dim=-1).values  # [T, k]
            assert torch.equal(ours, theirs[i]), (text, i)
        chosen = torch.cat([trace["chosen", i].reshape(-1) for i in trace.layers])
        assert len(set(chosen.tolist())) > 1  # the router really routes


def test_each_family_sets_its_own_parts(today_models):
    cfgs = {case: today_models(case)[2].config for case in CASES}
    mixtral = cfgs["mixtral-window-sharded"]
    assert (
        mixtral.feed_forward.n_experts,
        mixtral.feed_forward.router,
        mixtral.attention.sliding_window,
        mixtral.positional.rope_base,
    ) == (
        4,
        "softmax_topk_norm",
        12,
        1e6,  # transformers' Mixtral default, the file saying nothing else
    )
    qwen = cfgs["qwen3_moe-dense-first"]
    assert (
        qwen.feed_forward.moe_dense_layers,
        qwen.expert_hidden,
        qwen.hidden,
        qwen.feed_forward.router,
        qwen.attention.qk_rmsnorm,
    ) == (
        1,
        16,
        48,
        "softmax_topk_norm",
        True,
    )
    ds = cfgs["deepseek_v3-mla-grouped-yarn-bf16"]
    assert ds.mla and (ds.attention.kv_lora_rank, ds.attention.q_lora_rank, ds.qk_dim, ds.v_dim) == (
        12,
        20,
        16,
        6,
    )
    assert (
        ds.feed_forward.router,
        ds.feed_forward.router_choice_bias,
        ds.feed_forward.router_groups,
        ds.feed_forward.router_topk_groups,
        ds.feed_forward.router_scale,
    ) == (
        "sigmoid_topk_norm",
        True,
        4,
        2,
        2.5,
    )
    assert (
        ds.feed_forward.moe_dense_layers,
        ds.feed_forward.n_shared_experts,
        ds.positional.rope_scaling,
    ) == (1, 1, "yarn")
    assert (
        ds.attention.attn_scale_dim is not None and ds.attention.attn_scale_dim < ds.qk_dim
    )  # mscale² > 1 on the scores
    oss = cfgs["gpt_oss-sinks-yarn"]
    assert (
        oss.attention.attn_sinks
        and oss.core.bias == "all"
        and oss.feed_forward.swiglu_limit == 2.0
        and oss.feed_forward.router == "topk_softmax"
    )
    assert (oss.attention.window_pattern, oss.positional.rope_truncate, oss.rope_attention) == (
        "LG",
        False,
        pytest.approx(1.20794, 1e-4),
    )
    g2 = cfgs["gemma2-softcaps-sharded"]
    assert (
        g2.normalization.norm_position,
        g2.attention.attn_softcap,
        g2.core.final_softcap,
        g2.attention.attn_scale_dim,
        g2.attention.window_pattern,
    ) == (
        "sandwich",
        3.0,
        5.0,
        24.0,
        "LG",
    )
    g3 = cfgs["gemma3_text-local-rope"]
    assert (
        g3.attention.window_pattern,
        g3.positional.rope_local_base,
        g3.positional.rope_base,
        g3.positional.rope_scaling,
    ) == (
        "LLLG",
        1000.0,
        100000.0,
        "linear",
    )
    assert g3.attention.qk_rmsnorm and g3.normalization.norm_offset and g3.attention.attn_softcap is None
    olmo = cfgs["olmo2-qk-norm-all"]
    assert (olmo.normalization.norm_position, olmo.attention.qk_norm_scope) == ("output", "all")
    phi = cfgs["phi3-fused-window-bf16"]
    assert (phi.attention.sliding_window, phi.rotary_dim, phi.kv_heads) == (10, 4, 2)


def test_sharded_and_bf16_files_are_what_the_cases_say(today_models):
    for case in ("mixtral-window-sharded", "gemma2-softcaps-sharded"):
        directory = today_models(case)[0]
        assert (directory / "model.safetensors.index.json").is_file()
        assert len(list(directory.glob("model-*.safetensors"))) > 1
    for case in ("deepseek_v3-mla-grouped-yarn-bf16", "phi3-fused-window-bf16"):
        directory, _, ckpt = today_models(case)
        header = (directory / "model.safetensors").read_bytes()
        size = int.from_bytes(header[:8], "little")
        dtypes = {v["dtype"] for k, v in json.loads(header[8 : 8 + size]).items() if k != "__metadata__"}
        assert dtypes == {"BF16"}
        assert all(p.dtype == torch.float32 for p in ckpt.model.parameters())  # upcast by default


@pytest.mark.parametrize(
    "case, unlike",
    [
        ("gemma2-softcaps-sharded", dict(sliding_window=None, window_pattern="")),
        ("gemma3_text-local-rope", dict(sliding_window=None, window_pattern="", rope_local_base=None)),
        ("gemma3_text-local-rope", dict(rope_local_base=None)),  # the local layers' own RoPE base
        ("gpt_oss-sinks-yarn", dict(sliding_window=None, window_pattern="")),
        ("gpt_oss-sinks-yarn", dict(rope_scaling="none")),
        ("gpt_oss-sinks-yarn", dict(swiglu_limit=None)),
        ("deepseek_v3-mla-grouped-yarn-bf16", dict(router_groups=None)),
        ("deepseek_v3-mla-grouped-yarn-bf16", dict(attn_scale_dim=None)),
        ("gemma2-softcaps-sharded", dict(attn_scale_dim=None)),
    ],
)
def test_each_part_acts_on_these_sequences(today_models, case, unlike, tricky_texts):
    """Without the part (the same weights), the logits differ: the tests above do test it."""
    _, _, ckpt = today_models(case)
    ids = _ids(ckpt, tricky_texts[1], 40)
    other = build_from_state_dict(ckpt.config.replace(**unlike).validate(), dict(ckpt.model.state_dict()))
    with torch.no_grad():
        assert (other(ids)[0] - ckpt.model(ids)[0]).abs().max() > 1e-3


def test_yarn_frequencies_are_transformers_own():
    from transformers import AutoConfig
    from transformers.modeling_rope_utils import _compute_yarn_parameters

    from model.nn.layers import rope_frequencies

    for params, extra in (
        (_YARN_GPT_OSS, dict(head_dim=64)),
        (_YARN_DEEPSEEK, dict(qk_rope_head_dim=64)),
        ({**_YARN_GPT_OSS, "truncate": True, "beta_fast": 16.0, "factor": 40.0}, dict(head_dim=32)),
    ):
        model_type = "deepseek_v3" if "qk_rope_head_dim" in extra else "gpt_oss"
        hf = dict(
            model_type=model_type,
            vocab_size=10,
            hidden_size=64,
            num_hidden_layers=4,
            num_attention_heads=2,
            num_key_value_heads=2,
            intermediate_size=8,
            max_position_embeddings=4096,
            rope_parameters=dict(params),
            **extra,
        )
        theirs_cfg = AutoConfig.for_model(
            **{k: v for k, v in hf.items() if k != "model_type"}, model_type=model_type
        )
        inv_freq, attention = _compute_yarn_parameters(theirs_cfg)
        ours = family_config(hf)
        assert torch.equal(rope_frequencies(ours), inv_freq)
        assert ours.rope_attention == attention


def test_real_world_config_forms():
    """config.json as the Hub's repos write them (older transformers: rope_theta + rope_scaling)."""
    gpt_oss_20b = dict(
        model_type="gpt_oss",
        vocab_size=201088,
        hidden_size=2880,
        num_hidden_layers=24,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        intermediate_size=2880,
        num_local_experts=32,
        num_experts_per_tok=4,
        sliding_window=128,
        max_position_embeddings=131072,
        rope_theta=150000,
        rope_scaling={
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "rope_type": "yarn",
            "truncate": False,
        },
        layer_types=["sliding_attention", "full_attention"] * 12,
        attention_bias=True,
        swiglu_limit=7.0,
    )
    cfg = family_config(gpt_oss_20b)
    assert (
        cfg.feed_forward.n_experts,
        cfg.attention.window_pattern,
        cfg.positional.rope_scaling,
        cfg.d_head,
        cfg.positional.rope_original_context,
    ) == (
        32,
        "LG",
        "yarn",
        64,
        4096,
    )
    quantized = {**gpt_oss_20b, "quantization_config": {"quant_method": "mxfp4"}}
    with pytest.raises(CheckpointError, match="quantization_config 'mxfp4'"):
        family_config(quantized)
    gemma3_270m = dict(
        model_type="gemma3_text",
        vocab_size=262144,
        hidden_size=640,
        num_hidden_layers=18,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=256,
        intermediate_size=2048,
        max_position_embeddings=32768,
        query_pre_attn_scalar=256,
        sliding_window=512,
        rope_theta=1000000.0,
        rope_local_base_freq=10000.0,
        rope_scaling=None,
        _sliding_window_pattern=6,
    )
    cfg = family_config(gemma3_270m)
    assert (
        cfg.attention.window_pattern,
        cfg.positional.rope_local_base,
        cfg.positional.rope_base,
        cfg.attention.attn_scale_dim,
        cfg.core.tie_embeddings,
    ) == (
        "LLLLLG",
        10000.0,
        1e6,
        None,  # 256 = head_dim: the plain 1/√d_k
        True,
    )
    deepseek = dict(
        model_type="deepseek_v3",
        vocab_size=129280,
        hidden_size=7168,
        num_hidden_layers=61,
        num_attention_heads=128,
        num_key_value_heads=128,
        intermediate_size=18432,
        max_position_embeddings=163840,
        rope_theta=10000,
        rope_scaling={
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
            "type": "yarn",
        },
    )
    cfg = family_config(deepseek)
    assert (
        cfg.feed_forward.n_experts,
        cfg.feed_forward.router_groups,
        cfg.feed_forward.router_topk_groups,
        cfg.feed_forward.moe_dense_layers,
    ) == (256, 8, 4, 3)
    m = 0.1 * 1.0 * torch.log(torch.tensor(40.0)).item() + 1.0
    assert cfg.attention.attn_scale_dim == pytest.approx(192 / m**4) and cfg.rope_attention == 1.0
    assert parameters(cfg).total == 671_026_419_200  # 671B, as DeepSeek counts it (with the choice biases)


@pytest.mark.parametrize(
    "case, changes, message",
    [
        (
            "phi3-fused-window-bf16",
            {"rope_parameters": {"rope_type": "longrope"}},
            "'longrope' is not implemented",
        ),
        ("qwen3_moe-dense-first", {"mlp_only_layers": [1]}, r"dense MLPs on layers \[1\]"),
        ("qwen3_moe-dense-first", {"decoder_sparse_step": 2, "mlp_only_layers": [1]}, r"layers \[0, 1\]"),
        ("gemma3_text-local-rope", {"use_bidirectional_attention": True}, "use_bidirectional_attention"),
        (
            "gemma3_text-local-rope",
            {"rope_parameters": {"sliding_attention": {"rope_type": "linear", "factor": 2.0}}},
            "RoPE scaling of the local layers",
        ),
        ("deepseek_v3-mla-grouped-yarn-bf16", {"norm_topk_prob": False}, "norm_topk_prob=false"),
        ("gpt_oss-sinks-yarn", {"swiglu_alpha": 1.5}, "swiglu_alpha=1.5"),
        ("gpt_oss-sinks-yarn", {"layer_types": ["chunked_attention", "full_attention"]}, "chunked_attention"),
        ("olmo2-qk-norm-all", {"attention_bias": True}, "attention_bias=True with mlp_bias=False"),
        ("mixtral-window-sharded", {"final_logit_softcapping": 30.0}, "soft-capping"),
    ],
)
def test_what_is_not_implemented_is_refused_in_one_line(today_models, tmp_path, case, changes, message):
    directory = today_models(case)[0]
    edited = tmp_path / "edited"
    shutil.copytree(directory, edited)
    cfg = json.loads((edited / "config.json").read_text())
    cfg.update(changes)
    (edited / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=message) as err:
        open_model(edited)
    assert "\n" not in str(err.value)


_DEEPSEEK = "deepseek_v3-mla-grouped-yarn-bf16"
_TOO_MANY = r"means [\d,]+ parameters but model[.\w-]* holds [\d,]+ values: the config does not describe"


@pytest.mark.parametrize(
    "case, changes, message",
    [
        (
            "mixtral-window-sharded",
            {"num_local_experts": 10**9},
            "num_local_experts=1000000000 must be a whole",
        ),
        ("qwen3_moe-dense-first", {"num_experts": 10**9}, "num_experts=1000000000 must be a whole number"),
        (_DEEPSEEK, {"n_routed_experts": 10**9}, "n_routed_experts=1000000000 must be a whole number from 1"),
        (
            _DEEPSEEK,
            {"kv_lora_rank": 10**9},
            "kv_lora_rank=1000000000 must be a whole number from 1 to 1,000,000",
        ),
        ("mixtral-window-sharded", {"num_local_experts": 50_000}, "num_local_experts=50000.*" + _TOO_MANY),
        (_DEEPSEEK, {"kv_lora_rank": 500_000}, "kv_lora_rank=500000.*" + _TOO_MANY),
    ],
    ids=[
        "1e9 experts",
        "1e9 experts qwen3_moe",
        "1e9 experts deepseek",
        "latent rank 1e9",
        "5e4 experts",
        "rank 5e5",
    ],
)
def test_a_config_is_sized_before_its_experts_and_latent_rows_are_laid_out(
    today_models, tmp_path, case, changes, message
):
    """10⁹ experts were laid out as three rows each before any check (over 90 s and 2.6 GB, then
    refused by nothing), a latent rank of 10⁹ as a row order of 10⁹ entries (stopped by the system's
    memory cap): a count past its bound is one line at once, and one within it that means far more
    parameters than the file holds is refused by the arithmetic before any row is listed."""
    edited = tmp_path / "edited"
    shutil.copytree(today_models(case)[0], edited)
    cfg = json.loads((edited / "config.json").read_text())
    (edited / "config.json").write_text(json.dumps({**cfg, **changes}))
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(CheckpointError, match=message) as err:
            open_model(edited)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 1.0 and peak < 4 * 2**20, (time.perf_counter() - t0, peak)
    assert "\n" not in str(err.value)


def test_deepseeks_prediction_layers_past_the_last_are_ignored(today_models, tmp_path, tricky_texts):
    """DeepSeek-V3's files carry a multi-token-prediction layer (model.layers.N for N = num_hidden_layers);
    transformers ignores it, and so do we."""
    from safetensors.torch import load_file, save_file

    directory, reference, _ = today_models("deepseek_v3-mla-grouped-yarn-bf16")
    edited = tmp_path / "mtp"
    shutil.copytree(directory, edited)
    tensors = load_file(str(edited / "model.safetensors"))
    tensors["model.layers.3.eh_proj.weight"] = torch.zeros(32, 64, dtype=torch.bfloat16)
    save_file(tensors, str(edited / "model.safetensors"), metadata={"format": "pt"})
    ids = _ids(open_model(edited), tricky_texts[2], 30)
    with torch.no_grad():
        assert (open_model(edited).model(ids)[0] - reference(ids).logits).abs().max() <= 1e-4


def test_the_instruments_work_on_every_family(family, tricky_texts):
    """What the Attention tab runs, on each opened family: the inspection and its metrics (a local
    layer under its window, sinks' share), the expert choice of a mixture, patching of every head and
    logit attribution whose parts add up to the logit (through sandwich/output norms and a final cap)."""
    import numpy as np

    from model.interp.analysis.attribution import direct_logit_attribution
    from model.interp.analysis.patching import patch_heads
    from model.interp.inspection import inspect_prompt
    from model.interp.measures import expert_choice_of, head_metrics_of
    from model.interp.plan import plan_prompt

    ckpt = family[2]
    model, cfg = ckpt.model, ckpt.model.config
    text = tricky_texts[0]
    insp = inspect_prompt(model, ckpt.tokenizer, plan_prompt(cfg, ckpt.tokenizer, text))
    T = len(insp.ids)
    assert (
        insp.weights.shape == (cfg.core.n_layers, cfg.attention.n_heads, T, T)
        and np.isfinite(insp.weights).all()
    )
    metrics = head_metrics_of(model, insp.weights, insp.mask).metrics
    assert np.isfinite(metrics.entropy).all()
    if cfg.attention.window_pattern:  # a local layer's rows see at most the window
        local = cfg.attention.window_pattern.index("L")
        assert (insp.weights[local, :, -1, : T - cfg.attention.sliding_window] == 0).all()
    if cfg.attention.attn_sinks:
        rows = insp.weights.sum(-1)  # the sink takes what no key gets: rows sum to less than 1
        assert rows.max() <= 1 + 1e-5 and rows.min() < 0.99 and (metrics.learned_sink > 0).all()
    if cfg.feed_forward.n_experts:
        choice = expert_choice_of(model, insp.ids)
        assert choice.chosen.shape == (len(choice.moe_layers), T, cfg.feed_forward.n_experts_per_token)
    ids = insp.ids[:12]
    corrupt = ids[:-3] + ids[-2:-1] + ids[-3:-2] + ids[-1:]  # two tokens swapped
    patched = patch_heads(model, ids, corrupt, answer=ids[-1], wrong=corrupt[-2])
    assert (
        patched.patched.shape == (cfg.core.n_layers, cfg.attention.n_heads)
        and np.isfinite(patched.patched).all()
    )
    a = direct_logit_attribution(model, ids)
    assert a.total == pytest.approx(a.logit, abs=1e-4 * max(1.0, abs(a.logit)))
    assert (a.capped is not None) == (cfg.core.final_softcap is not None)
