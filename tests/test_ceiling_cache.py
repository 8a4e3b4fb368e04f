"""The ceilings cache: used for the same machine and software only; stale and foreign entries refused
with the reason; a broken file never an error. Plus the child entry point's bad-input path."""

import copy
import json

import pytest

from xpubench.ceilings import cache, measure
from xpubench.ceilings.__main__ import main
from xpubench.harness.bandwidth import Bandwidth, KernelRate
from xpubench.harness.ceiling import Ceiling

ENV = {
    "host": {"memory_bytes": 25 * 2**30, "kernel": "6.1",
             "cpu": {"model": "AMD EPYC", "vendor": "AuthenticAMD", "cpu_family": 25, "cpu_model": 1, "arch": "x86_64",
                     "flags": ["avx", "avx2", "fma"], "logical_cores": 2, "physical_cores": 2, "usable_cores": 2,
                     "usable_physical_cores": 2, "mhz_max": None, "mhz_current": 2445.4}},
    "backends": {
        "numpy": {"installed": True, "version": "2.4.6", "blas": "scipy-openblas 0.3.31", "devices": [{"id": "cpu",
                  "kind": "cpu", "name": "AMD EPYC"}]},
        "torch": {"installed": True, "version": "2.13.0+cpu", "cuda_version": None, "devices": [
            {"id": "cpu", "kind": "cpu", "name": "AMD EPYC"},
            {"id": "gpu:0", "kind": "gpu", "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
             "driver": "550.54", "memory_bytes": 80 * 2**30}]},
        "jax": {"installed": False, "version": None, "devices": []},
    },
}


def ceiling(backend="torch", device="cpu", precision="fp32", rate=100e9):
    return Ceiling(backend, device, precision, rate, (1024, 1024, 1024), rate, 0.01, rate * 0.99, rate * 1.01,
                   samples_s=[0.02, 0.021], shapes=[], budget_s=30, elapsed_s=29)


def test_cache_path_follows_xdg(tmp_path):
    assert cache.cache_path({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "xpubench" / "ceilings.json"
    assert cache.cache_path({}).parts[-3:] == (".cache", "xpubench", "ceilings.json")


def test_machine_key_ignores_what_changes_between_runs():
    key = cache.machine_key(ENV, environ={})
    changed = copy.deepcopy(ENV)
    changed["host"]["cpu"]["mhz_current"] = 3100.0
    changed["host"]["kernel"] = "6.2"
    changed["backends"]["torch"]["devices"][1]["memory_bytes"] = 60 * 2**30   # JAX-style "free memory"
    assert cache.machine_key(changed, environ={}) == key
    assert key["software"]["drivers"] == ["550.54"] and "jax" not in key["software"]["backends"]
    assert key["hardware"]["accelerators"] == [["gpu", "gpu:0", "NVIDIA H100 80GB HBM3", "9.0"]]


def test_store_and_reuse_on_the_same_machine(tmp_path):
    path = tmp_path / "c.json"
    key = cache.machine_key(ENV, environ={})
    bw = Bandwidth("torch", "cpu", 128 * 2**20, 12.5, {"copy": KernelRate("copy", "c = a", 2.0, 12.5, 13.0, 0.02)})
    cache.store(key, [ceiling()], [bw], path)
    cache.store(key, [ceiling(precision="bf16", rate=200e9)], path=path)        # merges into the same entry
    entry, why = cache.lookup(key, path)
    assert why is None
    assert cache.cached_ceiling(entry, "torch", "cpu", "fp32") == ceiling()
    assert cache.cached_ceiling(entry, "torch", "cpu", "bf16").flops_per_s == 200e9
    assert cache.cached_ceiling(entry, "jax", "cpu", "fp32") is None
    assert cache.cached_bandwidth(entry, "torch", "cpu") == bw
    assert len(json.loads(path.read_text())["entries"]) == 1
    rows = cache.summary_rows(entry)
    assert [(r["what"], r["value"], r["where"]) for r in rows] == [
        ("fp32 matmul", 100.0, "1024x1024x1024"), ("bf16 matmul", 200.0, "1024x1024x1024"), ("bandwidth", 12.5, "copy")]


@pytest.mark.parametrize("change, kind, mentioned", [
    (lambda e: e["backends"]["torch"].update(version="2.12.0"), "stale", "2.12.0"),
    (lambda e: e["backends"]["numpy"].update(blas="mkl"), "stale", "blas"),
    (lambda e: e["host"]["cpu"].update(model="Intel Xeon"), "foreign", "Intel Xeon"),
    (lambda e: e["host"]["cpu"].update(usable_cores=1), "foreign", "usable_cores"),
    (lambda e: e["backends"]["torch"]["devices"].pop(), "foreign", "accelerators"),
])
def test_a_stale_or_foreign_entry_is_never_used(tmp_path, change, kind, mentioned):
    path = tmp_path / "c.json"
    old = copy.deepcopy(ENV)
    change(old)
    cache.store(cache.machine_key(old, environ={}), [ceiling()], path=path)
    entry, why = cache.lookup(cache.machine_key(ENV, environ={}), path)
    assert entry is None and why.startswith(kind) and mentioned in why


def test_an_older_xpubench_entry_is_stale(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    monkeypatch.setattr("xpubench.backends.identity.__version__", "0.0.9")
    cache.store(cache.machine_key(ENV, environ={}), [ceiling()], path=path)
    monkeypatch.setattr("xpubench.backends.identity.__version__", "0.1.0")
    entry, why = cache.lookup(cache.machine_key(ENV, environ={}), path)
    assert entry is None and why.startswith("stale") and "xpubench" in why and "0.0.9" in why


def test_thread_variables_are_part_of_the_key(tmp_path):
    path = tmp_path / "c.json"
    cache.store(cache.machine_key(ENV, environ={"OMP_NUM_THREADS": "1"}), [ceiling()], path=path)
    entry, why = cache.lookup(cache.machine_key(ENV, environ={}), path)
    assert entry is None and "OMP_NUM_THREADS" in why


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": 99, "entries": []}), json.dumps([1, 2])])
def test_a_broken_cache_file_is_reported_and_rewritten(tmp_path, content):
    path = tmp_path / "c.json"
    path.write_text(content)
    key = cache.machine_key(ENV, environ={})
    entry, why = cache.lookup(key, path)
    assert entry is None and "rewritten" in why
    cache.store(key, [ceiling()], path=path)
    assert cache.lookup(key, path)[1] is None


def test_only_the_most_recent_keys_are_kept(tmp_path):
    path = tmp_path / "c.json"
    for i in range(cache.MAX_ENTRIES + 3):
        cache.store(cache.machine_key(ENV, environ={"OMP_NUM_THREADS": str(i)}), [ceiling()], path=path)
    entries = json.loads(path.read_text())["entries"]
    assert len(entries) == cache.MAX_ENTRIES
    assert entries[-1]["key"]["software"]["env"]["OMP_NUM_THREADS"] == str(cache.MAX_ENTRIES + 2)


def test_ceilings_for_reuses_the_cache_and_measures_only_what_is_missing(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    calls = []

    def fake_measure(backend, device, precisions, **kw):
        calls.append((backend, device, tuple(precisions), kw["with_bandwidth"]))
        bw = Bandwidth(backend, device, 1, 10.0, {}) if kw["with_bandwidth"] else None
        return [ceiling(backend, device, p) for p in precisions], bw

    monkeypatch.setattr(measure, "measure_in_subprocess", fake_measure)
    first = measure.ceilings_for(ENV, "torch", "cpu", ["fp32"], path=path)
    assert first["source"] == "measured" and "no cache file" in first["cache_note"]
    again = measure.ceilings_for(ENV, "torch", "cpu", ["fp32"], path=path)
    assert again["source"] == "cache" and again["ceilings"]["fp32"] == ceiling()
    more = measure.ceilings_for(ENV, "torch", "cpu", ["fp32", "bf16"], path=path)
    assert more["source"] == "measured" and set(more["ceilings"]) == {"fp32", "bf16"}
    assert calls == [("torch", "cpu", ("fp32",), True), ("torch", "cpu", ("bf16",), False)]


def test_only_the_missing_bandwidth_is_measured_when_the_matmul_ceilings_are_cached(tmp_path, monkeypatch):
    """`xpubench ceilings --no-bandwidth` then `--bandwidth-only` (the accelerator check's two steps): the
    second measures the bandwidth alone, never the cached precisions again."""
    path, calls = tmp_path / "c.json", []

    def fake_measure(backend, device, precisions, **kw):
        calls.append((tuple(precisions), kw["with_bandwidth"]))
        bw = Bandwidth(backend, device, 1, 10.0, {}) if kw["with_bandwidth"] else None
        return [ceiling(backend, device, p) for p in precisions], bw

    monkeypatch.setattr(measure, "measure_in_subprocess", fake_measure)
    measure.ceilings_for(ENV, "torch", "cpu", ["bf16", "fp32"], path=path, with_bandwidth=False)
    both = measure.ceilings_for(ENV, "torch", "cpu", ["bf16", "fp32"], path=path)
    alone = measure.ceilings_for(ENV, "torch", "cpu", [], path=path, refresh=True)
    assert calls == [(("bf16", "fp32"), False), ((), True), ((), True)]
    assert set(both["ceilings"]) == {"bf16", "fp32"} and alone["bandwidth"].gb_per_s == 10.0


def test_bandwidth_only_and_no_bandwidth_together_are_refused(capsys):
    from xpubench import cli

    assert cli.main(["ceilings", "--bandwidth-only", "--no-bandwidth"]) == 2
    assert "leave nothing to measure" in capsys.readouterr().err


def test_the_child_entry_point_refuses_bad_input_in_one_line(capsys):
    assert main(["--backend", "numpy", "--precisions", "bf16", "--budget", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "numpy" in err and "\n" not in err
    with pytest.raises(SystemExit) as exc:
        main(["--backend", "numpy", "--budget", "-3"])
    assert exc.value.code == 2


@pytest.mark.slow
def test_measure_in_a_child_process():
    """The real child: numpy's search with a 2 s budget comes back as a Ceiling."""
    (c,), bw = measure.measure_in_subprocess("numpy", "cpu", ["fp32"], budget_s=2, with_bandwidth=False, timeout_s=120)
    assert bw is None and c.backend == "numpy" and c.flops_per_s > 0 and c.shapes
    with pytest.raises(RuntimeError, match="no bf16"):
        measure.measure_in_subprocess("numpy", "cpu", ["bf16"], budget_s=1, with_bandwidth=False, timeout_s=120)
