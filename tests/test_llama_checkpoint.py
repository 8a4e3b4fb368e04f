"""Local Hugging Face checkpoints (workloads/llama/checkpoint.py): a tiny random LlamaForCausalLM written
as config.json + safetensors (one file or shards) is read by both frameworks, which give the same logits,
and, where transformers is installed, the logits of transformers' LlamaForCausalLM on the same files:
grouped-query and full multi-head attention, tied and untied embeddings, Llama 3 RoPE scaling. Every
bad directory is refused with one line before any weight is read."""

from __future__ import annotations

import json

import numpy as np
import pytest
from quick_compile import quick_xla_in_process  # noqa: F401  (the fixture, used by name)

from xpubench.errors import UserError
from xpubench.workloads.llama import checkpoint as ck
from xpubench.workloads.llama.config import LlamaConfig, RopeScaling
from xpubench.workloads.llama.hf_tensors import hf_tensor_shapes

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
pytest.importorskip("safetensors")
pytestmark = pytest.mark.usefixtures("quick_xla_in_process")   # what is computed, not how fast

from xpubench.workloads.llama import flax_model, flax_params
from xpubench.workloads.llama.torch_model import build

# original_max_position_embeddings 32 puts the llama3 scaling's three bands inside a head of 16
CONFIGS = {
    "gqa-tied": LlamaConfig("gqa-tied", n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, head_dim=16,
                            intermediate_size=96, vocab_size=128, tie_embeddings=True, max_positions=128),
    "mha-untied-llama3": LlamaConfig("mha-untied-llama3", n_layers=2, hidden_size=48, n_heads=3, n_kv_heads=3,
                                     head_dim=16, intermediate_size=80, vocab_size=96, rope_theta=500_000.0,
                                     rope_scaling=RopeScaling(8.0, 1.0, 4.0, 32), rms_norm_eps=1e-6,
                                     tie_embeddings=False, max_positions=128),
}
STD = 0.2        # weights large enough that every layer changes the logits
TOL = 2e-4       # fp32: observed differences are ~2e-5 on logits of magnitude ~7


def tokens(cfg: LlamaConfig, batch: int = 2, length: int = 40) -> np.ndarray:
    return np.random.default_rng(3).integers(0, cfg.vocab_size, (batch, length))


def torch_logits(ckpt, idx) -> np.ndarray:
    model = build(ckpt.config, "fp32", checkpoint=ckpt)
    with torch.inference_mode():
        return model(torch.from_numpy(idx)).numpy()


def jax_logits(ckpt, idx) -> np.ndarray:
    """One jitted forward (as the workload runs it), not op by op (every primitive compiled on its own)."""
    model = flax_model.LlamaFlax(ckpt.config, "fp32")
    params = flax_params.load_checkpoint(model, ckpt)
    with jax.default_matmul_precision("highest"):
        return np.asarray(jax.jit(model.apply)({"params": params}, idx.astype(np.int32)))


@pytest.fixture(scope="module", params=list(CONFIGS))
def written(request, tmp_path_factory):
    """A checkpoint of each config, written once per module, and both frameworks' logits of tokens(cfg) read
    from it (what the two tests below compare, with each other and with transformers'): computed once."""
    cfg = CONFIGS[request.param]
    shards = 2 if cfg.tie_embeddings else 1
    path = ck.write_checkpoint(tmp_path_factory.mktemp("ckpt") / cfg.name, cfg, ck.random_hf_tensors(cfg, 0, STD),
                               shards=shards)
    ckpt = ck.open_checkpoint(path)
    idx = tokens(cfg)
    return cfg, path, ckpt, torch_logits(ckpt, idx), jax_logits(ckpt, idx)


@pytest.mark.slow
def test_both_frameworks_give_the_same_logits(written):
    cfg, _path, ckpt, a, b = written
    assert ckpt.config.__dict__ | {"name": ""} == cfg.__dict__ | {"name": ""}
    assert a.shape == (2, 40, cfg.vocab_size)
    assert np.abs(a).max() > 1.0
    np.testing.assert_allclose(a, b, atol=TOL, rtol=0)


@pytest.mark.slow
def test_logits_equal_transformers_llama_for_causal_lm(written):
    transformers = pytest.importorskip("transformers")
    cfg, path, _ckpt, torch_got, jax_got = written
    hf = transformers.LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    with torch.inference_mode():
        want = hf(torch.from_numpy(tokens(cfg))).logits.numpy()
    assert hf.num_parameters() == build(cfg, "fp32").n_params()
    np.testing.assert_allclose(torch_got, want, atol=TOL, rtol=0)
    np.testing.assert_allclose(jax_got, want, atol=TOL, rtol=0)


@pytest.mark.slow   # ~5 s: both frameworks' first compiles
def test_bf16_checkpoint_is_read_by_both(tmp_path):
    from safetensors.torch import save_file

    cfg = CONFIGS["gqa-tied"]
    path = ck.write_checkpoint(tmp_path, cfg, ck.random_hf_tensors(cfg, 0, STD))
    tensors = {n: torch.from_numpy(t).bfloat16() for n, t in ck.random_hf_tensors(cfg, 0, STD).items()}
    save_file(tensors, str(path / "model.safetensors"))
    ckpt = ck.open_checkpoint(path)
    assert ckpt.dtypes == ("BF16",)
    idx = tokens(cfg)
    np.testing.assert_allclose(torch_logits(ckpt, idx), jax_logits(ckpt, idx), atol=TOL, rtol=0)


@pytest.mark.slow
def test_parameter_counts_are_equal_across_frameworks():
    for cfg in CONFIGS.values():   # the params' shapes and dtypes, traced (n_params reads only those), not drawn
        params = jax.eval_shape(lambda cfg=cfg: flax_params.init_random(flax_model.LlamaFlax(cfg, "fp32")))
        assert flax_params.n_params(params) == build(cfg, "fp32").n_params() == \
            sum(int(np.prod(s)) for s in hf_tensor_shapes(cfg).values())


# ---- bad directories ------------------------------------------------------------------------------

def good(tmp_path, shards: int = 1):
    cfg = CONFIGS["gqa-tied"]
    return cfg, ck.write_checkpoint(tmp_path / "ckpt", cfg, ck.random_hf_tensors(cfg), shards=shards)


def refused(path) -> str:
    with pytest.raises(UserError) as err:
        ck.open_checkpoint(path)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_not_a_directory(tmp_path):
    assert "not a directory" in refused(tmp_path / "nowhere")


def test_missing_and_invalid_config_json(tmp_path):
    _, path = good(tmp_path)
    (path / "config.json").write_text("{not json")
    assert "config.json: not JSON" in refused(path)
    (path / "config.json").unlink()
    assert "no config.json" in refused(path)


def test_unsupported_architecture_names_the_directory(tmp_path):
    _, path = good(tmp_path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "architectures": ["Qwen2ForCausalLM"]}))
    msg = refused(path)
    assert str(path) in msg and "Qwen2ForCausalLM is not supported" in msg


def test_no_safetensors_files(tmp_path):
    _, path = good(tmp_path)
    (path / "model.safetensors").unlink()
    (path / "pytorch_model.bin").write_bytes(b"x")
    assert "no *.safetensors files (pytorch_model.bin is not read" in refused(path)


def test_corrupt_and_truncated_files(tmp_path):
    _, path = good(tmp_path)
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[:-100])
    assert "model.safetensors is not a readable safetensors file" in refused(path)
    (path / "model.safetensors").write_bytes(b"garbage")
    assert "model.safetensors is not a readable safetensors file" in refused(path)


def test_missing_tensor_wrong_shape_extra_tensor_and_int_dtype(tmp_path):
    from safetensors.numpy import save_file

    cfg, path = good(tmp_path)
    tensors = ck.random_hf_tensors(cfg)
    save_file({n: t for n, t in tensors.items() if n != "model.layers.1.mlp.up_proj.weight"},
              str(path / "model.safetensors"))
    assert "lacks model.layers.1.mlp.up_proj.weight" in refused(path)
    save_file({**tensors, "model.norm.weight": np.ones(63, np.float32)}, str(path / "model.safetensors"))
    assert "model.norm.weight in model.safetensors has shape [63], config.json implies [64]" in refused(path)
    save_file({**tensors, "model.layers.0.self_attn.q_proj.lora_A": np.ones(2, np.float32)},
              str(path / "model.safetensors"))
    assert "model.layers.0.self_attn.q_proj.lora_A is not a weight of LlamaForCausalLM" in refused(path)
    save_file({**tensors, "model.norm.weight": np.ones(64, np.int32)}, str(path / "model.safetensors"))
    assert "model.norm.weight is I32" in refused(path)


def test_tied_checkpoint_may_carry_lm_head_and_old_rotary_buffers(tmp_path):
    from safetensors.numpy import save_file

    cfg, path = good(tmp_path)
    tensors = ck.random_hf_tensors(cfg)
    save_file({**tensors, "lm_head.weight": tensors["model.embed_tokens.weight"],
               "model.layers.0.self_attn.rotary_emb.inv_freq": np.ones(8, np.float32)},
              str(path / "model.safetensors"))
    assert "lm_head.weight" not in ck.open_checkpoint(path).files


def test_sharded_index_problems(tmp_path):
    _, path = good(tmp_path, shards=2)
    index = json.loads((path / ck.INDEX).read_text())
    (path / "model-00002-of-00002.safetensors").rename(path / "elsewhere.safetensors")
    assert "lists model-00002-of-00002.safetensors, which is not in the directory" in refused(path)
    (path / "elsewhere.safetensors").rename(path / "model-00002-of-00002.safetensors")
    name = next(n for n, f in index["weight_map"].items() if f.startswith("model-00001"))
    index["weight_map"][name] = "model-00002-of-00002.safetensors"
    (path / ck.INDEX).write_text(json.dumps(index))
    assert f"puts {name} in model-00002-of-00002.safetensors, but it is in model-00001" in refused(path)
