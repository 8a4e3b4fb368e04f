"""Energy readers: RAPL on a powercap tree the test writes in the sysfs format (wrap-around, a file that
cannot be read), amd_energy hwmon, NVML and AMD SMI through fake modules, and the derived figures."""

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from xpubench.energy import EnergyReading, Unavailable, energy_figures, meter_for
from xpubench.energy.gpu import AmdSmiMeter, NvmlMeter
from xpubench.energy.rapl import POWERCAP, RaplMeter

RANGE = 262143328850       # a real package counter's max_energy_range_uj


class FakeClock:
    def __init__(self):
        self.now = 10.0

    def __call__(self):
        return self.now


def zone(root: Path, name: str, label: str, energy: int | None, max_range: int | None = RANGE) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "name").write_text(label + "\n")
    if energy is not None:
        (d / "energy_uj").write_text(f"{energy}\n")
    if max_range is not None:
        (d / "max_energy_range_uj").write_text(f"{max_range}\n")
    (d / "enabled").write_text("1\n")
    return d


def powercap_tree(root: Path) -> Path:
    """Two packages with core / dram sub-zones, an MMIO duplicate of package 0 and a psys zone."""
    (root / "intel-rapl").mkdir(parents=True)
    (root / "intel-rapl" / "enabled").write_text("1\n")
    zone(root, "intel-rapl:0", "package-0", 1_000_000)
    zone(root, "intel-rapl:0:0", "core", 400_000)
    zone(root, "intel-rapl:0:1", "dram", 100_000)
    zone(root, "intel-rapl:1", "package-1", 5_000_000)
    zone(root, "intel-rapl:2", "psys", 9_000_000)
    zone(root, "intel-rapl-mmio:0", "package-0", 1_000_000)
    return root


def set_energy(root: Path, name: str, value: int) -> None:
    (root / name / "energy_uj").write_text(f"{value}\n")


def test_rapl_sums_the_package_counters_only(tmp_path):
    root = powercap_tree(tmp_path / "powercap")
    clock = FakeClock()
    meter = RaplMeter(root, tmp_path / "hwmon", clock=clock)
    assert meter.source == "rapl: package-0 + package-1"
    meter.start()
    clock.now += 2.0
    set_energy(root, "intel-rapl:0", 31_000_000)          # +30 J
    set_energy(root, "intel-rapl:1", 25_000_000)          # +20 J
    set_energy(root, "intel-rapl:0:0", 9_400_000)         # sub-zones and psys move too, but are not summed
    set_energy(root, "intel-rapl:2", 99_000_000)
    set_energy(root, "intel-rapl-mmio:0", 31_000_000)
    r = meter.stop()
    assert r.joules == pytest.approx(50.0) and r.seconds == pytest.approx(2.0) and r.watts == pytest.approx(25.0)
    assert r.domains == {"intel-rapl:0 package-0": pytest.approx(30.0), "intel-rapl:1 package-1": pytest.approx(20.0)}
    assert r.reason is None


def test_rapl_counter_wrap_around(tmp_path):
    root = tmp_path / "powercap"
    zone(root, "intel-rapl:0", "package-0", RANGE - 1_500_000)
    meter = RaplMeter(root, tmp_path / "hwmon", clock=FakeClock())
    meter.start()
    set_energy(root, "intel-rapl:0", 2_500_000)           # wrapped: 1.5 J to the top, 2.5 J after
    assert meter.stop().joules == pytest.approx(4.0)


def test_rapl_file_without_read_permission_is_na_with_the_reason(tmp_path):
    root = tmp_path / "powercap"
    counter = zone(root, "intel-rapl:0", "package-0", 1_000) / "energy_uj"
    counter.chmod(0)
    reader = Path.read_text
    if os.access(counter, os.R_OK):
        # Running as root: permission bits do not stop root, so do what the kernel does for every other
        # user since Linux 5.10 (energy_uj is mode 0400 root): refuse the read.
        def reader(path):
            if path == counter:
                raise PermissionError(13, "Permission denied", str(path))
            return path.read_text()
    meter = RaplMeter(root, tmp_path / "hwmon", read_text=reader, clock=FakeClock())
    meter.start()
    r = meter.stop()
    assert r.joules is None and "no permission" in r.reason and str(counter) in r.reason
    counter.chmod(0o644)
    assert energy_figures(r, samples=100)["energy_na"].startswith("n/a: no permission")


def test_rapl_garbage_and_missing_files_are_na(tmp_path):
    root = tmp_path / "powercap"
    zone(root, "intel-rapl:0", "package-0", None)
    (root / "intel-rapl:0" / "energy_uj").write_text("not a number\n")
    meter = RaplMeter(root, tmp_path / "hwmon")
    meter.start()
    assert "not a counter" in meter.stop().reason
    (root / "intel-rapl:0" / "energy_uj").unlink()
    meter.start()
    assert "cannot read" in meter.stop().reason


def test_no_cpu_counter_at_all_is_na(tmp_path):
    meter = RaplMeter(tmp_path / "none", tmp_path / "none2")
    meter.start()
    r = meter.stop()
    assert r.joules is None and "no CPU energy counter" in r.reason and "VM" in r.reason


def test_amd_energy_hwmon_sums_the_sockets(tmp_path):
    mon = tmp_path / "hwmon" / "hwmon3"
    mon.mkdir(parents=True)
    (mon / "name").write_text("amd_energy\n")
    for i, (label, value) in enumerate((("Ecore000", 10), ("Ecore001", 10), ("Esocket0", 7_000_000)), start=1):
        (mon / f"energy{i}_label").write_text(label + "\n")
        (mon / f"energy{i}_input").write_text(f"{value}\n")
    meter = RaplMeter(tmp_path / "powercap", tmp_path / "hwmon", clock=FakeClock())
    assert meter.source == "amd_energy: Esocket0"
    meter.start()
    (mon / "energy3_input").write_text("19000000\n")
    (mon / "energy1_input").write_text("5000000\n")       # a core counter: inside the socket, not added
    assert meter.stop().joules == pytest.approx(12.0)


def test_this_machine_without_powercap_says_why():
    """What this VM exposes: no /sys/class/powercap (checked when the test runs)."""
    if POWERCAP.exists() and any(POWERCAP.glob("intel-rapl:*")):
        pytest.skip("this machine has RAPL zones")
    meter = meter_for("cpu")
    meter.start()
    r = meter.stop()
    assert r.joules is None and "no CPU energy counter" in r.reason


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # pynvml spells it so; the reader checks the name
    pass


def fake_nvml(readings, *, supported=True, init_error=None):
    """A pynvml stand-in: counter values in millijoules, handles by index or UUID, calls recorded."""
    calls = []
    values = iter(readings)

    def energy(handle):
        calls.append(("energy", handle))
        if not supported:
            raise NVMLError_NotSupported("Not Supported")
        return next(values)

    def init():
        calls.append(("init",))
        if init_error:
            raise init_error

    return SimpleNamespace(
        nvmlInit=init, nvmlShutdown=lambda: calls.append(("shutdown",)),
        nvmlDeviceGetHandleByIndex=lambda i: f"index-{i}", nvmlDeviceGetHandleByUUID=lambda u: f"uuid-{u}",
        nvmlDeviceGetTotalEnergyConsumption=energy, calls=calls)


def test_nvml_reads_the_total_energy_counter_in_millijoules():
    nvml = fake_nvml([5_000_000, 5_750_500])
    clock = FakeClock()
    meter = NvmlMeter(1, module=nvml, clock=clock)
    meter.start()
    clock.now += 3.0
    r = meter.stop()
    assert r.joules == pytest.approx(750.5) and r.watts == pytest.approx(750.5 / 3) and r.warning is None
    assert nvml.calls == [("init",), ("energy", "index-1"), ("energy", "index-1"), ("shutdown",)]


def test_nvml_finds_the_gpu_by_torch_uuid_and_warns_on_short_regions():
    nvml = fake_nvml([100, 200])
    meter = NvmlMeter(0, uuid="ffc79498-8ff3-c2dc-3b0d-fafd804516ae", module=nvml, clock=FakeClock())
    meter.start()
    r = meter.stop()
    assert ("energy", "uuid-GPU-ffc79498-8ff3-c2dc-3b0d-fafd804516ae") in nvml.calls
    assert r.joules == pytest.approx(0.1) and "coarse" in r.warning


def test_nvml_without_an_energy_counter_or_driver_is_na():
    old = fake_nvml([], supported=False)
    meter = NvmlMeter(0, module=old)
    meter.start()
    r = meter.stop()
    assert r.joules is None and "Volta" in r.reason and old.calls[-1] == ("shutdown",)
    meter = NvmlMeter(0, module=fake_nvml([], init_error=NVMLError("NVML Shared Library Not Found")))
    meter.start()
    assert "NVML did not start: NVML Shared Library Not Found" in meter.stop().reason


def test_the_real_nvml_path_on_a_machine_without_an_nvidia_driver():
    """Here: nvidia-ml-py may be installed, the driver is not: n/a with NVML's own reason."""
    if Path("/proc/driver/nvidia").exists():
        pytest.skip("an NVIDIA driver is loaded here")
    meter = meter_for("gpu:0", vendor="nvidia")
    meter.start()
    r = meter.stop()
    assert r.joules is None and ("NVML did not start" in r.reason or "not installed" in r.reason)


def fake_amdsmi(values, key="energy_accumulator"):
    counts = iter(values)
    return SimpleNamespace(
        amdsmi_init=lambda: None, amdsmi_shut_down=lambda: None, amdsmi_get_processor_handles=lambda: ["h0", "h1"],
        amdsmi_get_energy_count=lambda h: {key: next(counts), "counter_resolution": 15.3, "timestamp": 0})


@pytest.mark.parametrize("key", ["energy_accumulator", "power"])     # newer and older amdsmi releases
def test_amd_smi_accumulator_times_resolution(key):
    meter = AmdSmiMeter(1, module=fake_amdsmi([1_000_000, 2_000_000], key), clock=FakeClock())
    meter.start()
    assert meter.stop().joules == pytest.approx(1_000_000 * 15.3 / 1e6)
    missing = AmdSmiMeter(5, module=fake_amdsmi([]))
    missing.start()
    assert "sees 2 GPU(s)" in missing.stop().reason


def test_devices_without_a_counter_say_why():
    for device, words in (("tpu:0", "TPU"), ("mps", "powermetrics"), ("xpu:0", "no energy counter")):
        meter = meter_for(device)
        meter.start()
        r = meter.stop()
        assert isinstance(meter, Unavailable) and r.joules is None and words in r.reason


def test_derived_figures():
    r = EnergyReading(joules=120.0, seconds=4.0, source="rapl: package-0")
    f = energy_figures(r, steps=40, samples=10_240, epochs=2)
    assert f["joules_per_step"] == 3.0 and f["joules_per_epoch"] == 60.0
    assert (f["joules_per_sample"] == pytest.approx(120 / 10_240)
            and f["samples_per_joule"] == pytest.approx(10_240 / 120))
    assert f["average_watts"] == 30.0 and f["energy_na"] is None
    na = energy_figures(EnergyReading(None, 4.0, "n/a", "no CPU energy counter"), samples=10)
    assert na["joules_per_sample"] is None and na["samples_per_joule"] is None
    assert na["energy_na"] == "n/a: no CPU energy counter"
