"""A rank of a DDP case that runs out of memory makes the case `oom` of the right kind: a GPU rank's
"CUDA out of memory" is device memory (not host memory, as a plain MemoryError would say), a rank
killed by SIGKILL is host memory. Unit level: torchelastic's real ChildFailedError, no processes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from xpubench.backends.torch_ import ddp
from xpubench.errors import UserError
from xpubench.harness.failures import OutOfMemory, outcome_of_exception

CUDA_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.11 GiB total capacity; 77.20 GiB "
            "already allocated; 612.00 MiB free)")


def child_failed(tmp_path, exitcode: int, message: str | None = None, rank: int = 1) -> ChildFailedError:
    """What elastic_launch raises: the failure of ``rank``, with torchelastic's error file if it wrote one."""
    error_file = tmp_path / f"error-{rank}.json"
    if message is not None:
        error_file.write_text(json.dumps({"message": {"message": message, "extraInfo": {
            "py_callstack": "Traceback (most recent call last): ...", "timestamp": "1700000000"}}}))
    failure = ProcessFailure(local_rank=rank, pid=4242, exitcode=exitcode, error_file=str(error_file))
    return ChildFailedError("_rank_main", {rank: failure})


def failure_outcome(exc: ChildFailedError, first_error, device: str):
    """raise_failure as launch() calls it, and the case's outcome as the worker then records it."""
    with pytest.raises(Exception) as raised:
        try:
            raise exc
        except ChildFailedError as caught:
            ddp.raise_failure(caught, first_error, device)
    try:
        raise raised.value
    except type(raised.value) as err:
        return raised.value, outcome_of_exception(err, device)


def test_a_gpu_rank_out_of_device_memory_is_device_oom(tmp_path):
    torch = pytest.importorskip("torch")
    first_error = tmp_path / "first_error.txt"
    ddp._note_first_error(str(first_error), 1, torch.OutOfMemoryError(CUDA_OOM))  # what the rank writes
    err, outcome = failure_outcome(child_failed(tmp_path, 1, f"OutOfMemoryError: {CUDA_OOM}"), first_error, "gpu:0")
    assert isinstance(err, OutOfMemory) and err.kind == "device"
    assert outcome.status == "oom"
    assert outcome.message.startswith("device out of memory: ")
    assert ("rank 1 ran out of memory: OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 2.00 GiB") in outcome.message
    # the same failure text in a cpu case is host memory
    _, outcome = failure_outcome(child_failed(tmp_path, 1), first_error, "cpu")
    assert outcome.message.startswith("host out of memory: rank 1 ran out of memory")


def test_a_gpu_rank_out_of_host_memory_stays_host_oom(tmp_path):
    first_error = tmp_path / "first_error.txt"
    ddp._note_first_error(str(first_error), 0, MemoryError("Unable to allocate 64.0 GiB for an array"))
    err, outcome = failure_outcome(child_failed(tmp_path, 1, rank=0), first_error, "gpu:0")
    assert err.kind == "host" and outcome.message.startswith("host out of memory: rank 0 ran out of memory")


def test_a_rank_killed_by_sigkill_is_host_oom_even_on_a_gpu(tmp_path):
    err, outcome = failure_outcome(child_failed(tmp_path, -9), tmp_path / "none.txt", "gpu:0")
    assert err.kind == "host" and outcome.status == "oom"
    assert outcome.message.startswith("host out of memory: ")
    assert "rank 1 was killed by SIGKILL" in outcome.message


def test_without_the_first_error_file_torchelastic_s_message_decides(tmp_path):
    missing = tmp_path / "none.txt"
    _, outcome = failure_outcome(child_failed(tmp_path, 1, f"torch.OutOfMemoryError: {CUDA_OOM}"), missing, "gpu:0")
    assert outcome.status == "oom" and outcome.message.startswith("device out of memory: ")
    _, outcome = failure_outcome(child_failed(tmp_path, 1, "MemoryError: std::bad_alloc"), missing, "gpu:0")
    assert outcome.status == "oom" and outcome.message.startswith("host out of memory: ")
    err, outcome = failure_outcome(child_failed(tmp_path, 1, "ValueError: bad shape"), missing, "gpu:0")
    assert type(err) is RuntimeError and outcome.status == "error"
    assert outcome.message == "RuntimeError: rank 1 failed: ValueError: bad shape"


def test_other_failures_keep_their_kind(tmp_path):
    first_error = tmp_path / "first_error.txt"
    first_error.write_text(json.dumps({"rank": 0, "type": "UserError", "oom": False,
                                       "message": "DIR/data_batch_1.bin is truncated"}))
    err, outcome = failure_outcome(child_failed(tmp_path, 1), first_error, "gpu:0")
    assert isinstance(err, UserError) and outcome.message == "DIR/data_batch_1.bin is truncated"
