"""A Hugging Face Llama checkpoint folder as a GGUF file for llama.cpp, written with gguf-py (the ``gguf``
package), as llama.cpp's own ``convert_hf_to_gguf.py`` writes it from the folder's config.json and tensors.

What goes in: the folder the workload hands over (its ``checkpoint`` hook, workloads/base.py ``Weights``):
a ``--weights`` checkpoint, or the random weights the torch and JAX cases draw from the case's seed,
written once as a folder — read with safetensors, under llama.cpp's "llama" architecture names:

- the q and k projections permuted from transformers' "rotate_half" RoPE layout to llama.cpp's
  interleaved one (``LlamaModel.permute``), so a checkpoint computes the same function;
- Llama 3's RoPE scaling as a ``rope_freqs.weight`` tensor of per-frequency factors;
- no ``output.weight`` for a tied model (llama.cpp then uses ``token_embd.weight`` as the head);
- 1-D tensors (the RMSNorm weights) in F32 whatever the format, as the converter keeps them;
- tokenizer model ``no_vocab`` with ``llama.vocab_size``: llama.cpp then makes that many dummy tokens,
  which is all llama-bench needs (it feeds random token ids); text cannot be tokenised with such a file.

Formats (``GGUF_TYPES``): fp32, bf16, fp16 are written directly; int8 (q8_0: blocks of 32 weights with
one fp16 scale), int4 (q4_0: the same blocks of 4-bit weights) and q4_K_M are made from the F32 file by
the built ``llama-quantize``, as llama.cpp users make them (it keeps its own choices, e.g. a q6_K head in
q4 files). Files are cached under ``<cache>/gguf/`` by the weights' digest (``Weights.digest``), the
writer's version and the format.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from xpubench.envnames import cache_folder
from xpubench.errors import UserError
from xpubench.workloads.base import Weights

# xpubench weight format -> (GGUF file type name as llama-quantize spells it, written by gguf-py directly)
GGUF_TYPES = {"fp32": ("F32", True), "bf16": ("BF16", True), "fp16": ("F16", True),
              "int8": ("Q8_0", False), "int4": ("Q4_0", False), "q4_K_M": ("Q4_K_M", False)}
# a served GGUF's --format: llama.cpp's own names and xpubench's precision names -> the key of GGUF_TYPES
FORMATS = {"f32": "fp32", "fp32": "fp32", "bf16": "bf16", "f16": "fp16", "fp16": "fp16", "q8_0": "int8",
           "int8": "int8", "q4_0": "int4", "int4": "int4", "q4_k_m": "q4_K_M"}
FORMAT_NOTES = {
    "int8": "llama.cpp q8_0: blocks of 32 weights with one fp16 scale (8.5 bits per weight), made by "
            "llama-quantize; activations quantised to q8 for the dot products",
    "int4": "llama.cpp q4_0: blocks of 32 4-bit weights with one fp16 scale (4.5 bits per weight), made by "
            "llama-quantize (which keeps some tensors, e.g. the head, in q6_K)",
    "q4_K_M": "llama.cpp q4_K_M: super-blocks of 256 4-bit weights in 8 blocks with 6-bit scales and mins, "
              "some tensors in q6_K (about 4.9 bits per weight), made by llama-quantize",
}
WRITER_VERSION = 2      # bump when what is written changes: old cached files are then not reused
HF_TO_GGUF = {
    "input_layernorm.weight": "attn_norm", "self_attn.q_proj.weight": "attn_q", "self_attn.k_proj.weight": "attn_k",
    "self_attn.v_proj.weight": "attn_v", "self_attn.o_proj.weight": "attn_output",
    "post_attention_layernorm.weight": "ffn_norm", "mlp.gate_proj.weight": "ffn_gate",
    "mlp.up_proj.weight": "ffn_up", "mlp.down_proj.weight": "ffn_down",
}
TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight"}


def gguf_name(hf_name: str) -> str:
    """llama.cpp's tensor name of a transformers Llama tensor name."""
    if hf_name in TOP:
        return TOP[hf_name]
    _, _, rest = hf_name.partition("model.layers.")
    layer, _, tail = rest.partition(".")
    return f"blk.{int(layer)}.{HF_TO_GGUF[tail]}.weight"


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute: rotate_half rows -> interleaved pairs, per head."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def head_dim(config: Mapping[str, Any]) -> int:
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def rope_factors(config: Mapping[str, Any]) -> np.ndarray | None:
    """Llama 3's per-frequency RoPE factors (convert_hf_to_gguf.py's generate_extra_tensors), or None."""
    s = config.get("rope_scaling") or {}
    if s.get("rope_type", s.get("type")) != "llama3":
        return None
    dim, original = head_dim(config), s["original_max_position_embeddings"]
    freqs = 1.0 / (config.get("rope_theta", 10_000.0) ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    low, high = original / s["low_freq_factor"], original / s["high_freq_factor"]
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < high:
            out.append(1.0)
        elif wavelen > low:
            out.append(s["factor"])
        else:
            smooth = (original / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
            out.append(1 / ((1 - smooth) / s["factor"] + smooth))
    return np.asarray(out, dtype=np.float32)


def folder_tensors(folder: Path) -> Iterator[tuple[str, np.ndarray]]:
    """(name, float32 numpy) of every tensor of a checkpoint folder's safetensors files (BF16 ones through
    torch, which numpy cannot hold); old exports' ``rotary_emb.inv_freq`` buffers are left out."""
    from safetensors import safe_open

    for file in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(file), "numpy") as f:
            names = [n for n in f.keys() if not n.endswith("rotary_emb.inv_freq")]  # noqa: SIM118 - not iterable
            bf16 = {n for n in names if f.get_slice(n).get_dtype() == "BF16"}
            for name in names:
                if name not in bf16:
                    yield name, f.get_tensor(name).astype(np.float32)
        if bf16:
            with safe_open(str(file), "pt") as f:
                for name in sorted(bf16):
                    yield name, f.get_tensor(name).float().numpy()


def write_gguf(path: Path, config: Mapping[str, Any], fmt: str, tensors, vocabulary=None, name: str = "") -> Path:
    """Write a llama-architecture GGUF of ``tensors`` ((HF name, float32 array) pairs) of a model whose
    config.json is ``config`` in ``fmt`` (fp32, bf16, fp16) at ``path`` (module docstring for what goes in).
    ``vocabulary(writer)``, where given, writes a tokenizer instead of ``no_vocab`` (a served model must
    tokenise text: serve/model.py)."""
    import gguf

    qtype = {"fp32": gguf.GGMLQuantizationType.F32, "bf16": gguf.GGMLQuantizationType.BF16,
             "fp16": gguf.GGMLQuantizationType.F16}[fmt]
    ftype = {"fp32": gguf.LlamaFileType.ALL_F32, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
             "fp16": gguf.LlamaFileType.MOSTLY_F16}[fmt]
    heads = config["num_attention_heads"]
    kv_heads, dim = config.get("num_key_value_heads") or heads, head_dim(config)
    tied = bool(config.get("tie_word_embeddings"))
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"xpubench {name}".strip())
    w.add_context_length(config.get("max_position_embeddings") or 2048)
    w.add_embedding_length(config["hidden_size"])
    w.add_block_count(config["num_hidden_layers"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(dim)
    w.add_value_length(dim)
    w.add_rope_dimension_count(dim)
    w.add_rope_freq_base(float(config.get("rope_theta", 10_000.0)))
    w.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
    w.add_vocab_size(config["vocab_size"])
    w.add_file_type(ftype)
    if vocabulary is None:
        w.add_tokenizer_model("no_vocab")
    else:
        vocabulary(w)
    factors = rope_factors(config)
    if factors is not None:
        w.add_tensor("rope_freqs.weight", factors)
    for hf_name, t in tensors:
        if hf_name == "lm_head.weight" and tied:
            continue
        t = np.ascontiguousarray(t, dtype=np.float32)
        if hf_name.endswith("q_proj.weight"):
            t = permute(t, heads)
        elif hf_name.endswith("k_proj.weight"):
            t = permute(t, kv_heads)
        if t.ndim == 1 or qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(gguf_name(hf_name), t)
        else:
            w.add_tensor(gguf_name(hf_name), gguf.quants.quantize(t, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def cache_dir(environ=os.environ) -> Path:
    return cache_folder(environ) / "gguf"


def quantize(quantizer: Path | None, src: Path, dst: Path, gguf_type: str, threads: int) -> None:
    """``llama-quantize src dst TYPE threads``; a RuntimeError of its last lines when it fails."""
    if quantizer is None:
        raise UserError(f"{gguf_type} needs llama.cpp's llama-quantize beside llama-bench, and none was found")
    proc = subprocess.run([str(quantizer), str(src), str(dst), gguf_type, str(threads)], capture_output=True,
                          text=True, timeout=3600, check=False)
    if proc.returncode != 0 or not dst.is_file():
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"llama-quantize {gguf_type} failed (exit {proc.returncode}): {tail}")


def gguf_for(weights: Weights, fmt: str, quantizer: Path | None = None, threads: int = 1,
             environ=os.environ) -> tuple[Path, bool]:
    """(the GGUF of ``weights`` in ``fmt``, whether it was cached), writing it (and the F32 file a quantised
    one is made from) when the cache has none."""
    if fmt not in GGUF_TYPES:
        raise UserError(f"llama.cpp: no GGUF type for {fmt}; choose from: {', '.join(GGUF_TYPES)}")
    gguf_type, direct = GGUF_TYPES[fmt]
    identity = json.dumps({"writer": WRITER_VERSION, "weights": weights.digest}, sort_keys=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    folder = cache_dir(environ)
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"llama-{digest}-{gguf_type.lower()}.gguf"
    if out.is_file():
        return out, True
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        if direct:
            write_gguf(tmp, weights.config, fmt, folder_tensors(weights.folder), name=weights.name)
        else:
            src, _ = gguf_for(weights, "fp32", quantizer, threads, environ)
            quantize(quantizer, src, tmp, gguf_type, threads)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out, False


def tensor_summary(path: Path) -> dict[str, Any]:
    """{"weight_bytes", "params", "types": {GGML type: tensors}} read back from a GGUF (gguf-py's reader, the
    header checked first: a damaged cached file is one line)."""
    from xpubench.backends.llamacpp_ import gguf_header

    reader = gguf_header.read(path, "the cached GGUF")
    types: dict[str, int] = {}
    nbytes = params = 0
    for t in reader.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
        nbytes += int(t.n_bytes)
        if t.name != "rope_freqs.weight":
            params += int(t.n_elements)
    return {"weight_bytes": nbytes, "params": params, "types": types}
