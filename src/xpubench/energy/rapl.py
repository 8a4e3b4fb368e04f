"""CPU package energy on Linux: RAPL through powercap, else AMD's amd_energy hwmon driver.

powercap (Intel; AMD since Linux 5.8): ``/sys/class/powercap/intel-rapl:N`` is package N, with
``name`` ("package-N"), ``energy_uj`` (a counter in microjoules) and ``max_energy_range_uj`` (where it
wraps to 0). Sub-zones ``intel-rapl:N:M`` (core, uncore, dram) and ``psys`` (the whole platform on
some laptops) are not summed: core is inside the package, psys would count the package twice, and
DRAM is not on every machine. A counter read lower at stop than at start wrapped once:
delta = end + range - start. An interval long enough to wrap twice (range / power: ~20 minutes for
a 262 kJ range at 200 W) would be under-counted; the harness's timed regions are far shorter.

Since Linux 5.10 ``energy_uj`` is readable by root only (CVE-2020-8694, the PLATYPUS attack), so an
ordinary user gets "n/a: no permission"; a VM usually has no powercap zone at all.

amd_energy (out-of-tree / older kernels, AMD family 17h/19h): ``/sys/class/hwmon/hwmonK`` with
``name`` "amd_energy", ``energyJ_label`` "Esocket0" and ``energyJ_input`` in microjoules, accumulated
by the driver in 64 bits (no wrap). Socket counters are summed; core counters are inside them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from xpubench.energy.meter import Clock, EnergyMeter, Unreadable

POWERCAP = Path("/sys/class/powercap")
HWMON = Path("/sys/class/hwmon")
_PACKAGE_ZONE = re.compile(r"intel-rapl:\d+")


def _default_read(path: Path) -> str:
    return path.read_text()


class RaplMeter(EnergyMeter):
    """Sum of the CPU package counters; ``read_text`` is swappable so tests can simulate a file that
    refuses to be read even when they run as root."""

    def __init__(self, powercap: Path = POWERCAP, hwmon: Path = HWMON,
                 read_text: Callable[[Path], str] = _default_read, clock: Clock = time.monotonic):
        super().__init__(clock)
        self._read_text = read_text
        self._counters: dict[str, tuple[Path, float | None]] = {}   # domain -> (file, wrap range in uJ)
        self._none_reason: str | None = None
        self._find(Path(powercap), Path(hwmon))

    def _text(self, path: Path) -> str:
        try:
            return self._read_text(path).strip()
        except PermissionError:
            raise Unreadable(f"no permission to read {path} (RAPL counters are root-only since Linux 5.10; "
                             "run as root or have the administrator grant read access)") from None
        except OSError as exc:
            raise Unreadable(f"cannot read {path}: {exc.strerror or exc}") from None

    def _find(self, powercap: Path, hwmon: Path) -> None:
        try:
            for zone in sorted(p for p in powercap.glob("intel-rapl:*") if _PACKAGE_ZONE.fullmatch(p.name)):
                name = self._text(zone / "name")
                if name.startswith("package"):
                    wrap = self._text(zone / "max_energy_range_uj") if (zone / "max_energy_range_uj").exists() else None
                    self._counters[f"{zone.name} {name}"] = (zone / "energy_uj", float(wrap) if wrap else None)
            if not self._counters:
                for mon in sorted(hwmon.glob("hwmon*")):
                    if (mon / "name").exists() and self._text(mon / "name") == "amd_energy":
                        for label in sorted(mon.glob("energy*_label")):
                            text = self._text(label)
                            if text.startswith("Esocket"):
                                self._counters[f"{mon.name} {text}"] = (mon / label.name.replace("_label", "_input"),
                                                                         None)
        except (Unreadable, ValueError) as exc:
            self._counters, self._none_reason = {}, str(exc)
            return
        if self._counters:
            kind = "amd_energy" if any(" Esocket" in k for k in self._counters) else "rapl"
            self.source = f"{kind}: " + " + ".join(k.split(" ", 1)[1] for k in self._counters)
        else:
            self._none_reason = (f"no CPU energy counter: no RAPL package zone under {powercap} and no amd_energy "
                                 f"hwmon (usual in a VM)")

    def _read(self) -> dict[str, float]:
        if not self._counters:
            raise Unreadable(self._none_reason or "no CPU energy counter")
        out = {}
        for domain, (path, _) in self._counters.items():
            text = self._text(path)
            try:
                out[domain] = float(int(text))
            except ValueError:
                raise Unreadable(f"{path} holds {text[:20]!r}, not a counter") from None
        return out

    def _delta(self, name: str, start: float, end: float) -> float:
        wrap = self._counters[name][1]
        moved = end - start if end >= start or not wrap else end + wrap - start
        return moved / 1e6     # microjoules -> joules
