"""JAX across processes (hosts): ``jax.distributed`` and the devices a data-parallel mesh spans.

Every process of the run (one per host as a rule) runs the same case (JAX's multi-controller model);
each worker calls ``jax.distributed.initialize`` before its first computation, so ``jax.devices()`` lists
the devices of every process and one jit-compiled program runs over all of them. The coordinator, the
process count and this process's id are the world its launcher handed it (backends/world.py), given to
JAX as they are: JAX's own detection (Slurm, Open MPI, Cloud TPU) is off, so it neither second-guesses
them nor narrows a process to one device from SLURM_LOCALID. On CPUs the cross-process collectives are
gloo's.
"""

from __future__ import annotations

import inspect

import jax
import numpy as np

from xpubench.backends.jax_.device import jax_devices, kind_of
from xpubench.backends.world import World, handed
from xpubench.devices.device import Device
from xpubench.errors import UserError

JOIN_TIMEOUT_S = 300   # how long a process waits for the others to join (jax's default)
KEY_BYTES = 512        # a case key, padded, as every process sends it to the others


def initialize(world: World | None = None) -> World:
    """Join the run's other processes (a no-op for one process); returns the world."""
    world = world or handed()
    if not world.multi or is_initialized():
        return world
    if "jax_cpu_collectives_implementation" in jax.config.values and \
            jax.config.jax_cpu_collectives_implementation in (None, "none"):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")  # older jax: no CPU collectives
    own = {"cluster_detection_method": "deactivate"} \
        if "cluster_detection_method" in inspect.signature(jax.distributed.initialize).parameters else {}
    jax.distributed.initialize(coordinator_address=world.coordinator, num_processes=world.num_processes,
                               process_id=world.process_id, initialization_timeout=JOIN_TIMEOUT_S, **own)
    if jax.process_count() != world.num_processes:
        raise RuntimeError(f"jax.distributed joined {jax.process_count()} processes, expected "
                           f"{world.num_processes}")
    return world


def join(case, world: World | None = None, gather=None) -> World:
    """``initialize``, then check that every process runs this same case (``check_same_case``): a
    process out of step would otherwise pair this case with another."""
    world = initialize(world)
    if world.multi:
        check_same_case(case.key, gather)
    return world


def check_same_case(key: str, gather=None) -> None:
    """Every process of the run runs the case ``key``, or every process raises naming each one's case.
    ``gather`` stacks one array per process (``multihost_utils.process_allgather``: a collective, so all
    processes must call it, as they do right after joining)."""
    if gather is None:
        from jax.experimental.multihost_utils import process_allgather as gather
    mine = np.frombuffer(key.encode()[:KEY_BYTES].ljust(KEY_BYTES, b"\0"), np.uint8)
    keys = [bytes(row).rstrip(b"\0").decode(errors="replace") for row in np.asarray(gather(mine))]
    if any(k != key for k in keys):
        said = "; ".join(f"process {i}: {k}" for i, k in enumerate(keys))
        raise RuntimeError(f"the processes of this multi-host run are out of step ({said}): every host must run "
                           "the same case at the same time")


def is_initialized() -> bool:
    """``jax.distributed.is_initialized()`` (jax 0.5.1+); in older jax what it reads, the global client."""
    if hasattr(jax.distributed, "is_initialized"):
        return jax.distributed.is_initialized()
    from jax._src import distributed as state

    return state.global_state.client is not None


def shutdown() -> None:
    if is_initialized():
        jax.distributed.shutdown()


def mesh_devices(device_id: str, count: int, world: World | None = None) -> list:
    """``count`` devices of the kind named by ``device_id``: the first ``count`` of this process, or
    with P processes the first count / P local devices of every process, process by process."""
    world = world or handed()
    if not world.multi:
        return jax_devices(device_id, count)
    kind = Device.parse(device_id).kind
    if count % world.num_processes:
        raise UserError(f"--devices {count} does not split over {world.num_processes} processes")
    per_process = count // world.num_processes
    chosen = []
    for process in range(jax.process_count()):
        mine = sorted((d for d in jax.devices() if d.process_index == process and kind_of(d) == kind),
                      key=lambda d: d.id)
        if len(mine) < per_process:
            raise UserError(f"process {process} has {len(mine)} {kind} device(s) for jax, "
                            f"{per_process} needed (--devices {count} over {world.num_processes} processes)")
        chosen += mine[:per_process]
    return chosen
