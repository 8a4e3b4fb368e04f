"""GPU energy counters: NVML on NVIDIA (nvidia-ml-py), the AMD SMI library on AMD.

NVML: ``nvmlDeviceGetTotalEnergyConsumption`` gives the board's energy in millijoules since the
driver was loaded (Volta and newer; older GPUs answer NVML_ERROR_NOT_SUPPORTED, and then the figure
is n/a: xpubench does not integrate sampled power instead). The counter is refreshed every 20-100 ms,
so a region shorter than ``MIN_NVML_S`` gets a warning. It counts the whole GPU, other processes'
work on it included.

Which board: NVML numbers every GPU of the machine in PCI bus order and ignores CUDA_VISIBLE_DEVICES,
while a framework's gpu:0 is the first *visible* GPU (with CUDA_VISIBLE_DEVICES=4, physical GPU 4).
So the GPU is found by its UUID when the framework gives one (torch's ``get_device_properties(i).uuid``,
``nvmlDeviceGetHandleByUUID``), else through the visible-devices list (``physical_gpu``: an index or a
UUID there); an index is trusted only where CUDA's order is NVML's (``CUDA_DEVICE_ORDER=PCI_BUS_ID``, or
every GPU the same model, where CUDA's default fastest-first order falls back to PCI order), else n/a.

AMD SMI: ``amdsmi_get_energy_count`` gives an accumulator and its resolution in microjoules per
tick (key "energy_accumulator"; "power" in older releases); not supported in a VM guest. The handle
is taken by index in ``amdsmi_get_processor_handles()`` (assumed to be the ROCm runtime's physical
order), the index mapped through ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES (``physical_gpu``).

These paths were written against the libraries' documented APIs and tested with fake modules that
behave like them (tests/test_energy.py); they have not run on a real GPU here.
"""

from __future__ import annotations

import importlib
import time
from types import ModuleType

from xpubench.energy.meter import Clock, EnergyMeter, Unreadable

MIN_NVML_S = 1.0


def _import(name: str, install: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise Unreadable(f"{name} is not installed (pip install {install})") from None


def physical_gpu(index: int, vendor: str, environ) -> int | str:
    """The machine-wide index (or the UUID) of a framework's ``gpu:index``, through the visible-devices
    variables: CUDA_VISIBLE_DEVICES (NVIDIA); on AMD, HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES, which
    HIP also reads) picks among the GPUs ROCR_VISIBLE_DEVICES left, which picks among the machine's.
    Raises Unreadable where a list cannot be followed (a UUID in an AMD list, a list too short)."""
    if vendor == "amd":
        names = ("HIP_VISIBLE_DEVICES" if "HIP_VISIBLE_DEVICES" in environ else "CUDA_VISIBLE_DEVICES",
                 "ROCR_VISIBLE_DEVICES")
    else:
        names = ("CUDA_VISIBLE_DEVICES",)
    for name in names:
        value = environ.get(name)
        if value is not None:
            entries = [e.strip() for e in value.split(",") if e.strip()]
            if index >= len(entries):
                raise Unreadable(f"{name}={value} lists no GPU {index}")
            entry = entries[index]
            if entry.isdigit():
                index = int(entry)          # the next list (if any) picks among these
            elif vendor == "nvidia" and entry.startswith(("GPU-", "MIG-")):
                return entry
            else:
                raise Unreadable(f"cannot follow {name}={value} to a physical GPU (entry {entry!r})")
    return index


class NvmlMeter(EnergyMeter):
    """NVML's energy counter of one board: by ``uuid``, else by the machine-wide ``index``
    (``check_order``: only where CUDA's numbering is NVML's, see the module docstring)."""

    def __init__(self, index: int = 0, uuid: str | None = None, module: ModuleType | None = None,
                 clock: Clock = time.monotonic, check_order: bool = False, environ=None):
        super().__init__(clock)
        self.index, self.uuid, self._module = index, uuid, module
        self.check_order, self._environ = check_order, environ
        self.source = f"nvml: gpu {uuid or index} total energy counter"
        self._nvml: ModuleType | None = None
        self._handle = None

    def _open(self) -> None:
        nvml = self._module or _import("pynvml", "'xpubench[nvidia]' (nvidia-ml-py)")
        try:
            nvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError subclasses; a missing driver included
            raise Unreadable(f"NVML did not start: {exc}") from None
        self._nvml = nvml
        try:
            if self.uuid:
                uuid = self.uuid if self.uuid.startswith(("GPU-", "MIG-")) else f"GPU-{self.uuid}"
                self._handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            else:
                self._handle = nvml.nvmlDeviceGetHandleByIndex(self.index)
        except Exception as exc:  # noqa: BLE001
            self._close()
            raise Unreadable(f"NVML has no GPU {self.uuid or self.index}: {exc}") from None
        if self.check_order and not self.uuid:
            problem = self._order_problem(nvml)
            if problem:
                self._close()
                raise Unreadable(problem)

    def _order_problem(self, nvml) -> str | None:
        """Why NVML's index may not be CUDA's here: different GPU models without PCI_BUS_ID order."""
        import os

        env = os.environ if self._environ is None else self._environ
        if env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID":
            return None
        try:
            names = {str(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i)))
                     for i in range(nvml.nvmlDeviceGetCount())}
        except Exception as exc:  # noqa: BLE001
            return f"NVML could not list the GPUs to match CUDA's numbering: {exc}"
        if len(names) > 1:
            return ("this machine mixes GPU models, so CUDA's fastest-first numbering need not be NVML's: set "
                    "CUDA_DEVICE_ORDER=PCI_BUS_ID to read energy by index")
        return None

    def _close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None

    def _read(self) -> dict[str, float]:
        try:
            millijoules = self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)
        except Exception as exc:  # noqa: BLE001
            self._close()
            not_supported = type(exc).__name__ == "NVMLError_NotSupported"
            raise Unreadable("this GPU has no energy counter (NVML: not supported; it needs Volta or newer)"
                             if not_supported else f"NVML could not read the energy counter: {exc}") from None
        return {"gpu": float(millijoules)}

    def _delta(self, name: str, start: float, end: float) -> float:
        return (end - start) / 1e3     # millijoules -> joules

    def _warning(self, seconds: float) -> str | None:
        if seconds < MIN_NVML_S:
            return (f"measured over {seconds:.2f} s; NVML refreshes its energy counter every 20-100 ms, so the "
                    "figure is coarse")
        return None


class AmdSmiMeter(EnergyMeter):
    def __init__(self, index: int = 0, module: ModuleType | None = None, clock: Clock = time.monotonic):
        super().__init__(clock)
        self.index, self._module = index, module
        self.source = f"amdsmi: gpu {index} energy accumulator"
        self._smi: ModuleType | None = None
        self._handle = None

    def _open(self) -> None:
        smi = self._module or _import("amdsmi", "amdsmi (ships with ROCm)")
        try:
            smi.amdsmi_init()
        except Exception as exc:  # noqa: BLE001 - AmdSmiException and friends
            raise Unreadable(f"AMD SMI did not start: {exc}") from None
        self._smi = smi
        handles = smi.amdsmi_get_processor_handles()
        if self.index >= len(handles):
            self._close()
            raise Unreadable(f"AMD SMI sees {len(handles)} GPU(s), not gpu {self.index}")
        self._handle = handles[self.index]

    def _close(self) -> None:
        if self._smi is not None:
            self._smi.amdsmi_shut_down()
            self._smi = None

    def _read(self) -> dict[str, float]:
        try:
            count = self._smi.amdsmi_get_energy_count(self._handle)
        except Exception as exc:  # noqa: BLE001
            self._close()
            raise Unreadable(f"AMD SMI could not read the energy counter (not supported in a VM guest): "
                             f"{exc}") from None
        ticks = count.get("energy_accumulator", count.get("power"))
        resolution = count.get("counter_resolution")
        if ticks is None or not resolution:
            self._close()
            raise Unreadable(f"AMD SMI returned no energy accumulator ({sorted(count)})")
        return {"gpu": float(ticks) * float(resolution)}

    def _delta(self, name: str, start: float, end: float) -> float:
        return (end - start) / 1e6     # microjoules -> joules
