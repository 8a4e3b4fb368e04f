"""PyTorch data parallel: DistributedDataParallel over N processes, one per device.

The worker of a case (itself a fresh process) starts the ranks with torchrun's own engine,
``torch.distributed.launcher.elastic_launch`` (what the ``torchrun`` command runs): N spawned
processes, a c10d rendezvous, error files naming the rank that failed first. Each rank joins the
process group (gloo on CPU, nccl on CUDA), wraps the model in ``DistributedDataParallel`` and trains
on its own slice of every global batch (``TorchTrainer(world_size, rank)``); DDP averages the
gradients over the ranks inside ``backward()``, so every rank finishes a step only when all have
contributed to it. The shared timing loop (``harness/training.py``) runs on every rank; rank 0's
figures are the case's. A barrier (untimed) starts every epoch on all ranks together, and every rank
runs the (untimed) validation pass, so no rank's step waits for another's evaluation.

CPU: one process per core; each rank is pinned to its own cores and runs cores / N threads (as
torchrun's OMP_NUM_THREADS=1 for one core each) -- N processes with the default thread count would
fight over the same cores. In a run over P processes (the world its launcher hands the worker,
backends/world.py) each process's worker is one node of P (``N / P`` ranks each), rendezvousing at
process 0's address, process 0 hosting the store; the rendezvous id is the case's run id, so every case
forms a fresh group.

The ranks are children of the worker in its process group: the runner's timeout kills them with it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from xpubench.backends.torch_.device import torch_device
from xpubench.backends.torch_.train import TorchTrainer
from xpubench.backends.world import World, handed
from xpubench.devices.device import CPU, GPU, Device
from xpubench.errors import UserError

LAUNCHER = "torch.distributed elastic_launch (torchrun's engine), c10d rendezvous"
JOIN_TIMEOUT_S = 300


class DDPTrainer(TorchTrainer):
    """TorchTrainer whose epochs start together on every rank (an untimed barrier)."""

    def start_epoch(self, epoch: int) -> None:
        super().start_epoch(epoch)
        dist.barrier()


def rank_layout(local_rank: int, local_world: int, cores: list[int]) -> tuple[list[int] | None, int]:
    """(cores this rank is pinned to or None, its thread count): the usable cores split evenly."""
    if len(cores) < local_world:
        return None, 1
    per = len(cores) // local_world
    return cores[local_rank * per:(local_rank + 1) * per], per


def device_id_kwargs(version: str, gpu: int) -> dict:
    """``device_id`` for init_process_group (binds the NCCL communicator to the rank's GPU; torch >= 2.3,
    the floor pyproject asks for), except on the releases where it makes NCCL hang at random
    (2.6.0 < torch < 2.7.1: pytorch/pytorch#153960); ``torch.cuda.set_device`` binds the rank there."""
    release = tuple(int(p) for p in re.findall(r"\d+", version.split("+")[0])[:3])
    if (2, 6, 0) < release < (2, 7, 1):
        return {}
    return {"device_id": torch.device("cuda", gpu)}


def _rank_main(case_dict: dict, first_error: str, entry, args: tuple):
    """Runs in every rank: bind the device (CPU cores or one GPU), join the group, run ``entry``."""
    from xpubench.case import Case

    case = Case.from_dict(case_dict)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    info = {"rank": rank, "world_size": world}
    device = Device.parse(case.device)
    if device.kind is GPU:
        gpu = device.index + local_rank
        torch.cuda.set_device(gpu)
        case = case.__class__.from_dict({**case.as_dict(), "device": str(Device(GPU, gpu))})
        dist.init_process_group("nccl", **device_id_kwargs(torch.__version__, gpu))
        info["ddp_backend"] = "nccl"
    else:
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        pinned, threads = rank_layout(local_rank, local_world, cores)
        if pinned:
            os.sched_setaffinity(0, pinned)
        torch.set_num_threads(threads)
        dist.init_process_group("gloo")
        info.update(ddp_backend="gloo", threads_per_process=threads,
                    pinned_cores=",".join(map(str, pinned)) if pinned else None)
    try:
        result = entry(case, rank, world, *args)
        dist.barrier()
    except BaseException as exc:
        _note_first_error(first_error, rank, exc)   # before this rank's connections close
        raise
    finally:
        dist.destroy_process_group()
    return rank, info, result


def launch(case, entry, *args, world: World | None = None) -> dict[int, tuple]:
    """``entry(case, rank, world_size, *args)`` on every rank of a fresh group of ``case.devices``
    processes (over all of the run's processes); returns {rank: (rank, info, entry's value)} for this
    process's ranks."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    world = world or handed()
    nodes = world.num_processes
    if case.devices % nodes:
        raise UserError(f"--devices {case.devices} does not split over {nodes} processes")
    rdzv = {"join_timeout": JOIN_TIMEOUT_S}
    if world.multi:
        rdzv["is_host"] = world.process_id == 0  # process 0 hosts the rendezvous store
    config = LaunchConfig(
        min_nodes=nodes, max_nodes=nodes, nproc_per_node=case.devices // nodes, run_id=case.run_id,
        rdzv_backend="c10d", rdzv_endpoint=world.coordinator if world.multi else "127.0.0.1:0",
        rdzv_configs=rdzv, max_restarts=0, monitor_interval=0.1, start_method="spawn")
    with tempfile.TemporaryDirectory(prefix="xpubench-ddp-") as tmp:
        first_error = Path(tmp) / "first_error.txt"
        try:
            returned = elastic_launch(config, _rank_main)(case.as_dict(), str(first_error), entry, args)
        except ChildFailedError as exc:
            raise_failure(exc, first_error, case.device)
    return {value[0]: value for value in returned.values()}


def raise_failure(exc, first_error: Path, device: str = "cpu"):
    """Raise one line naming the rank that failed first and why. Once a rank fails its peers fail too
    (their collectives lose the connection) and torchelastic may report one of those; so the first
    rank to raise writes its error to ``first_error`` before its connections close. A user error (a
    corrupt data file) stays one (exit 2); an out-of-memory stays one (status oom) of the right kind:
    a rank killed by SIGKILL is host memory, a rank's "CUDA out of memory" on ``device`` device memory
    (``worker.OutOfMemory`` carries the kind decided from the rank's own error type and message)."""
    from xpubench.harness.failures import USER_ERRORS, OutOfMemory, classify_exception, oom_kind_of

    rank, failure = exc.get_first_failure()
    if failure.exitcode == -9:
        raise OutOfMemory(f"rank {rank} was killed by SIGKILL (the kernel's OOM killer, most likely)",
                          kind="host") from None
    if first_error.exists():
        first = json.loads(first_error.read_text())
        said = f"{first['type']}: {first['message']}" if first["message"] else first["type"]
        if first["type"] in USER_ERRORS:
            raise UserError(first["message"]) from None
        if first["oom"]:
            raise OutOfMemory(f"rank {first['rank']} ran out of memory: {said}",
                              kind=oom_kind_of(first["type"], first["message"], device)) from None
        raise RuntimeError(f"rank {first['rank']} failed: {said}") from None
    message = failure.message.get("message", "") if isinstance(failure.message, dict) else failure.message
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    error = RuntimeError(f"rank {rank} failed: {lines[-1] if lines else f'exit code {failure.exitcode}'}")
    if classify_exception(error) == "oom":
        said_type = "MemoryError" if re.search(r"\bMemoryError\b", str(error)) else "RuntimeError"
        raise OutOfMemory(str(error), kind=oom_kind_of(said_type, str(error), device)) from None
    raise error from None


def _note_first_error(first_error: str, rank: int, exc: BaseException) -> None:
    from xpubench.harness.failures import classify_exception

    try:
        fd = os.open(first_error, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError:
        return  # another rank was first
    with os.fdopen(fd, "w") as fh:
        json.dump({"rank": rank, "type": type(exc).__name__, "oom": classify_exception(exc) == "oom",
                   "message": (str(exc).strip().splitlines() or [""])[0][:500]}, fh)


def ddp_trainer(case, rank: int, world: int) -> DDPTrainer:
    """Rank ``rank``'s trainer: its model wrapped in DistributedDataParallel, its slice of every batch."""
    device = torch_device(case.device)
    ids = [device.index] if device.type == "cuda" else None
    return DDPTrainer(case, world_size=world, rank=rank,
                      wrap=lambda model: DistributedDataParallel(model, device_ids=ids))


def check_devices(case, world: World) -> None:
    """Refuse what DDP cannot run here before any process starts (one line)."""
    device = Device.parse(case.device)
    local = case.devices // world.num_processes
    if device.kind is GPU:
        start = device.index
        torch_device(case.device)
        if torch.cuda.device_count() < start + local:
            raise UserError(f"--devices {case.devices}: this host has {torch.cuda.device_count()} CUDA "
                            f"device(s) from gpu:{start}, {local} needed")
    elif device.kind is not CPU:
        raise UserError(f"DistributedDataParallel runs on cpu (gloo) and CUDA GPUs (nccl), not on {case.device}")


def run(case, train):
    """A data-parallel training case (``case.devices`` > 1): ``train(case, rank, world)`` (the harness's
    launch.dispatch.train_one, module level so a spawned rank finds it) on every rank; rank 0's outcome
    (or this host's first rank's) with the data-parallel layout added."""
    world = handed()
    check_devices(case, world)
    ranks = launch(case, train, world=world)
    _, info, outcome = ranks[min(ranks)]
    outcome.metrics.update(info)
    outcome.metrics.update({
        "devices": case.devices, "per_device_batch": case.batch_size, "hosts": world.hosts if world.multi else 1,
        "parallelism": f"DistributedDataParallel; {LAUNCHER}"})
    return outcome
