"""What each backend and device gets by default: the devices a request names per backend, the matmul
dtypes, the model precisions and a workload's batch sizes on that device. Only the environment
record is read (this machine's, or another one's from ``--env-file``)."""

from __future__ import annotations

from xpubench import backends as registry
from xpubench.backends import device_backend
from xpubench.devices.device import is_accelerator
from xpubench.devices.precisions import fp16_problem, training_half
from xpubench.devices.records import tf32_problem
from xpubench.errors import UserError


def backend_ids() -> list[str]:
    """Every backend id a request may name (backends/: each record's name and variants)."""
    return registry.every_id()


def default_backends() -> list[str]:
    """The backends planned when no -b is given (each record's ``in_default_run``)."""
    return [name for name in registry.names() if registry.get(name).in_default_run]


def _backend_installed(env: dict, backend: str) -> bool:
    return registry.known(backend) and registry.get(backend).installed(env, backend)


def default_backends_here(env: dict) -> list[str]:
    """The backends a request without -b plans here: the default ones installed with every module their
    workers import (``left_out_backends`` says why another is not)."""
    return [b for b in default_backends() if _backend_installed(env, b) and not registry.get(b).missing(env)]


def incomplete_backends(env: dict) -> dict[str, str]:
    """{backend: why} of the default backends installed here that a request without -b leaves out, because
    a module their workers import is missing (``Backend.missing``: the module and the command that installs
    it): the plan's note, `xpubench doctor`'s FAIL row."""
    return {b: registry.get(b).missing(env) for b in default_backends()
            if _backend_installed(env, b) and registry.get(b).missing(env)}


def left_out_backends(env: dict) -> list[str]:
    return [f"no {b} cases: {why}" for b, why in incomplete_backends(env).items()]


def expand_backends(env: dict, backends: list[str] | None) -> list[str] | None:
    """A backend with variants named bare (-b keras) -> every one of its variants installed here (keras:jax,
    keras:torch, keras:tensorflow); refused in one line when none is."""
    if not backends:
        return backends
    out = []
    for name in backends:
        record = registry.get(name) if registry.known(name) else None
        if record is None or not record.variants or ":" in name:
            out.append(name)
            continue
        found = record.ids(env)
        if not found:
            missing = (name if not record.installed(env, name) else
                       f"{', '.join(record.variants)} for it to run on")
            raise UserError(f"backend {name!r} needs {record.title} and a framework to run on; missing here: "
                            f"{missing} (pip install 'xpubench[{name}]')")
        out += found
    return out


def default_devices(env: dict, backend: str) -> list[str]:
    """Every kind of device the backend sees, first device of each kind (multi-device is --devices N)."""
    seen: dict[str, str] = {}
    for dev in env.get("backends", {}).get(device_backend(backend), {}).get("devices", []):
        seen.setdefault(dev["kind"], dev["id"])
    return list(seen.values())


def _device_record(env: dict, backend: str, device: str) -> dict:
    for dev in env.get("backends", {}).get(device_backend(backend), {}).get("devices", []):
        if dev["id"] == device:
            return dev
    return {}


def device_memory(env: dict, backend: str, device: str) -> int | None:
    """The device's memory in bytes as the environment record says (a CPU: the host's), or None."""
    memory = _device_record(env, backend, device).get("memory_bytes")
    return memory if isinstance(memory, int) and memory > 0 else None


def slow_cpu_dtypes(env: dict, backend: str, device: str) -> list[str]:
    """Half dtypes left out of the default matmul sweep here (still run when asked for by name): those the
    framework that runs the case computes slowly on this CPU (its record's ``slow_cpu_dtypes``)."""
    return registry.get(device_backend(backend)).slow_cpu_dtypes(env, device)


def has_tf32(env: dict, backend: str, device: str) -> bool:
    record = _device_record(env, backend, device)
    return tf32_problem(record.get("kind"), record.get("vendor"), record.get("compute_capability")) is None


def matmul_dtypes(env: dict, backend: str, device: str) -> list[str]:
    """The default matmul sweep: the backend's matmul dtypes, less the slow ones on this CPU and fp16 where
    the chip has none; tf32 beside fp32 where the chip has it and the backend runs it."""
    record = registry.get(backend)
    kind = _device_record(env, backend, device).get("kind")
    dtypes = [d for d in record.default_matmul_dtypes(env, backend, device)
              if d not in slow_cpu_dtypes(env, backend, device)
              and not (d == "fp16" and fp16_problem(kind))]   # a TPU's "fp16" would run as bf16
    if "tf32" in record.precisions and "fp32" in dtypes and has_tf32(env, backend, device):
        dtypes.insert(dtypes.index("fp32") + 1, "tf32")
    return dtypes


def model_precisions(env: dict, backend: str, device: str) -> list[str]:
    """The default precisions of a model workload: fp32 on a CPU; on an accelerator fp32, tf32 where the
    chip has it (NVIDIA, compute capability >= 8.0) and its 16-bit training format
    (devices/precisions.py training_half): bf16; fp16 on NVIDIA GPUs before Ampere, whose tensor cores
    (and PyTorch's autocast) have no bf16, and on Apple M1/M2 GPUs, whose bf16 is emulated (none there
    with a torch whose GradScaler cannot run on MPS: ``half_precision_note`` says so)."""
    if not is_accelerator(device):
        return ["fp32"]
    half, _ = _training_half(env, backend, device)
    return ["fp32", *(["tf32"] if has_tf32(env, backend, device) else []), *([half] if half else [])]


def _training_half(env: dict, backend: str, device: str) -> tuple[str | None, str | None]:
    problem = registry.get(device_backend(backend)).fp16_training_problem(env, device)
    return training_half(_device_record(env, backend, device), problem)


def half_precision_note(env: dict, backend: str, device: str) -> str | None:
    """Why the default 16-bit training precision of an accelerator is not bf16 here (said before a run),
    or None."""
    if not is_accelerator(device):
        return None
    _, note = _training_half(env, backend, device)
    return f"{backend} {device}: {note}" if note else None


QUICK_CPU_STEPS = 2        # the brief run's steps per epoch on a CPU (every step is synchronised and timed)
QUICK_ACCEL_STEPS = 25     # ... on an accelerator, whose steady epochs are pipelined (one sync at the end):
# an epoch then costs the first dispatch + N device steps + the final sync, so a step sample is
# D + (dispatch + sync) / N. With a dispatch as long as a device step and a sync of a fifth of one
# that is within 5% of the device's step time from N = 25 on, and 60% off at N = 2
# (tests/test_accelerator_round2.py runs the training loop on a fake asynchronous device with a launch
# cost and measures it). A host slower than the device is measured as it is: launch-bound.


def quick_steps(device: str) -> int:
    """Steps per epoch of a brief run's training case on this device (QUICK_CPU_STEPS / QUICK_ACCEL_STEPS)."""
    return QUICK_ACCEL_STEPS if is_accelerator(device) else QUICK_CPU_STEPS


def default_batch_sizes(workload, spec, mode: str, device: str = "cpu", quick: bool = False,
                        to_target: bool = False) -> list[int]:
    """The batch sizes of a workload's cases of one mode when ``--batch-size`` names none, the one rule
    (``plan._cases_for`` plans them, `xpubench list` shows them; ``spec``: the workload's for the case's
    options):
    - a workload that is its own measurement (the selftest): a batch of 1;
    - generation: the workload's generation sweep (``generation_batch_sizes``) where it has one;
    - a brief case (``quick``): one, the workload's small quick batch on a CPU; on an accelerator its
      largest default batch (a quick batch of 4-16 only measures kernel launch latency there);
    - else the spec's, ascending (an OOM at B skips the larger ones after it); to a quality target only
      the first (a run to a target is long: sweep batch sizes on purpose)."""
    if workload.run is not None:
        return [1]
    if mode == "generate" and workload.generation_batch_sizes:
        return list(workload.generation_batch_sizes)
    if quick:
        return [max(spec.batch_sizes) if is_accelerator(device) else spec.quick_batch_size]
    return sorted(spec.batch_sizes)[:1 if to_target else None]


def choose_devices(env: dict, backends: list[str] | None, devices: list[str] | None,
                   implicit: bool | None = None) -> dict[str, list[str]]:
    """{backend: device ids} for ``backends`` (default: every installed one) and ``devices`` (device
    spellings; default: the first device of each kind). ``implicit`` (default: no backends named) drops
    the devices a backend lacks instead of refusing them (``_devices_for``)."""
    chosen = backends or default_backends_here(env)
    implicit = not backends if implicit is None else implicit
    return {backend: _devices_for(env, backend, devices, implicit) for backend in chosen}


def _devices_for(env: dict, backend: str, devices: list[str] | None, implicit: bool) -> list[str]:
    """The device ids of the request for one backend. Backends the user named must have every device
    asked for (else one line); backends chosen by default (no -b) drop the devices they lack, and only
    a device that no installed backend has is refused."""
    from xpubench.devices.detect import resolve_device

    if not _backend_installed(env, backend):
        raise UserError(f"backend {backend!r} is not installed; {registry.get(backend).install_hint()}")
    missing = registry.get(backend).missing(env)   # a worker would stop at its import: refused here, with the fix
    if missing:
        raise UserError(missing)
    if not devices:
        return default_devices(env, backend)
    if not implicit:
        return list(dict.fromkeys(resolve_device(env, device_backend(backend), d) for d in devices))
    found = []
    for spelling in devices:
        try:
            found.append(resolve_device(env, device_backend(backend), spelling))
        except UserError:
            _check_someone_has(env, spelling)
    return list(dict.fromkeys(found))


def _check_someone_has(env: dict, spelling: str) -> None:
    """Refuse a device spelling no installed backend resolves (one line naming what each one has)."""
    from xpubench.devices.detect import resolve_device

    installed = [b for b in default_backends() if _backend_installed(env, b)]
    errors = []
    for backend in installed:
        try:
            resolve_device(env, backend, spelling)
            return
        except UserError as exc:
            errors.append(str(exc))
    if len(errors) == 1:
        raise UserError(errors[0])
    said = "; ".join(e.removeprefix(f"device {spelling!r} is not available to ").replace(" on this machine", "")
                     for e in errors)
    raise UserError(f"device {spelling!r} is not available to any installed backend: {said}")

