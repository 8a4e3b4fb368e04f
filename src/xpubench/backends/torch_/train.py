"""PyTorch training on one device: eager (channels_last for convolutions) or torch.compile (its
compilation is timed apart, as compile_s, on a warm-up step that is then undone: ``compile``).

compile="auto" compiles on CUDA/ROCm only: on CPU, torch.compile was measured slower than eager for
these models (docs/measured-facts.md) and costs 18-33 s of compilation. Where it cannot work (no
Triton, no C compiler) or its warm-up fails, "auto" trains eager and says why (``compiled: false`` and
a warning); compile="on" fails the case instead.

Mixed precision: bf16/fp16 under ``torch.autocast`` (refused when autocast would disable itself);
fp16 also scales the loss (``torch.amp.GradScaler``: gradients that underflow fp16 would otherwise be
lost). bf16 needs no scaling: it has fp32's exponent range.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import time

import numpy as np
import torch
import torch.nn.functional as F

from xpubench import backends
from xpubench.backends.torch_.caches import warm_cache_note
from xpubench.backends.torch_.device import (
    PeakMemory,
    checked_autocast,
    placement,
    set_autotune,
    set_precision_mode,
    sync,
    torch_device,
)
from xpubench.harness.casedata import batch_order
from xpubench.harness.memory import PeakMemoryFrom
from xpubench.harness.setup import training_setup
from xpubench.workloads import get_workload


def loss_fn(spec, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = out.float()
    if spec.loss == "softmax_ce":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1).long())
    if spec.loss == "sigmoid_bce":
        return F.binary_cross_entropy_with_logits(out.reshape(y.shape), y.float())
    return F.mse_loss(out, y)


def index_labels(a: np.ndarray) -> np.ndarray:
    """Integer labels (classes, next tokens) as int64, the index type torch's losses take, made once before
    any clock: ``loss_fn``'s ``.long()`` is then no copy inside a timed step."""
    return a.astype(np.int64, copy=False) if np.issubdtype(a.dtype, np.integer) else a


def metric_sum(spec, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Sum over the batch of the per-sample metric (accuracy or mean squared error)."""
    out = out.float()
    if spec.metric == "mse":
        return ((out - y) ** 2).reshape(y.shape[0], -1).mean(dim=1).sum()
    if spec.loss == "sigmoid_bce":
        return ((out.reshape(y.shape) > 0).float() == y).float().sum()
    correct = (out.argmax(-1) == y.long()).float()
    return correct.reshape(y.shape[0], -1).mean(dim=1).sum()


def make_optimizer(spec, params, device: torch.device, lr: float):
    fused = device.type == "cuda"
    if spec.optimizer == "adamw":   # the workload's own AdamW, with its weight-decay groups (gpt.py)
        return get_workload(spec.name).optimizers["torch"](params, spec, lr, fused=fused or None)
    if spec.optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, eps=1e-8, fused=fused or None)
    if spec.optimizer == "rmsprop":
        # alpha/eps match optax.rmsprop(decay=0.9, eps=1e-7, eps_in_sqrt=False) in the jax backend
        return torch.optim.RMSprop(params, lr=lr, alpha=0.9, eps=1e-7)
    raise ValueError(f"unknown optimizer {spec.optimizer}")


def build_model(spec, case, device: torch.device) -> torch.nn.Module:
    model = backends.get("torch").build(get_workload(case.workload), spec).to(device)
    if spec.input_kind == "image":
        model = model.to(memory_format=torch.channels_last)
    return model


LOSS_SCALING = ("dynamic (torch.amp.GradScaler): scale 2^16, halved and the step skipped on inf/nan "
                "gradients, doubled after 2000 finite steps")


def compile_problem(device: torch.device) -> str | None:
    """Why torch.compile's default backend (Inductor) cannot build code here, found without compiling:
    on CUDA/ROCm it generates Triton kernels (Triton compiles a launcher with the system C compiler);
    on the CPU it generates C++."""
    def found(*names: str | None) -> bool:
        return any(name and shutil.which(name) for name in names)

    if device.type == "cuda":
        if importlib.util.find_spec("triton") is None:
            return "Triton is not installed (Inductor's GPU code generator)"
        if not found(os.environ.get("CC"), "cc", "gcc", "clang"):
            return "no C compiler found (Triton builds its kernel launcher with one; set CC)"
    elif device.type == "cpu" and not found(os.environ.get("CXX"), "c++", "g++", "clang++"):
        return "no C++ compiler found (Inductor's CPU code generator; set CXX)"
    return None


def compile_choice(case, device: torch.device) -> tuple[bool, str | None]:
    """(compile?, why not, when "auto" had to fall back): "on" always compiles, "off" never, "auto" on
    CUDA/ROCm when Inductor can work there."""
    if case.compile == "on":
        return True, None
    if case.compile != "auto" or device.type != "cuda":
        return False, None
    problem = compile_problem(device)
    return (False, f"torch.compile not used ({problem}): trained eager") if problem else (True, None)


class TorchTrainer(PeakMemoryFrom):
    def __init__(self, case, world_size: int = 1, rank: int = 0, wrap=None):
        self.case, self.device = case, torch_device(case.device)
        set_precision_mode(case.precision)
        torch.manual_seed(case.seed)
        setup = training_setup(case)
        self.spec, self.flops_per_sample = setup.spec, setup.flops_per_sample
        self.batch, self.global_batch = setup.batch, setup.global_batch
        self.autotune = set_autotune(self.device)
        self.autocast = checked_autocast(self.device, case.precision)
        self.model = build_model(self.spec, case, self.device)
        self.eager_net = self.net = wrap(self.model) if wrap else self.model
        self.compiled, self.compile_note = compile_choice(case, self.device)
        if self.compiled:
            self.net = torch.compile(self.net)
        self.opt = make_optimizer(self.spec, self.model.parameters(), self.device, setup.learning_rate)
        self.scaler = torch.amp.GradScaler(self.device.type) if case.precision == "fp16" else None
        # each rank trains on its own shard of every global batch
        def put(a):
            return torch.from_numpy(np.ascontiguousarray(a)).to(self.device)

        self.x, self.y = put(setup.x_train), put(index_labels(setup.y_train))
        self.x_eval, self.y_eval = put(setup.x_eval), put(index_labels(setup.y_eval))
        self.steps_per_epoch = setup.steps_per_epoch
        self.rank, self.world_size = rank, world_size
        self.order = np.arange(self.steps_per_epoch)
        self.memory = PeakMemory(self.device)
        sync(self.device)

    @property
    def matmul_precision(self) -> str:
        """What the model's matmuls and convolutions run as: fp32 with TF32 off ("highest"), TF32 for
        tf32 (set_precision_mode), 16-bit operands under autocast ("default", as in the JAX backend)."""
        if self.case.precision in ("bf16", "fp16"):
            return "default"
        return "tensorfloat32" if torch.backends.cuda.matmul.allow_tf32 else "highest"

    @property
    def in_step_budget(self) -> bool:
        """Each rank has its own clock: with several, the budget is decided at epoch ends only."""
        return self.world_size == 1

    def agree_stop(self, stop: bool) -> bool:
        """Stop when any rank says so (every rank calls this at the same epoch end, untimed)."""
        if self.world_size == 1:
            return stop
        import torch.distributed as dist

        flag = torch.tensor([int(stop)], device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def compile(self) -> float | None:
        """Eager: None. torch.compile compiles lazily, on the first call: time one warm-up step of the
        compiled model on the first batch (forward, backward, update; Dynamo/Inductor compile both
        graphs here) until the device is done, then undo it (weights, buffers, optimizer, loss-scaler
        and RNG state restored in place, so no recompilation and the timed steps start where eager ones
        do). Under compile="auto" a failing compilation falls back to eager (None, and a note why)."""
        if not self.compiled:
            return None
        model_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        opt_state = copy.deepcopy(self.opt.state_dict())
        scaler_state = copy.deepcopy(self.scaler.state_dict()) if self.scaler else None
        rng = torch.random.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None
        order, training = self.order, self.model.training
        self.order = np.arange(self.steps_per_epoch)
        self.model.train()
        sync(self.device)
        start = time.perf_counter()
        try:
            self.sync(self.step(0))
            elapsed: float | None = time.perf_counter() - start
        except Exception as exc:   # Dynamo/Inductor raise many types; compile="on" re-raises
            if self.case.compile != "auto":
                raise
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            self.net, self.compiled, elapsed = self.eager_net, False, None
            self.compile_note = f"torch.compile failed ({type(exc).__name__}: {first}): trained eager"
        with torch.no_grad():
            self.model.load_state_dict(model_state)
        self.opt.load_state_dict(opt_state)
        if self.scaler:
            self.scaler.load_state_dict(scaler_state)
        torch.random.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state(cuda_rng, self.device)
        self.order = order
        self.model.train(training)
        sync(self.device)
        return elapsed

    def start_epoch(self, epoch: int) -> None:
        self.order = batch_order(self.steps_per_epoch, epoch, self.case.seed)
        self.model.train()

    def batch_slice(self, i: int) -> slice:
        start = int(self.order[i]) * self.global_batch + self.rank * self.batch
        return slice(start, start + self.batch)

    def step(self, i: int):
        sl = self.batch_slice(i)
        x, y = self.x[sl], self.y[sl]
        self.opt.zero_grad(set_to_none=True)
        with self.autocast:
            out = self.net(x)
        loss = loss_fn(self.spec, out, y)
        if self.scaler is None:
            loss.backward()
            self.opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        return loss.detach()

    def sync(self, handle) -> None:
        sync(self.device)

    def loss_value(self, handle) -> float:
        return float(handle)

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        self.model.eval()
        total_loss, total_metric, n = 0.0, 0.0, len(self.x_eval)
        for start in range(0, n, self.batch):
            x, y = self.x_eval[start:start + self.batch], self.y_eval[start:start + self.batch]
            with self.autocast:
                out = self.model(x)
            total_loss += float(loss_fn(self.spec, out, y)) * len(x)
            total_metric += float(metric_sum(self.spec, out, y))
        self.model.train()
        return total_loss / n, total_metric / n

    @torch.no_grad()
    def predict_eval(self):
        self.model.eval()
        probs = [torch.softmax(self.model(self.x_eval[i:i + self.batch]).float(), -1).cpu()
                 for i in range(0, len(self.x_eval), self.batch)]
        self.model.train()
        return self.x_eval.cpu().numpy(), self.y_eval.cpu().numpy(), torch.cat(probs).numpy()

    def placement(self) -> str:
        return placement(next(self.model.parameters()))


    def describe(self) -> dict:
        """What ran, added to a training case's metrics: compiled or eager (and why, as a warning),
        autotuning, fp16's loss scaling."""
        warm = warm_cache_note() if self.compiled else None
        notes = "; ".join(n for n in (self.compile_note, warm) if n)
        out = {"compiled": self.compiled, "autotune": self.autotune, "warning": notes or None,
               "bytes_unknown": "PyTorch has no count of the bytes a training step moves"}   # the roofline's
        if self.scaler is not None:
            out.update(loss_scaling=LOSS_SCALING, final_loss_scale=float(self.scaler.get_scale()))
        if hasattr(self.spec, "attention"):
            out["attention_kernel"] = self.attention_kernel()
        return out

    def attention_kernel(self) -> str:
        """The SDPA kernel a training forward runs (backends/torch_/attention.py), read after the
        measurement on one forward of the first batch, as measured (autocast, grad mode, compiled or
        not; the DDP wrapper left out: a forward without its backward would upset it)."""
        from xpubench.backends.torch_.attention import checked_kernel

        net = self.net if self.compiled else self.model
        x = self.x[self.batch_slice(0)]

        def forward():
            with self.autocast:
                net(x)

        kernel = checked_kernel(self.spec.attention, forward)
        self.opt.zero_grad(set_to_none=True)
        return kernel
