"""JAX inference on one device (the measurement itself is ``harness/inference.py``).

Precisions: ``fp32`` the trained parameters; ``bf16`` / ``fp16`` parameters stored in that dtype and
float inputs cast to it (outputs cast to fp32 for scoring); ``int8`` int8 Dense kernels and embedding
tables with per-channel / per-row scales (``quant.py``; ``options.int8_mode`` = "dynamic" (default) or
"weight_only"). The predict function is jit-compiled ahead of time (``compile_s``).
"""

from __future__ import annotations

import jax
import numpy as np
from flax import traverse_util

from xpubench import backends
from xpubench.backends.jax_ import quant
from xpubench.backends.jax_.device import DTYPES, PeakMemory, kind_of, placement
from xpubench.backends.jax_.model import cast_floats, make_apply
from xpubench.harness.inference import NotApplicable, batch_count, check_int8_share, pad_rows, train_untimed
from xpubench.harness.memory import PeakMemoryFrom
from xpubench.harness.session import TrainedSession


def tree_arrays(variables: dict) -> dict[str, np.ndarray]:
    """A flax variable dict ({"params": ..., "batch_stats": ...}) as {"params/a/b/kernel": array}."""
    flat = traverse_util.flatten_dict(jax.device_get(variables), sep="/")
    return {k: np.asarray(v) for k, v in flat.items()}


def arrays_tree(arrays: dict[str, np.ndarray]) -> dict:
    return traverse_util.unflatten_dict({k: np.asarray(v) for k, v in arrays.items()}, sep="/")


class JaxPredictor(PeakMemoryFrom):
    """``fn(params, extra, x) -> out`` jitted; the padded batches on the device before any clock."""

    def __init__(self, fn, params, extra, x: np.ndarray, batch: int, device):
        self.batch, self.n = batch, len(x)
        rows = batch_count(self.n, batch) * batch
        x = pad_rows(np.asarray(x), rows)
        self.batches = [jax.device_put(x[i:i + batch], device) for i in range(0, rows, batch)]
        self.params, self.extra = jax.device_put((params, extra), device)
        self._fn = jax.jit(fn)
        self.memory = PeakMemory([device])
        jax.block_until_ready((self.batches, self.params, self.extra))

    def compile(self) -> float:
        import time

        start = time.perf_counter()
        self._fn = self._fn.lower(self.params, self.extra, self.batches[0]).compile()
        return time.perf_counter() - start

    def predict(self, i: int):
        return self._fn(self.params, self.extra, self.batches[i])

    def sync(self, handle) -> None:
        handle.block_until_ready()

    def host(self, handle) -> np.ndarray:
        return np.asarray(handle).astype(np.float32)

    def model_bytes(self) -> int:
        return int(sum(a.nbytes for a in jax.tree.leaves((self.params, self.extra))))

    def placement(self) -> str:
        """Where a prediction's output lives (one untimed call)."""
        return placement(self.predict(0))


class JaxSession(TrainedSession):
    def __init__(self, case):
        super().__init__(case)
        self.model = backends.get("jax").build(self.workload, self.spec)

    def make_trainer(self, case):
        from xpubench.backends.jax_.train import JaxTrainer

        return JaxTrainer(case)

    def framework(self) -> str:
        return f"jax {jax.__version__}"

    def training_data(self) -> tuple[np.ndarray, ...]:
        return np.asarray(self.trainer.xs), np.asarray(self.trainer.ys)

    def code_modules(self) -> tuple:
        from xpubench.backends.jax_ import model, train

        return (train, model)

    def precheck(self, precision: str) -> None:
        if precision == "int8":
            qparams, report = quant.quantize_params(self.trainer.state[0])
            check_int8_share(report, self.case.workload)
            problem = quant.platform_problem(kind_of(self.trainer.device),
                                             self.case.options.get("int8_mode", "dynamic"), qparams)
            if problem:
                raise NotApplicable(problem)
        elif precision not in DTYPES:
            raise NotApplicable(f"no inference path for precision {precision}")

    def variables(self) -> dict:
        params, _, extra = self.trainer.state
        return {"params": params, **extra}

    def train(self) -> dict[str, np.ndarray]:
        train_untimed(self.trainer, self.trainer.case)
        return tree_arrays(self.variables())

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        tree = arrays_tree(arrays)
        params, opt_state, _ = self.trainer.state
        if jax.tree.structure(tree["params"]) != jax.tree.structure(params):
            raise ValueError("cached weights do not match the model's parameter tree")
        self.trainer.state = (tree["params"], opt_state, {k: v for k, v in tree.items() if k != "params"})

    def predictor(self, precision: str):
        t = self.trainer
        params, _, extra = t.state
        if precision == "int8":
            qparams, report = quant.quantize_params(params)
            mode = self.case.options.get("int8_mode", "dynamic")
            fn = quant.int8_apply(self.model, mode)
            report["method"] = quant.METHOD[mode]
            return self.make_predictor(fn, qparams, extra), report
        apply = make_apply(self.model, precision)
        stored = cast_floats(params, DTYPES[precision])  # bf16/fp16 weights are stored as such
        return self.make_predictor(lambda p, e, x: apply(p, e, x, False, None)[0], stored, extra), {}

    def make_predictor(self, fn, params, extra):
        """The Predictor for ``fn(params, extra, x)`` on the evaluation inputs (parallel.py: sharded)."""
        t = self.trainer
        return JaxPredictor(fn, params, extra, t.x_eval, t.batch, t.device)
