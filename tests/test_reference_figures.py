"""Reference figures that hold still (issue 52 item 6): the CPU clock behind the peak estimate and a run's brief
bandwidth behind "% of the bandwidth bound" are measured several times, kept in the cache with their spread
and when they were measured, and read back by every later command unless --refresh; what a figure is --
"(cached 2026-12-07, ±3%)" or "(measured now, ±3%)" -- is said beside it. The measurements are recorded
samples (fake clocks and bandwidths): each command before this measured again and the figures moved
(398 / 442 / 451 / 453 GFLOP/s; 41% and 22% of the bound for the same tg)."""

from __future__ import annotations

import json
import os

import pytest

from xpubench import cli
from xpubench.case import Case
from xpubench.ceilings import cache, measure, runtime
from xpubench.devices import clock, detect
from xpubench.harness.bandwidth import Bandwidth, KernelRate

CPU = {"model": "AMD EPYC", "vendor": "AuthenticAMD", "cpu_family": 26, "arch": "x86_64", "usable_cores": 2,
       "usable_physical_cores": 2, "flags": ["avx2", "fma", "avx512f"], "mhz_current": 2600.0}
REFRESH = "XPUBENCH_REFRESH"   # envnames.REFRESH: what --refresh sets for the detection child and the run
RUNS = [[3110.0, 3460.0, 3520.0, 3530.0, 3480.0], [3460.0, 3510.0, 3490.0, 3540.0, 3500.0]]   # MHz, recorded


class Clock:
    """measured_mhz's stand-in: each call the next recorded run's samples; counts the calls."""

    def __init__(self, runs=RUNS):
        self.runs, self.calls = list(runs), 0

    def __call__(self):
        self.calls += 1
        return self.runs[(self.calls - 1) % len(self.runs)], "recorded"


def test_the_clock_is_the_median_of_its_measurements_kept_with_its_spread(tmp_path):
    path, measured = tmp_path / "cpu-clock.json", Clock()
    first = clock.cpu_clock(CPU, measure=measured, path=path)
    assert first["mhz"] == 3480.0 and first["fresh"] and first["samples_mhz"] == RUNS[0]
    assert first["spread"] == pytest.approx((3530 - 3110) / 2 / 3480)
    again = clock.cpu_clock(dict(CPU, mhz_current=2450.0), measure=measured, path=path)   # the OS's reading moves
    assert measured.calls == 1 and not again["fresh"] and again["mhz"] == 3480.0
    assert again["measured_at"] == first["measured_at"]
    fresh = clock.cpu_clock(CPU, measure=measured, path=path, refresh=True)
    assert measured.calls == 2 and fresh["fresh"] and fresh["mhz"] == 3500.0
    other = clock.cpu_clock(dict(CPU, model="Intel Xeon"), measure=measured, path=path)
    assert measured.calls == 3 and other["fresh"]                     # another CPU is measured, not read


def test_a_broken_or_unwritable_clock_cache_is_measured_again_and_said(tmp_path):
    path = tmp_path / "cpu-clock.json"
    path.write_text('{"format": 1, "entries": [{"cpu": {}, "samples_mhz": ["fast"]}]}')
    measured = Clock()
    assert clock.cpu_clock(CPU, measure=measured, path=path)["fresh"] and measured.calls == 1
    assert json.loads(path.read_text())["entries"][0]["samples_mhz"] == RUNS[0]      # rewritten
    blocked = tmp_path / "a-file"
    blocked.write_text("")                              # its folder is a file: the cache can't be written
    figure = clock.cpu_clock(CPU, measure=measured, path=blocked / "cpu-clock.json")
    assert figure["mhz"] == 3500.0 and "cannot be written" in figure["unkept"]
    assert clock.cpu_clock(CPU, measure=lambda: ([], "not measured (no JAX)"), path=tmp_path / "none.json") == {
        "mhz": None, "method": "not measured (no JAX)"}


def test_the_cpu_peak_estimate_holds_still_from_one_command_to_the_next(monkeypatch, tmp_path):
    """host() (what every command's detection records): the estimate is the cached clock's until --refresh."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(REFRESH, raising=False)
    monkeypatch.setattr(detect, "cpu_info", lambda: dict(CPU))
    measured = Clock()
    monkeypatch.setattr(clock, "measured_mhz", measured)
    estimates = [detect.host()["cpu"]["peak_estimate"]["fp32"] for _ in range(3)]
    assert measured.calls == 1 and len({e["value"] for e in estimates}) == 1
    assert "(measured now, ±6%)" in estimates[0]["basis"] and "(cached " in estimates[1]["basis"]
    assert ", ±6%)" in estimates[2]["basis"] and "measured now" not in estimates[2]["basis"]
    monkeypatch.setenv(REFRESH, "1")                                     # `--refresh`
    refreshed = detect.host()["cpu"]
    assert measured.calls == 2 and refreshed["clock_fresh"] and refreshed["mhz_measured"] == 3500.0
    assert refreshed["peak_estimate"]["fp32"]["value"] != estimates[0]["value"]


def brief(values: list[float]):
    """brief_bandwidths's stand-in: one measurement per recorded GB/s (its fastest window)."""
    asked = []

    def measured(backend, device, *, measurements, **_):
        asked.append((backend, device))
        return [Bandwidth(backend, device, 2**28, v * 0.9,
                          {"copy": KernelRate("copy", "c = a", 2**29, v * 0.9, v, 0.1)}) for v in values[:measurements]]
    return measured, asked


def a_run(env: dict, path, notes: list, **kw) -> dict:
    record = {"ceilings": {}, "bandwidth": {}, "missing": [], "note": None}
    runtime.brief_bandwidth(record, env, [Case("llama", "torch", "cpu", "generate", "bf16", batch_size=1)],
                            on_note=notes.append, path=path, **kw)
    return record


def test_the_bound_bandwidth_is_the_cached_median_of_several_measurements(monkeypatch, tmp_path):
    from xpubench.analysis.generation import add_generation_bounds

    env = {"host": {"cpu": CPU}, "backends": {"torch": {"installed": True, "version": "2.13.0",
                                                        "devices": [{"id": "cpu", "kind": "cpu"}]}}}
    measured, asked = brief([24.0, 25.2, 26.1, 99.0])
    monkeypatch.setattr(measure, "brief_bandwidths", measured)
    path, notes = tmp_path / "ceilings.json", []
    first = a_run(env, path, notes, refresh=False)["bandwidth"]["torch/cpu"]
    assert first["bytes_per_s"] == pytest.approx(25.2e9) and first["fresh"]
    assert notes[-1].startswith("the decode bound's bandwidth on cpu: 25.2 GB/s (measured now, ±4%)")
    second = a_run(env, path, notes, refresh=False)["bandwidth"]["torch/cpu"]
    assert len(asked) == 1 and second["bytes_per_s"] == first["bytes_per_s"] and not second["fresh"]
    day = second["written"][:10]
    assert notes[-1].startswith(f"the decode bound's bandwidth on cpu: 25.2 GB/s (cached {day}, ±4%)")
    shares, sources = [], []
    for run in (first, second):   # the same tg, the same share of its bound, run after run
        metrics = {"decode_tokens_per_s": 50.0, "decode_bytes_per_token": 270e6}
        add_generation_bounds(metrics, Case("llama", "torch", "cpu", "generate", "bf16", batch_size=1),
                              {"ceilings": {"bandwidth": {"torch/cpu": run}}})
        shares.append(metrics["pct_of_bandwidth_bound"])
        sources.append(metrics["bound_bandwidth_source"])
    assert shares[0] == shares[1] == pytest.approx(50 * 270e6 / 25.2e9)
    assert sources[0].endswith("; measured for this run, ±4%)") and sources[1].endswith(f"; cached {day}, ±4%)")
    a_run(env, path, notes, refresh=True)                              # --refresh: measured again
    assert len(asked) == 2 and "measured now" in notes[-1]
    rows = [r for r in cache.summary_rows(cache.lookup(cache.machine_key(env), path)[0]) if "brief" in r["what"]]
    assert rows and rows[0]["value"] == pytest.approx(25.2) and rows[0]["where"] == "median of 3, ±4%"


def test_a_bandwidth_xpubench_ceilings_cached_is_said_with_its_date_and_spread(tmp_path):
    env = {"host": {"cpu": CPU}, "backends": {"torch": {"installed": True, "devices": [{"id": "cpu", "kind": "cpu"}]}}}
    path = tmp_path / "ceilings.json"
    copy = KernelRate("copy", "c = a", 2e9, 20.0, 21.0, 0.05, samples_s=[0.1, 0.095, 0.105])
    cache.store(cache.machine_key(env), bandwidths=[Bandwidth("torch", "cpu", 2**28, 20.0, {"copy": copy})], path=path)
    cases = [Case("llama", "torch", "cpu", "generate", "bf16", batch_size=1)]
    record = runtime.for_run(env, cases, path=path)
    entry = record["bandwidth"]["torch/cpu"]
    assert not entry["fresh"] and entry["spread"] == pytest.approx((2 / 0.095 - 2 / 0.105) / 2 / 20)
    notes: list[str] = []
    runtime.brief_bandwidth(record, env, cases, on_note=notes.append, path=path, refresh=False)
    assert notes == [(f"the decode bound's bandwidth on cpu: 20.0 GB/s (cached {entry['written'][:10]}, ±5%) "
                      "(torch's copy/triad, xpubench ceilings)")]


@pytest.mark.parametrize("command", [["env", "--json", "--refresh"], ["env", "--json"]])
def test_refresh_asks_every_detection_to_measure_again(monkeypatch, capsys, command):
    monkeypatch.setenv(REFRESH, "")                   # restored after the test, whatever the command sets
    monkeypatch.setattr("xpubench.backends.detect.environment", lambda: {"refresh": os.environ[REFRESH] == "1"})
    assert cli.main(command) == 0
    assert json.loads(capsys.readouterr().out) == {"refresh": "--refresh" in command}
