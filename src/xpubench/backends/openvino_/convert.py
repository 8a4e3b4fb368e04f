"""A Hugging Face Llama checkpoint folder made into the OpenVINO model OpenVINO GenAI's ``LLMPipeline`` runs,
offline and with OpenVINO's own tools, cached.

How (what optimum-intel's ``optimum-cli export openvino`` does, which cannot be installed beside
transformers 5: its requirement is transformers < 5.6; docs/engines.md):

1. transformers' ``LlamaForCausalLM`` loads the folder (fp32; bf16 for the bf16 format);
2. ``ov.convert_model`` traces it with a KV cache of past keys and values as inputs and outputs,
   ``beam_idx`` choosing the cache's rows and a boolean causal mask made from ``position_ids`` (shapes
   stay dynamic: nothing of the example's lengths is kept);
3. the past/present pairs become the model's state (``apply_make_stateful_transformation``), each state
   starting as zeros of the batch's size, as GenAI's stateful pipeline expects: inputs ``input_ids``,
   ``attention_mask``, ``position_ids``, ``beam_idx``, output ``logits``;
4. int8 and int4: NNCF's data-free weight compression (``nncf.compress_weights``: INT8_ASYM per output
   channel; INT4_ASYM in groups of the case's int4 group size, the embedding and head kept in INT8_ASYM
   as NNCF does), what optimum-cli's ``--weight-format int8|int4`` runs, of the fp32 model (read from the
   cache, converted first where it has none: steps 1-3 run once per checkpoint for the three formats);
5. ``ov.save_model`` (weights kept as they are: no fp16 compression) into
   ``<cache>/openvino/llama-<key>-<format>/``, the key a digest of the weights' digest, the format, the
   int4 group and the versions of OpenVINO, NNCF, transformers and torch; written in a temporary folder
   and renamed into place whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import warnings
from pathlib import Path

from xpubench.envnames import cache_folder
from xpubench.workloads.base import Weights

CONVERTER_VERSION = 1   # bump when what is converted changes: older folders are then not reused
MODEL = "openvino_model.xml"


def versions() -> dict:
    from importlib.metadata import version

    return {name: version(name) for name in ("openvino", "nncf", "transformers", "torch")}


def folder_for(weights: Weights, fmt: str, environ=os.environ) -> Path:
    """Where the converted model of ``weights`` in ``fmt`` is kept (module docstring, step 5)."""
    key = {"converter": CONVERTER_VERSION, "weights": weights.digest, "format": fmt, "versions": versions(),
           "int4_group": weights.int4_group if fmt == "int4" else None}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_folder(environ) / "openvino" / f"llama-{digest}-{fmt}"


def converted(weights: Weights, fmt: str, environ=os.environ) -> tuple[Path, bool]:
    """(the folder of the OpenVINO model, whether the cache had it), converting it when it had not."""
    folder = folder_for(weights, fmt, environ)
    if (folder / MODEL).is_file():
        return folder, True
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        import openvino as ov

        if fmt in ("int8", "int4"):   # step 4 of the fp32 model
            model = compressed(ov.Core().read_model(str(converted(weights, "fp32", environ)[0] / MODEL)), fmt,
                               weights.int4_group)
        else:
            model = convert(weights, fmt)
        ov.save_model(model, str(tmp / MODEL), compress_to_fp16=False)
        tmp.rename(folder)
    except OSError:
        if not (folder / MODEL).is_file():   # not another process's finished folder: a real failure
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder, False


def convert(weights: Weights, fmt: str):
    """The stateful ``ov.Model`` of ``weights`` in ``fmt``, fp32 or bf16 (module docstring, steps 1-3)."""
    import openvino as ov
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()     # its loading progress bar and notes are not the worker's output
    hf_logging.disable_progress_bar()
    dtype = torch.bfloat16 if fmt == "bf16" else torch.float32
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")     # the tracer's warnings on shapes read as Python numbers
        model = AutoModelForCausalLM.from_pretrained(str(weights.folder), dtype=dtype, attn_implementation="sdpa")
        flat = _Flat(model.eval())
        layers, kv, dim = flat.layers, flat.kv_heads, flat.head_dim
        past = [torch.zeros(1, kv, 3, dim, dtype=dtype) for _ in range(2 * layers)]
        example = (torch.ones(1, 5, dtype=torch.int64), torch.ones(1, 8, dtype=torch.int64),
                   torch.arange(3, 8)[None], torch.zeros(1, dtype=torch.int32), *past)
        shapes = [[-1, -1]] * 3 + [[-1]] + [[-1, kv, -1, dim]] * (2 * layers)
        with torch.no_grad():
            ov_model = ov.convert_model(flat, example_input=example, input=[ov.PartialShape(s) for s in shapes])
    stateful(ov_model, layers)
    return ov_model


class _Flat:
    """LlamaForCausalLM as a function of tensors: (input_ids, attention_mask, position_ids, beam_idx, past
    keys and values per layer) -> (logits, present keys and values per layer)."""

    def __new__(cls, model):
        import torch
        from transformers import DynamicCache

        config = model.config
        layers = config.num_hidden_layers
        heads = config.num_attention_heads

        class Flat(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model
                self.layers, self.kv_heads = layers, config.num_key_value_heads or heads
                self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads

            def forward(self, input_ids, attention_mask, position_ids, beam_idx, *past):
                cache = DynamicCache(config=config)
                for i, layer in enumerate(cache.layers[:layers]):
                    layer.lazy_initialization(past[2 * i], past[2 * i + 1])
                    layer.keys, layer.values = past[2 * i][beam_idx], past[2 * i + 1][beam_idx]
                keys = torch.arange(attention_mask.shape[1])
                mask = ((keys[None, None, None, :] <= position_ids[:, None, :, None])
                        & attention_mask[:, None, None, :].bool())
                logits = self.model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                                    **{_cache_keyword(self.model): cache}, use_cache=True).logits
                return (logits, *[t for layer in cache.layers[:layers] for t in (layer.keys, layer.values)])

        return Flat()


def _cache_keyword(model) -> str:
    """transformers 5.x's name of the cache argument (``cache`` from 5.2x, ``past_key_values`` before)."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def stateful(ov_model, layers: int) -> None:
    """Name the inputs and outputs as GenAI expects (the logits in f32), turn each past/present pair into a
    state, and start each state as zeros of the batch's size (optimum-intel's ``patch_stateful`` does the
    same)."""
    import numpy as np
    import openvino.opset13 as ops
    from openvino import Type as ov_type
    from openvino._offline_transformations import apply_make_stateful_transformation

    logits = ov_model.get_results()[0]
    if logits.get_output_element_type(0) != ov_type.f32:   # bf16: the pipeline samples from f32 logits
        logits.input(0).replace_source_output(ops.convert(logits.input_value(0), "f32").output(0))
    names = ["input_ids", "attention_mask", "position_ids", "beam_idx"]
    pairs = [(f"past_key_values.{i}.{kv}", f"present.{i}.{kv}") for i in range(layers) for kv in ("key", "value")]
    for port, name in zip(ov_model.inputs, names + [p for p, _ in pairs]):
        port.get_tensor().set_names({name})
    for port, name in zip(ov_model.outputs, ["logits"] + [p for _, p in pairs]):
        port.get_tensor().set_names({name})
    apply_make_stateful_transformation(ov_model, dict(pairs))
    batch = ops.gather(ops.shape_of(ov_model.input("input_ids"), output_type="i64"), ops.constant([0]),
                       ops.constant(0))
    for op in ov_model.get_ops():
        if op.get_type_name() == "ReadValue":
            dims = [batch if i == 0 else ops.constant(np.array([d.min_length], dtype=np.int64))
                    for i, d in enumerate(op.get_output_partial_shape(0))]
            zeros = ops.constant(0.0, dtype=op.get_output_element_type(0))
            op.set_arguments([ops.broadcast(zeros, ops.concat(dims, axis=0))])
    ov_model.validate_nodes_and_infer_types()


def compressed(ov_model, fmt: str, group: int):
    """NNCF's data-free weight compression (module docstring, step 4), its progress output kept quiet."""
    import logging

    import nncf

    nncf.set_log_level(logging.ERROR)
    mode = {"int8": nncf.CompressWeightsMode.INT8_ASYM, "int4": nncf.CompressWeightsMode.INT4_ASYM}[fmt]
    extra = {"group_size": group, "ratio": 1.0} if fmt == "int4" else {}
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return nncf.compress_weights(ov_model, mode=mode, **extra)
