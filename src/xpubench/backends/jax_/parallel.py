"""JAX data parallelism over N devices: one jit-compiled program on a device mesh (``jax.sharding``).

The mesh has one axis, "data". Parameters, optimizer state and batch-norm statistics are replicated
(``PartitionSpec()``); every batch is split along its first axis (``PartitionSpec("data")``): each
device holds ``batch_size`` rows of a global batch of N x batch_size. The train step is the
single-device step (``train.make_train_step``) compiled with these shardings: XLA's SPMD partitioner
runs the forward and backward pass on each shard and inserts the all-reduce that sums the gradients
(the loss is the mean over the global batch, so the update is the one of one device on the global
batch). Consequences, both deliberate:
- dropout draws its mask for the global batch from the same key (``jax_threefry_partitionable``), so
  a step on N devices equals a step on one device with the same global batch, to float tolerance;
- batch-norm statistics are over the global batch (synchronised batch norm), not per device.

The training set is laid out as (steps, global batch, ...) with the batch axis sharded, so the step
picks its batch with a dynamic index on the unsharded first axis: no data moves between devices.
Predictions pad the sample count up to whole global batches (``inference.pad_rows``), split them over
the devices and drop the pad rows. With several processes (``distributed.py``) the same code runs in
each; ``jax.make_array_from_callback`` gives each process's devices their shards.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from xpubench import backends
from xpubench.backends.jax_ import distributed
from xpubench.backends.jax_.device import PeakMemory
from xpubench.backends.jax_.infer import JaxPredictor, JaxSession
from xpubench.backends.jax_.model import init_variables, make_apply
from xpubench.backends.jax_.train import (
    JaxTrainer,
    in_batches,
    init_opt_state,
    keyed,
    make_eval_step,
    make_optimizer,
    make_train_step,
    take_batch,
)
from xpubench.backends.world import handed
from xpubench.harness.setup import training_setup
from xpubench.workloads import get_workload

AXIS = "data"


def make_mesh(devices) -> Mesh:
    return Mesh(np.array(devices), (AXIS,))


def global_array(a, sharding: NamedSharding) -> jax.Array:
    """A host array (the same in every process) as a global array with this sharding. Each device
    gets its own copy of its shard, so a donated replica never shares memory with another."""
    a = np.asarray(a)
    return jax.make_array_from_callback(a.shape, sharding, lambda idx: np.array(a[idx], copy=True))


def replicate(tree, mesh: Mesh):
    """Every leaf on every device of the mesh."""
    repl = NamedSharding(mesh, P())
    return jax.tree.map(lambda a: global_array(np.asarray(a), repl), tree)


def to_host(a) -> np.ndarray:
    if a.is_fully_addressable:
        return np.asarray(a)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(a, tiled=True))


class ShardedJaxTrainer(JaxTrainer):
    """The JaxTrainer contract (harness/training.py) on N devices; ``batch`` is per device."""

    def __init__(self, case):
        distributed.initialize()
        self.case, self.counter = case, 0
        self.mesh = make_mesh(distributed.mesh_devices(case.device, case.devices))
        self.device = next(d for d in self.mesh.devices.flat if d.process_index == jax.process_index())
        setup = training_setup(case)   # learning rate scaled with the mesh under --lr-scaling
        self.spec, self.flops_per_sample = setup.spec, setup.flops_per_sample
        self.batch, self.global_batch = setup.batch, setup.global_batch
        self.steps_per_epoch = setup.steps_per_epoch
        gb = self.global_batch
        self.host_xs, self.host_ys = setup.x_train, setup.y_train
        self.data, self.repl = NamedSharding(self.mesh, P(None, AXIS)), NamedSharding(self.mesh, P())
        split = NamedSharding(self.mesh, P(AXIS))
        self.xs = global_array(self.host_xs.reshape(-1, gb, *self.host_xs.shape[1:]), self.data)
        self.ys = global_array(self.host_ys.reshape(-1, gb, *self.host_ys.shape[1:]), self.data)
        self.x_eval, self.y_eval = setup.x_eval, setup.y_eval
        self.eval_x = global_array(in_batches(self.x_eval, gb), self.data)
        self.eval_y = global_array(in_batches(self.y_eval, gb), self.data)
        model = backends.get("jax").build(get_workload(case.workload), self.spec)
        self.apply = make_apply(model, case.precision)
        params, extra = init_variables(model, self.spec, setup.x_train[:1], case.seed)
        tx = make_optimizer(self.spec, setup.learning_rate)
        self.state = replicate((params, init_opt_state(tx, params, case.precision), extra), self.mesh)
        # the single-device trainer's key (seed + 1, folded with the step counter): the same dropout masks
        self.key_data = replicate(jax.random.key_data(jax.random.key(case.seed + 1)), self.mesh)
        step = keyed(make_train_step(self.spec, self.apply, tx, gb, take=take_batch,
                                     scaled=case.precision == "fp16"))
        repl, data = self.repl, self.data
        self._train = jax.jit(step, in_shardings=(repl, data, data, repl, repl, repl),
                              out_shardings=(repl, repl), donate_argnums=0)
        self._eval = jax.jit(make_eval_step(self.spec, self.apply, gb), out_shardings=repl)
        self._logits = jax.jit(lambda p, e, xs, i: self.apply(p, e, take_batch(xs, i, gb), False, None)[0],
                               out_shardings=split)
        self.order = np.arange(self.steps_per_epoch)
        self.memory = PeakMemory(list(self.mesh.devices.flat))
        self.wait_for_uploads()

    def describe(self) -> dict:
        return {**super().describe(), **data_parallel_metrics(self.mesh, self.batch)}

    def predict_eval(self):
        params, _, extra = self.state
        logits = [to_host(self._logits(params, extra, self.eval_x, np.int32(i)))
                  for i in range(self.eval_x.shape[0])]
        logits = np.concatenate(logits)[:len(self.x_eval)].astype(np.float32)
        return self.x_eval, self.y_eval, np.asarray(jax.nn.softmax(logits, -1))


class ShardedPredictor(JaxPredictor):
    """The inference Predictor (harness/inference.py) over a mesh: ``batch`` = N x per-device batch,
    each padded batch split over the devices before any clock; outputs stay split on the devices."""

    def __init__(self, fn, params, extra, x: np.ndarray, per_device_batch: int, mesh: Mesh):
        self.mesh, self.n = mesh, len(x)
        self.batch = per_device_batch * mesh.size
        split = NamedSharding(mesh, P(AXIS))
        self.batches = [global_array(b, split) for b in in_batches(np.asarray(x), self.batch)]
        self.params, self.extra = replicate((params, extra), mesh)
        repl = NamedSharding(mesh, P())
        self._fn = jax.jit(fn, in_shardings=(repl, repl, split), out_shardings=split)
        self.memory = PeakMemory(list(mesh.devices.flat))
        jax.block_until_ready((self.batches, self.params, self.extra))

    def host(self, handle) -> np.ndarray:
        return to_host(handle).astype(np.float32)


class ShardedSession(JaxSession):
    """The inference session (backends/jax_/infer.py) with a sharded trainer and predictor."""

    data_parallel = True

    def make_trainer(self, case):
        return ShardedJaxTrainer(case)

    def training_data(self) -> tuple[np.ndarray, ...]:
        return self.trainer.host_xs, self.trainer.host_ys

    def code_modules(self) -> tuple:
        import sys

        return (*super().code_modules(), sys.modules[__name__])

    def key_extra(self) -> dict:
        return {**super().key_extra(), "devices": int(self.trainer.mesh.size)}

    def make_predictor(self, fn, params, extra):
        t = self.trainer
        return ShardedPredictor(fn, params, extra, t.x_eval, t.batch, t.mesh)

    def describe(self) -> dict:
        return data_parallel_metrics(self.trainer.mesh, self.trainer.batch)



def data_parallel_metrics(mesh: Mesh, per_device_batch: int) -> dict:
    return {"devices": int(mesh.size), "per_device_batch": per_device_batch,
            "global_batch": per_device_batch * int(mesh.size), "world_size": jax.process_count(),
            "hosts": handed().hosts if jax.process_count() > 1 else 1,   # the machines, as the launcher counted them
            "parallelism": "jax.jit over a Mesh('data'): replicated parameters, batch split over devices"}
