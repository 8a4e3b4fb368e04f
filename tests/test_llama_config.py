"""The Llama architecture as data (workloads/llama/config.py, costs.py): the presets' parameter counts
equal the published ones, config.json is read or refused with one line, and the FLOPs, bytes and
memory figures equal hand computations from the published shapes. Nothing here allocates a model."""

from __future__ import annotations

import dataclasses

import pytest

from xpubench.errors import UserError
from xpubench.workloads.llama import costs
from xpubench.workloads.llama.config import (
    PRESETS,
    RopeScaling,
    from_hf_config,
    preset,
    rope_inv_freq,
    to_hf_config,
)

# Published sizes: the model cards' "134.5M" (SmolLM-135M), transformers' num_parameters() of
# Llama-3.2-1B (1,235,814,400) and Llama-3.1-8B (8,030,261,248)
PUBLISHED = {"smollm-135m": 134_515_008, "llama-1b": 1_235_814_400, "llama-8b": 8_030_261_248}

LLAMA_31_8B_JSON = {  # meta-llama/Llama-3.1-8B config.json (transformers 4 layout)
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": False,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256}


@pytest.mark.parametrize("name", PUBLISHED)
def test_preset_parameter_counts_equal_the_published_ones(name):
    assert costs.param_count(PRESETS[name]) == PUBLISHED[name]


def test_smollm_rounds_to_its_name():
    assert round(costs.param_count(PRESETS["smollm-135m"]) / 1e6, 1) == 134.5


def test_the_real_config_json_gives_the_preset():
    assert from_hf_config(LLAMA_31_8B_JSON, name="llama-8b") == PRESETS["llama-8b"]


def test_transformers5_rope_parameters_layout_is_read():
    cfg = {k: v for k, v in LLAMA_31_8B_JSON.items() if k not in ("rope_theta", "rope_scaling")}
    cfg["rope_parameters"] = {**LLAMA_31_8B_JSON["rope_scaling"], "rope_theta": 500000.0}
    assert from_hf_config(cfg, name="llama-8b") == PRESETS["llama-8b"]


def test_config_round_trips_through_config_json():
    for cfg in PRESETS.values():
        assert from_hf_config(to_hf_config(cfg), name=cfg.name) == cfg


def test_defaults_as_transformers_llama_config():
    cfg = from_hf_config({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
                          "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100})
    assert (cfg.n_kv_heads, cfg.head_dim, cfg.rms_norm_eps, cfg.rope_theta, cfg.tie_embeddings,
            cfg.rope_scaling, cfg.max_positions) == (4, 16, 1e-6, 10000.0, False, None, 2048)


@pytest.mark.parametrize("change, message", [
    ({"architectures": ["MistralForCausalLM"]}, "architecture MistralForCausalLM is not supported"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu' is not supported"),
    ({"attention_bias": True}, "attention_bias true is not supported"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "RoPE type 'yarn' is not supported"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "lacks low_freq_factor, high_freq_factor"),
    ({"num_key_value_heads": 5}, "n_heads (32) must be a multiple of n_kv_heads (5)"),
    ({"hidden_size": "4096"}, "hidden_size must be a whole number of at least 1"),
    ({"quantization_config": {"quant_method": "gptq"}}, "quantized checkpoints (gptq) are not supported"),
])
def test_unsupported_config_is_one_clear_line(change, message):
    with pytest.raises(UserError) as err:
        from_hf_config({**LLAMA_31_8B_JSON, **change})
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith("config.json: ")


def test_missing_required_field_is_named():
    cfg = dict(LLAMA_31_8B_JSON)
    del cfg["vocab_size"]
    with pytest.raises(UserError, match="lacks vocab_size"):
        from_hf_config(cfg)


def test_unknown_preset_lists_the_presets():
    with pytest.raises(UserError, match="smollm-135m, llama-1b, llama-8b"):
        preset("llama-70b")


def test_llama3_rope_scaling_keeps_high_and_stretches_low_frequencies():
    base = rope_inv_freq(dataclasses.replace(PRESETS["llama-8b"], rope_scaling=None))
    scaled = rope_inv_freq(PRESETS["llama-8b"])
    assert scaled[0] == base[0]                        # wavelength 2*pi < 8192/4: kept
    assert scaled[-1] == pytest.approx(base[-1] / 8)   # wavelength > 8192: divided by the factor
    assert all(b / 8 <= s <= b for s, b in zip(scaled, base))


# ---- FLOPs, bytes, memory against hand computation ------------------------------------------------

L8, C8, I8, V8, KV8 = 32, 4096, 14336, 128256, 8 * 128     # Llama 3.1 8B: layers, width, MLP, vocab, KV width


def test_llama_8b_bf16_memory_by_hand():
    need = costs.memory_needed(PRESETS["llama-8b"], "bf16", batch=1, prompt_len=512, new_tokens=128)
    assert need.weights == 8_030_261_248 * 2
    assert need.kv_cache == 639 * (2 * L8 * KV8 * 2)                    # 639 positions x 128 KiB
    assert need.activations == 512 * (3 * C8 + 2 * (32 + 8) * 128 + 3 * I8) * 2
    assert need.logits == V8 * 4
    assert need.total == 16_060_522_496 + 83_755_008 + 67_108_864 + 513_024
    assert need.explain() == ("llama-8b bf16 needs 16.2 GB: weights 16.1 GB + KV cache 84 MB + activations 67 MB"
                              " + logits 513 kB (batch 1, prompt 512, 128 new tokens)")


def test_llama_8b_fp32_does_not_fit_24_gib():
    need = costs.memory_needed(PRESETS["llama-8b"], "fp32", batch=1, prompt_len=512, new_tokens=128)
    assert need.total == 32_121_044_992 + 167_510_016 + 134_217_728 + 513_024
    assert need.total > 24 * 2**30
    assert need.explain().startswith("llama-8b fp32 needs 32.4 GB: weights 32.1 GB + KV cache 168 MB")


def test_int8_weights_are_one_byte_plus_a_scale_per_output_channel():
    cfg = PRESETS["llama-8b"]
    channels = L8 * (4096 + 2 * KV8 + 2 * C8 + 2 * I8) + 2 * V8     # q, k, v, o, gate, up, down; 2 tables
    norms = (2 * L8 + 1) * C8
    assert costs.weight_bytes(cfg, "int8") == (8_030_261_248 - norms) + channels * 2 + norms * 2
    assert costs.weight_bytes(cfg, "int8", int8_compute="fp32") == (8_030_261_248 - norms) + (channels + norms) * 4


def test_decode_bytes_read_per_token():
    cfg = PRESETS["llama-8b"]
    weights_read = 16_060_522_496 - V8 * C8 * 2 + C8 * 2            # the untied input table: one row looked up
    assert costs.decode_bytes_per_token(cfg, "bf16", 1, 1000) == weights_read + 1000 * 2 * L8 * KV8 * 2
    # batch 4: the weights are shared by the 4 tokens of a step, each sequence reads its own cache
    per_token = (16_060_522_496 - V8 * C8 * 2 + 4 * C8 * 2) / 4 + 1000 * 2 * L8 * KV8 * 2
    assert costs.decode_bytes_per_token(cfg, "bf16", 4, 1000) == per_token
    tied = PRESETS["smollm-135m"]                                     # tied: the table is read whole, as the head
    assert costs.decode_bytes_per_token(tied, "fp32", 1, 0) == 134_515_008 * 4


def test_flops_by_hand():
    cfg = PRESETS["smollm-135m"]
    per_layer = 576 * 576 + 2 * 576 * 192 + 576 * 576 + 3 * 576 * 1536
    n_mm = 30 * per_layer + 49152 * 576
    assert costs.decode_flops_per_token(cfg, 100) == 2 * n_mm + 4 * 30 * 576 * 100
    t = 512
    causal = 4 * 30 * 576 * t * (t + 1) / 2                         # token i attends to i + 1 positions
    assert costs.prefill_flops(cfg, t) == 2 * 30 * per_layer * t + causal + 2 * 49152 * 576
    assert costs.prefill_flops(cfg, t, batch=2, all_logits=True) == 2 * (2 * n_mm * t + causal)


def test_scaling_dataclass_is_what_the_preset_holds():
    assert PRESETS["llama-1b"].rope_scaling == RopeScaling(32.0, 1.0, 4.0, 8192)
