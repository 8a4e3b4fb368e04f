"""The llama record's models (workload.py's ``models``, ``generation_models`` and ``checkpoint`` hooks):
the training model in each framework, fp32 from a random draw; the generation model in a precision's
weight format on its device, with the ``--weights`` checkpoint's tensors (checked against the digest the
plan pinned) or random ones; and the model as a Hugging Face checkpoint folder for an engine (folder.py).
Each takes the record's ``LlamaSpec`` (spec.py); frameworks are imported when a model is built."""

from __future__ import annotations

from typing import Any

from xpubench.errors import UserError
from xpubench.workloads.llama import costs
from xpubench.workloads.llama.options import _checkpoint


def build_torch(spec: Any) -> Any:
    """The training model: fp32 parameters, random from torch's seed (the trainer seeds it)."""
    import torch

    from xpubench.workloads.llama.torch_model import LlamaTorch

    return LlamaTorch(spec.config, "fp32").init_random(seed=torch.initial_seed())


def build_jax(spec: Any) -> Any:
    """The training model (flax linen; the trainer's ``init`` draws its parameters)."""
    from xpubench.workloads.llama.flax_model import LlamaFlax

    return LlamaFlax(spec.config, "fp32")


def check_int4_group(cfg: Any, group: int) -> None:
    """UserError unless int4's groups tile every matrix row (a small checkpoint may be narrower than 32)."""
    if cfg.hidden_size % group or cfg.intermediate_size % group or cfg.q_size % group:
        raise UserError(f"llama: int4_group_size {group} must divide the hidden size {cfg.hidden_size}, the MLP's "
                        f"{cfg.intermediate_size} and the heads' {cfg.q_size}")


def checkpoint_of(spec: Any) -> Any:
    """The spec's checkpoint, opened once in this process for its tensors and checked against the digest the
    plan pinned (None: random weights)."""
    return _checkpoint(spec.weights, spec.weights_sha256) if spec.weights else None


def torch_generation_model(spec: Any, precision: str, device: Any, seed: int) -> Any:
    """A ready ``LlamaTorch`` in the precision's weight format on ``device`` (backends/torch_/generate.py)."""
    from xpubench.workloads.llama.torch_model import build

    if costs.weight_format(precision) == "int4":
        check_int4_group(spec.config, spec.int4_group_size)
    return build(spec.config, costs.weight_format(precision), device, seed, checkpoint_of(spec),
                 group=spec.int4_group_size)


def jax_generation_model(spec: Any, precision: str, device: Any, seed: int) -> tuple[Any, Any]:
    """(``LlamaFlax``, its params) in the precision's weight format, drawn on ``device`` or read from the
    checkpoint (backends/jax_/generate.py)."""
    import jax

    from xpubench.workloads.llama.flax_model import LlamaFlax
    from xpubench.workloads.llama.flax_params import init_random, load_checkpoint

    fmt = costs.weight_format(precision)
    if fmt == "int4":
        check_int4_group(spec.config, spec.int4_group_size)
    # XLA:CPU has no bf16 dot (flax_model's docstring): every weight not in fp32 becomes fp32 in the compiled step
    dequant = "fp32" if fmt != "fp32" and device.platform == "cpu" else None
    module = LlamaFlax(spec.config, fmt, dequant=dequant, group=spec.int4_group_size)
    ckpt = checkpoint_of(spec)
    if ckpt is not None:
        return module, load_checkpoint(module, ckpt)
    with jax.default_device(device):
        return module, init_random(module, seed)


def checkpoint(spec: Any, seed: int, write: bool = True) -> Any:
    """The model as a Hugging Face checkpoint folder, what an engine loads (folder.py)."""
    from xpubench.workloads.llama.folder import weights_of

    return weights_of(spec, seed, write)
