"""Energy counters read around the same timed windows as the throughput: joules per step, per epoch
and per sample, and samples per joule, where a counter can be read; "n/a" with the reason otherwise.

One interface (``EnergyMeter``): ``start()`` just before the first timed window, ``stop()`` just
after the last one has synchronised; ``stop()`` returns an ``EnergyReading``. Sources:

* CPUs, Linux: RAPL through powercap (``/sys/class/powercap/intel-rapl:N``, Intel and AMD since Linux
  5.8), else AMD's ``amd_energy`` hwmon driver (energy.rapl). Package domains only: the whole socket,
  so other processes' work on it is counted too, and DRAM is not.
* NVIDIA GPUs: NVML's total energy counter (nvidia-ml-py, Volta or newer) (energy.gpu).
* AMD GPUs: the AMD SMI library's energy accumulator, where ``amdsmi`` is importable (energy.gpu).
* TPUs and Apple GPUs: n/a (no counter a guest or an unprivileged process can read).

A meter never raises for a missing or unreadable counter: the reading's ``joules`` is None and
``reason`` says why (no counter in a VM, no permission, library not installed, not supported).
"""

from __future__ import annotations

from xpubench.devices.device import CPU, GPU, MPS, TPU, Device
from xpubench.energy.meter import Clock, EnergyMeter, EnergyReading, Unavailable, Unreadable

__all__ = ["Clock", "EnergyMeter", "EnergyReading", "Unavailable", "Unreadable", "energy_figures", "meter_for"]


def meter_for(device_id: str, *, vendor: str | None = None, uuid: str | None = None,
              environ=None) -> EnergyMeter:
    """The meter for an xpubench device id ("cpu", "gpu:N", "tpu:N", "mps"). ``vendor`` ("nvidia" /
    "amd", told by the framework that runs the case) picks the GPU library; ``uuid`` (torch's device
    uuid) finds the same GPU in NVML whatever the numbering, else the visible-devices variables of
    ``environ`` (default os.environ) map the framework's index to the machine's (energy/gpu.py)."""
    import os

    try:
        device = Device.parse(device_id)
    except ValueError:
        return Unavailable(f"no energy counter known for device {device_id!r}")
    if device.kind is CPU:
        from xpubench.energy.rapl import RaplMeter

        return RaplMeter()
    if device.kind is GPU:
        from xpubench.energy.gpu import AmdSmiMeter, NvmlMeter, physical_gpu

        env = os.environ if environ is None else environ
        vendor = vendor or "nvidia"
        try:
            where = uuid or physical_gpu(device.index, vendor, env)
        except Unreadable as exc:
            return Unavailable(str(exc))
        if vendor == "amd":
            return AmdSmiMeter(int(where))
        if isinstance(where, str):
            return NvmlMeter(uuid=where)
        return NvmlMeter(where, check_order=True, environ=env)
    if device.kind is TPU:
        return Unavailable("no TPU energy counter is readable from the host VM")
    if device.kind is MPS:
        return Unavailable("macOS gives GPU power only through powermetrics, which needs root")
    return Unavailable(f"no energy counter known for device {device_id!r}")   # a kind added to devices/device.py


def energy_figures(reading: EnergyReading, *, steps: int | None = None, samples: int | None = None,
                   epochs: float | None = None) -> dict:
    """The per-result figures from one reading over ``steps`` steps / ``samples`` samples / ``epochs``
    epochs (each None when not counted): joules_per_step, joules_per_epoch, joules_per_sample,
    samples_per_joule, average_watts, energy_source, energy_na (the reason, when n/a)."""
    j = reading.joules

    def per(count):
        return j / count if (j is not None and count) else None

    return {
        "energy_joules": j, "joules_per_step": per(steps), "joules_per_epoch": per(epochs),
        "joules_per_sample": per(samples), "samples_per_joule": samples / j if (j and samples) else None,
        "average_watts": reading.watts, "energy_source": reading.source,
        "energy_na": None if j is not None else f"n/a: {reading.reason}", "energy_warning": reading.warning,
    }
