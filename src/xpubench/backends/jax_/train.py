"""JAX training: the step is a pure (state, data, index, key) -> (state, loss) function, jit-compiled
ahead of time (compile_s) with the state donated. The whole data set sits on the device and the step
slices its batch inside the compiled program, so no per-step host work is measured.

bf16 is mixed precision: parameters and optimizer state stay fp32, the forward and backward pass run
on bf16 casts of parameters and float inputs, the loss is computed in fp32.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xpubench.backends.jax_.device import DTYPES, jax_devices, peak_memory_bytes, placement
from xpubench.harness.casedata import batch_order, case_data
from xpubench.harness.training import run_training
from xpubench.workloads import get_workload


def loss_fn(spec, out, y):
    out = out.astype(jnp.float32)
    if spec.loss == "softmax_ce":
        return optax.softmax_cross_entropy_with_integer_labels(out, y.astype(jnp.int32)).mean()
    if spec.loss == "sigmoid_bce":
        return optax.sigmoid_binary_cross_entropy(out.reshape(y.shape), y.astype(jnp.float32)).mean()
    return jnp.mean((out - y) ** 2)


def metric_per_sample(spec, out, y):
    out = out.astype(jnp.float32)
    if spec.metric == "mse":
        return ((out - y) ** 2).reshape(y.shape[0], -1).mean(axis=1)
    if spec.loss == "sigmoid_bce":
        return ((out.reshape(y.shape) > 0) == (y > 0.5)).astype(jnp.float32)
    correct = (out.argmax(-1) == y).astype(jnp.float32)
    return correct.reshape(y.shape[0], -1).mean(axis=1)


def loss_per_sample(spec, out, y):
    out = out.astype(jnp.float32)
    if spec.loss == "softmax_ce":
        ce = optax.softmax_cross_entropy_with_integer_labels(out, y.astype(jnp.int32))
        return ce.reshape(y.shape[0], -1).mean(axis=1)
    if spec.loss == "sigmoid_bce":
        return optax.sigmoid_binary_cross_entropy(out.reshape(y.shape), y.astype(jnp.float32))
    return ((out - y) ** 2).reshape(y.shape[0], -1).mean(axis=1)


def make_optimizer(spec, lr: float):
    if spec.optimizer == "adam":
        return optax.adam(lr, eps=1e-8)
    if spec.optimizer == "rmsprop":
        return optax.rmsprop(lr, decay=0.9, eps=1e-7, eps_in_sqrt=False)  # = torch RMSprop(alpha=0.9)
    raise ValueError(f"unknown optimizer {spec.optimizer}")


def cast_floats(tree, dtype):
    return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree)


def matmul_precision(precision: str) -> str:
    """The ``jax.default_matmul_precision`` a case traces its model under: fp32 matmuls and
    convolutions are true fp32 ("highest": without it XLA runs them as TF32 on Ampere+ GPUs and as
    bf16 passes on TPUs), ``tf32`` asks for "tensorfloat32"; bf16/fp16 cases keep XLA's default (their
    operands are 16-bit already). The same as PyTorch, where TF32 is off unless asked for."""
    return {"tf32": "tensorfloat32", "bf16": "default", "fp16": "default"}.get(precision, "highest")


def make_apply(model, precision: str):
    """apply(params, extra, x, train, rng) -> (out, new_extra) in the case's compute precision.

    The model is traced under ``jax.default_matmul_precision(matmul_precision(precision))``: every
    dot and convolution of the forward pass carries that precision, and so do their transposes in the
    backward pass (a jitted step's lowered StableHLO shows ``precision = [HIGHEST, HIGHEST]``)."""
    compute = DTYPES.get(precision, jnp.float32)
    mm_precision = matmul_precision(precision)

    def apply(params, extra, x, train, rng):
        if compute != jnp.float32:
            params, x = cast_floats(params, compute), cast_floats(x, compute)
        variables = {"params": params, **extra}
        mutable = list(extra) if (train and extra) else False
        with jax.default_matmul_precision(mm_precision) if mm_precision != "default" else nullcontext():
            result = model.apply(variables, x, train=train, rngs={"dropout": rng} if train else None,
                                 mutable=mutable)
        out, new_extra = result if mutable else (result, extra)
        return out, cast_floats(new_extra, jnp.float32)
    return apply


def init_variables(model, spec, x_sample, seed: int):
    params_key, dropout_key = jax.random.split(jax.random.key(seed))
    variables = model.init({"params": params_key, "dropout": dropout_key}, x_sample, train=False)
    params = variables["params"]
    extra = {k: v for k, v in variables.items() if k != "params"}
    return params, extra


def take_rows(a, index, batch: int):
    """Batch ``index`` of a flat (samples, ...) array: rows index*batch .. +batch."""
    return jax.lax.dynamic_slice_in_dim(a, index * batch, batch)


def make_train_step(spec, apply, tx, batch: int, take=take_rows):
    """(state, xs, ys, index, key) -> (state, loss); ``take(a, index, batch)`` picks the batch."""
    def train_step(state, xs, ys, index, key):
        params, opt_state, extra = state
        x, y = take(xs, index, batch), take(ys, index, batch)

        def objective(p):
            out, new_extra = apply(p, extra, x, True, key)
            return loss_fn(spec, out, y), new_extra

        (loss, new_extra), grads = jax.value_and_grad(objective, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state, new_extra), loss
    return train_step


def make_eval_step(spec, apply):
    def eval_step(params, extra, x, y, valid):
        out, _ = apply(params, extra, x, False, None)
        mask = (jnp.arange(x.shape[0]) < valid).astype(jnp.float32)
        return (loss_per_sample(spec, out, y) * mask).sum(), (metric_per_sample(spec, out, y) * mask).sum()
    return eval_step


def pad_to(a: np.ndarray, rows: int) -> np.ndarray:
    if len(a) == rows:
        return a
    pad = np.zeros((rows - len(a), *a.shape[1:]), dtype=a.dtype)
    return np.concatenate([a, pad])


class JaxTrainer:
    def __init__(self, case):
        mod = get_workload(case.workload)
        self.case = case
        (self.device,) = jax_devices(case.device)
        ds, self.spec = case_data(case, mod.SPEC)
        self.flops_per_sample = mod.forward_flops(self.spec) * self.spec.train_flops_factor
        self.batch = self.global_batch = case.batch_size or self.spec.batch_sizes[0]
        self.steps_per_epoch = len(ds.x_train) // self.batch
        n = self.steps_per_epoch * self.batch
        put = partial(jax.device_put, device=self.device)
        self.xs, self.ys = put(ds.x_train[:n]), put(ds.y_train[:n])
        self.x_eval, self.y_eval = ds.x_test, ds.y_test
        model = mod.build_jax(self.spec)
        self.apply = make_apply(model, case.precision)
        params, extra = init_variables(model, self.spec, ds.x_train[:1], case.seed)
        tx = make_optimizer(self.spec, self.spec.learning_rate)
        self.state = put((params, tx.init(params), extra))
        self.key = jax.random.key(case.seed + 1)
        self._train = jax.jit(make_train_step(self.spec, self.apply, tx, self.batch), donate_argnums=0)
        self._eval = jax.jit(make_eval_step(self.spec, self.apply))
        self._logits = jax.jit(lambda p, e, x: self.apply(p, e, x, False, None)[0])
        self.order = np.arange(self.steps_per_epoch)
        self.counter = 0

    @property
    def matmul_precision(self) -> str:
        return matmul_precision(self.case.precision)

    @property
    def in_step_budget(self) -> bool:
        """Each process has its own clock: with several, the budget is decided at epoch ends only."""
        return jax.process_count() == 1

    def agree_stop(self, stop: bool) -> bool:
        """Stop when any process says so (every process calls this at the same epoch end)."""
        if jax.process_count() == 1:
            return stop
        from jax.experimental import multihost_utils

        return bool(np.any(multihost_utils.process_allgather(np.array([stop]))))

    def compile(self) -> float:
        start = time.perf_counter()
        self._train = self._train.lower(self.state, self.xs, self.ys, np.int32(0), self.key).compile()
        return time.perf_counter() - start

    def start_epoch(self, epoch: int) -> None:
        self.order = batch_order(self.steps_per_epoch, epoch, self.case.seed)

    def step(self, i: int) -> Any:
        self.counter += 1
        key = jax.random.fold_in(self.key, self.counter)
        self.state, loss = self._train(self.state, self.xs, self.ys, np.int32(self.order[i]), key)
        return loss

    def sync(self, handle) -> None:
        handle.block_until_ready()

    def loss_value(self, handle) -> float:
        return float(handle)

    def evaluate(self) -> tuple[float, float]:
        params, _, extra = self.state
        total_loss = total_metric = 0.0
        n = len(self.x_eval)
        for start in range(0, n, self.batch):
            stop = min(start + self.batch, n)
            x = jax.device_put(pad_to(self.x_eval[start:stop], self.batch), self.device)
            y = jax.device_put(pad_to(self.y_eval[start:stop], self.batch), self.device)
            lsum, msum = self._eval(params, extra, x, y, stop - start)
            total_loss += float(lsum)
            total_metric += float(msum)
        return total_loss / n, total_metric / n

    def predict_eval(self):
        params, _, extra = self.state
        n = len(self.x_eval)
        logits = [np.asarray(self._logits(params, extra, jax.device_put(
                      pad_to(self.x_eval[i:i + self.batch], self.batch), self.device)))[:n - i]
                  for i in range(0, n, self.batch)]
        probs = jax.nn.softmax(np.concatenate(logits).astype(np.float32), -1)
        return self.x_eval, self.y_eval, np.asarray(probs)

    def placement(self) -> str:
        return placement(jax.tree.leaves(self.state[0])[0])

    def peak_memory(self):
        return peak_memory_bytes(self.device)


def run(case):
    trainer = JaxTrainer(case)
    return run_training(trainer, case, trainer.flops_per_sample)
