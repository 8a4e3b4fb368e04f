"""JAX training: the step is a pure (state, data, index, counter, key) -> (state, loss) function, jit-
compiled ahead of time (compile_s) with the state donated. The whole training and evaluation set sits on
the device before any clock starts and the step slices its batch inside the compiled program; the
dropout key is folded with the step counter inside it too, so no per-step host or default-device work
is measured. The evaluation step is compiled ahead too (untimed), so the first timed evaluation holds
no compilation.

bf16 is mixed precision: parameters and optimizer state stay fp32, the forward and backward pass run
on bf16 casts of parameters and float inputs, the loss is computed in fp32. fp16 is the same in fp16,
with dynamic loss scaling (``loss_scale.py``; the scaler's state rides in the optimizer state). The model's
forward pass in the case's precision and its initialisation are ``model.py``'s (shared with inference and
generation).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xpubench import backends
from xpubench.backends.jax_ import loss_scale
from xpubench.backends.jax_.device import PeakMemory, jax_devices, kind_of, placement
from xpubench.backends.jax_.model import init_variables, make_apply, matmul_precision, quick_options
from xpubench.devices.device import GPU
from xpubench.harness.casedata import batch_order
from xpubench.harness.inference import batch_count, pad_rows
from xpubench.harness.memory import PeakMemoryFrom
from xpubench.harness.setup import training_setup
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
    if spec.optimizer == "adamw":   # the workload's own AdamW, with its weight-decay mask (gpt.py)
        return get_workload(spec.name).optimizers["jax"](spec, lr)
    if spec.optimizer == "adam":
        return optax.adam(lr, eps=1e-8)
    if spec.optimizer == "rmsprop":
        return optax.rmsprop(lr, decay=0.9, eps=1e-7, eps_in_sqrt=False)  # = torch RMSprop(alpha=0.9)
    raise ValueError(f"unknown optimizer {spec.optimizer}")


def take_rows(a, index, batch: int):
    """Batch ``index`` of a flat (samples, ...) array: rows index*batch .. +batch."""
    return jax.lax.dynamic_slice_in_dim(a, index * batch, batch)


def take_batch(a, index, batch: int):
    """Batch ``index`` of a (batches, batch, ...) array: a dynamic index on the first axis."""
    return jax.lax.dynamic_index_in_dim(a, index, axis=0, keepdims=False)


def in_batches(a: np.ndarray, batch: int) -> np.ndarray:
    """(n, ...) -> (ceil(n / batch), batch, ...), the last batch padded with zero rows."""
    nb = batch_count(len(a), batch)
    return pad_rows(np.asarray(a), nb * batch).reshape(nb, batch, *a.shape[1:])


def init_opt_state(tx, params, precision: str):
    """The optimizer state; fp16 adds the loss scaler's (loss_scale.py)."""
    state = jax.jit(tx.init)(params)   # one program, not a zeros op per parameter
    return (state, loss_scale.init()) if precision == "fp16" else state


def make_train_step(spec, apply, tx, batch: int, take=take_rows, scaled: bool = False):
    """(state, xs, ys, index, key) -> (state, loss); ``take(a, index, batch)`` picks the batch.
    ``scaled``: fp16's dynamic loss scaling (a step with non-finite gradients is skipped)."""
    def train_step(state, xs, ys, index, key):
        params, opt_state, extra = state
        x, y = take(xs, index, batch), take(ys, index, batch)

        def objective(p):
            out, new_extra = apply(p, extra, x, True, key)
            return loss_fn(spec, out, y), new_extra

        if not scaled:
            (loss, new_extra), grads = jax.value_and_grad(objective, has_aux=True)(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state, new_extra), loss
        inner, scaler = opt_state
        (loss, new_extra), grads, finite = loss_scale.scaled_grad(objective, params, scaler)
        updates, new_inner = tx.update(grads, inner, params)
        params, inner = loss_scale.keep_if(finite, (optax.apply_updates(params, updates), new_inner),
                                           (params, inner))
        return (params, (inner, loss_scale.next_state(scaler, finite)), new_extra), loss
    return train_step


def keyed(step):
    """``step`` taking (..., counter, key data) instead of a key: the step's dropout key is folded from
    the run's key and the step counter inside the compiled program (no eager key work per step)."""
    def keyed_step(state, xs, ys, index, counter, key_data):
        return step(state, xs, ys, index, jax.random.fold_in(jax.random.wrap_key_data(key_data), counter))
    return keyed_step


def make_eval_step(spec, apply, batch: int):
    """(params, extra, xs, ys, index, valid) -> (loss sum, metric sum) over batch ``index`` of the
    batched evaluation arrays (``in_batches``), its first ``valid`` rows counted."""
    def eval_step(params, extra, xs, ys, index, valid):
        x, y = take_batch(xs, index, batch), take_batch(ys, index, batch)
        out, _ = apply(params, extra, x, False, None)
        mask = (jnp.arange(x.shape[0]) < valid).astype(jnp.float32)
        return (loss_per_sample(spec, out, y) * mask).sum(), (metric_per_sample(spec, out, y) * mask).sum()
    return eval_step


def autotune_setting(device) -> str | None:
    """XLA autotunes GPU kernels by default (level 4); XLA_FLAGS may set another level (recorded)."""
    if kind_of(device) is not GPU:
        return None
    m = re.search(r"--xla_gpu_autotune_level=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return f"XLA autotuning, xla_gpu_autotune_level {m.group(1) if m else '4 (default)'}"


class JaxTrainer(PeakMemoryFrom):
    # step() returns once XLA has the step queued, and sync(handle) waits for that step's loss alone: on a CPU
    # the harness's step mode runs one step ahead (harness/training.py)
    dispatches_ahead = True

    def __init__(self, case):
        self.case = case
        (self.device,) = jax_devices(case.device)
        setup = training_setup(case)
        self.spec, self.flops_per_sample = setup.spec, setup.flops_per_sample
        self.batch = self.global_batch = setup.batch
        self.steps_per_epoch = setup.steps_per_epoch

        def put(a):
            return jax.device_put(a, self.device)

        self.xs, self.ys = put(setup.x_train), put(setup.y_train)
        self.x_eval, self.y_eval = setup.x_eval, setup.y_eval
        self.eval_x, self.eval_y = put(in_batches(self.x_eval, self.batch)), put(in_batches(self.y_eval, self.batch))
        model = backends.get("jax").build(get_workload(case.workload), self.spec)
        self.apply = make_apply(model, case.precision)
        params, extra = init_variables(model, self.spec, setup.x_train[:1], case.seed)
        tx = make_optimizer(self.spec, setup.learning_rate)
        self.state = put((params, init_opt_state(tx, params, case.precision), extra))
        self.key_data = put(jax.random.key_data(jax.random.key(case.seed + 1)))
        step = make_train_step(self.spec, self.apply, tx, self.batch, scaled=case.precision == "fp16")
        self._train = jax.jit(keyed(step), donate_argnums=0)
        self._eval = jax.jit(make_eval_step(self.spec, self.apply, self.batch))
        self._logits = jax.jit(lambda p, e, xs, i: self.apply(p, e, take_batch(xs, i, self.batch), False, None)[0])
        self.order = np.arange(self.steps_per_epoch)
        self.counter = 0
        self.memory = PeakMemory([self.device])
        self.wait_for_uploads()

    def wait_for_uploads(self) -> None:
        """Data, state and key are on the device before any clock starts (device_put is asynchronous)."""
        jax.block_until_ready((self.xs, self.ys, self.eval_x, self.eval_y, self.state, self.key_data))

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
        """compile_s: the train step's ahead-of-time compilation. The evaluation step is compiled after
        it, untimed (it is neither training nor in any timed evaluation)."""
        start = time.perf_counter()
        self._train = self._train.lower(self.state, self.xs, self.ys, np.int32(0), np.int32(0),
                                        self.key_data).compile()
        elapsed = time.perf_counter() - start
        params, _, extra = self.state
        self._eval = self._eval.lower(params, extra, self.eval_x, self.eval_y, np.int32(0), np.int32(0)).compile()
        return elapsed

    def start_epoch(self, epoch: int) -> None:
        self.order = batch_order(self.steps_per_epoch, epoch, self.case.seed)

    def step(self, i: int) -> Any:
        self.counter += 1
        self.state, loss = self._train(self.state, self.xs, self.ys, np.int32(self.order[i]),
                                       np.int32(self.counter), self.key_data)
        return loss

    def sync(self, handle) -> None:
        handle.block_until_ready()

    def loss_value(self, handle) -> float:
        return float(handle)

    def evaluate(self) -> tuple[float, float]:
        """The validation pass over the evaluation batches already on the device."""
        params, _, extra = self.state
        n, gb = len(self.x_eval), self.global_batch
        total_loss = total_metric = 0.0
        for i in range(self.eval_x.shape[0]):
            lsum, msum = self._eval(params, extra, self.eval_x, self.eval_y, np.int32(i),
                                    np.int32(min(gb, n - i * gb)))
            total_loss += float(lsum)
            total_metric += float(msum)
        return total_loss / n, total_metric / n

    def predict_eval(self):
        """The gallery's class probabilities (untimed, once a case): compiled as the init program is."""
        params, _, extra = self.state
        logits_of = self._logits.lower(params, extra, self.eval_x, np.int32(0)).compile(quick_options())
        logits = [np.asarray(logits_of(params, extra, self.eval_x, np.int32(i)))
                  for i in range(self.eval_x.shape[0])]
        logits = np.concatenate(logits)[:len(self.x_eval)].astype(np.float32)
        return self.x_eval, self.y_eval, np.asarray(jax.nn.softmax(logits, -1))

    def placement(self) -> str:
        return placement(jax.tree.leaves(self.state[0])[0])


    def describe(self) -> dict:
        """What ran, added to a training case's metrics: XLA's autotuning, fp16's loss scaling."""
        # the roofline's bytes (XLA's count), or why there are none
        from xpubench.backends.jax_.cost import step_bytes_per_sample, step_bytes_unknown
        from xpubench.backends.jax_.device import warm_cache_note

        out = {"autotune": autotune_setting(self.device), "warning": warm_cache_note(os.environ)}

        moved = step_bytes_per_sample(self._train, self.global_batch, getattr(self, "flops_per_sample", None))
        if moved:
            out["bytes_per_sample"] = moved
        else:
            out["bytes_unknown"] = step_bytes_unknown(self._train, self.global_batch,
                                                      getattr(self, "flops_per_sample", None))
        if self.case.precision == "fp16":
            out.update(loss_scaling=loss_scale.DESCRIPTION,
                       final_loss_scale=float(jax.device_get(self.state[1][1]["scale"])))
        if hasattr(self.spec, "attention") and hasattr(self._train, "as_text"):   # compiled: read its HLO
            from xpubench.backends.jax_.attention import attention_kernel

            out["attention_kernel"] = attention_kernel(self._train)
        return out
