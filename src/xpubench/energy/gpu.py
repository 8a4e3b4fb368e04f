"""GPU energy counters: NVML on NVIDIA (nvidia-ml-py), the AMD SMI library on AMD.

NVML: ``nvmlDeviceGetTotalEnergyConsumption`` gives the board's energy in millijoules since the
driver was loaded (Volta and newer; older GPUs answer NVML_ERROR_NOT_SUPPORTED, and then the figure
is n/a: xpubench does not integrate sampled power instead). The counter is refreshed every 20-100 ms,
so a region shorter than ``MIN_NVML_S`` gets a warning. It counts the whole GPU, other processes'
work on it included. The GPU is found by UUID when the caller has it (torch's device uuid: NVML's
order need not be CUDA's), else by index.

AMD SMI: ``amdsmi_get_energy_count`` gives an accumulator and its resolution in microjoules per
tick (key "energy_accumulator"; "power" in older releases); not supported in a VM guest. The handle
is taken by index in ``amdsmi_get_processor_handles()``, whose order is assumed to be HIP's.

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


class NvmlMeter(EnergyMeter):
    def __init__(self, index: int = 0, uuid: str | None = None, module: ModuleType | None = None,
                 clock: Clock = time.monotonic):
        super().__init__(clock)
        self.index, self.uuid, self._module = index, uuid, module
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
