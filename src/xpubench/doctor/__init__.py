"""``xpubench doctor``: the self-check a user runs on their own hardware (docs/accelerators.md gives its
time), so every user's device becomes a test bench. It first reads how busy other processes keep the
CPU (as ``run`` does): on a loaded machine the load row WARNs and every CPU speed row (ceiling,
known-good, a kernels row's measured cost) is a WARN saying its figure is no verdict. Per backend and
device, in a fresh process each
(``probe.py``, with the benchmark's own adapters), it checks:

- placement: a product really runs on the requested device (no fallback);
- timing: on an asynchronous device, a window read without the sync is shorter than the synchronised
  one (so the sync waits for the work); on CUDA, events and synchronised wall time agree;
- precision: each dtype's error against float64 is its format's (fp32 is not silently TF32 or bf16);
- ceiling: measured matmul FLOP/s stay below the chip's spec peak;
- memory: the peak-memory counter sees an allocation;
- compile: torch.compile / XLA compile and run a function;
- known-good (only where a published achievable figure exists for the chip, precision and framework,
  devices/knowngood.py): the measured product against it, a WARN well below it;
and, once, the environment variables that change results (devices/envvars.py) and the CPU kernels the
libraries chose: a WARN, with what it costs here, when one runs below what the CPU can do (kernels.py); an
installed backend a module its workers import is missing for (JAX without optax) is a FAIL ``imports`` row
with the command that installs it, and its devices are not probed (``run`` leaves it out too).
Verdicts (``checks.py``) are PASS, WARN or FAIL with a one-line reason; any FAIL exits 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from xpubench import backends
from xpubench.backends.fingerprint import busy_note, cpu_busy_fraction
from xpubench.devices.device import is_accelerator
from xpubench.doctor import checks
from xpubench.doctor import kernels as kernel_check
from xpubench.doctor.checks import FAIL, Row

MEMORY_BYTES = 256 << 20
CHECK_NAMES = ("placement", "timing", "precision", "ceiling", "memory", "compile")


def probe_config(env: dict, backend: str, device: str) -> dict:
    """What to measure on one backend and device: every precision it runs (the precision check), and
    fp32 plus the planned 16-bit format and tf32 where they are fast here (the ceiling check)."""
    from xpubench.plan.defaults import has_tf32, model_precisions, slow_cpu_dtypes

    accel = is_accelerator(device)
    runs = backends.get(backend).precisions
    precisions = [p for p in ("fp32", "tf32", "bf16", "fp16") if p in runs
                  and (p != "tf32" or has_tf32(env, backend, device))]
    slow = slow_cpu_dtypes(env, backend, device)
    ceiling = [p for p in dict.fromkeys(["fp32", *model_precisions(env, backend, device)])
               if p in precisions and p not in slow]
    return {"backend": backend, "device": device, "precisions": precisions, "ceiling": ceiling,
            "precision_size": 512, "timing_size": 4096 if accel else 1024,
            "ceiling_size": 8192 if accel else 1024, "ceiling_budget_s": 1.0, "memory_bytes": MEMORY_BYTES}


def run_probe(config: dict, timeout_s: float = 300.0) -> dict:
    """The probe in a fresh process (as a benchmark case runs); a dead or silent probe is an error."""
    with tempfile.TemporaryDirectory(prefix="xpubench-doctor-") as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config))
        try:
            proc = subprocess.run([sys.executable, "-m", "xpubench.doctor.probe", str(path)], capture_output=True,
                                  text=True, timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {"errors": {"setup": f"the probe did not finish within {timeout_s:g} s"}}
    lines = proc.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = " | ".join(proc.stderr.strip().splitlines()[-2:]) or f"exit code {proc.returncode}"
        return {"errors": {"setup": f"the probe process died: {tail}"}}


def verdicts(env: dict, config: dict, measured: dict) -> list[Row]:
    """The rows of one backend and device from its measurements (in CHECK_NAMES order)."""
    from xpubench.backends.peaks import device_record, peak_for

    backend, device = config["backend"], config["device"]
    errors = measured.get("errors", {})
    if "setup" in errors:
        rows = [Row("setup", FAIL, errors["setup"])]
    else:
        record = device_record({"backends": env.get("backends", {})}, backend, device)
        fp = {"host": env.get("host", {}), "backends": env.get("backends", {})}
        peaks = {p: peak_for(fp, backend, device, p) for p in config["ceiling"]}
        judge: dict[str, Callable[[], Row]] = {
            "placement": lambda: checks.placement(device, measured["placement"]),
            "timing": lambda: checks.timing(measured["asynchronous"], measured["timing"]),
            "precision": lambda: checks.precision(measured["precision"]),
            "ceiling": lambda: checks.ceiling(measured["ceiling"], peaks, record.get("name") or device),
            "memory": lambda: checks.memory(measured["memory"]),
            "compile": lambda: checks.compilation(measured["compile"], backend),
        }
        rows = []
        for name in CHECK_NAMES:
            if name in errors:
                rows.append(checks.failed_compile(errors[name], backend) if name == "compile"
                            else Row(name, FAIL, f"the check raised {errors[name]}"))
            elif name in measured:
                rows.append(judge[name]())
        rows += known_good_rows(record, backend, device, measured.get("ceiling") or {}, config["ceiling_size"])
    for row in rows:
        row.backend, row.device = backend, device
    return rows


def known_good_rows(record: dict, backend: str, device: str, ceiling: dict[str, float], size: int) -> list[Row]:
    """The ceiling check's products against the chip's published achievable figures, where one is
    comparable (devices/knowngood.py); PASS at HEALTHY_SHARE of it or above, else WARN with what to check."""
    from xpubench.devices import knowngood

    rows = []
    for precision, flops in ceiling.items():
        good = knowngood.comparable(record.get("chip"), "matmul", precision, backend)
        if good and flops:
            healthy, said = knowngood.verdict(flops, good, record.get("vendor"), record.get("name") or device)
            rows.append(Row("known-good", checks.PASS if healthy else checks.WARN,
                            f"{said} (here one {size}^3 product; `xpubench ceilings -b {backend} -p {precision}` "
                            "searches shapes as the source did)"))
    return rows


def diagnose(env: dict, backends: list[str] | None = None, devices: list[str] | None = None,
             environ: dict | None = None, probe: Callable[[dict], dict] = run_probe,
             on_row: Callable[[Row], None] | None = None, kernel_rate=kernel_check.matmul_rate,
             busy: Callable[[], float | None] = cpu_busy_fraction) -> list[Row]:
    """Every check for the chosen backends and devices (default: every installed backend, the first
    device of each kind), plus the environment, load and kernels rows. ``probe`` measures one backend and
    device; ``kernel_rate`` one matmul with and without a kernel-choosing variable (kernels.py); ``busy``
    reads how busy other processes keep the CPU (0-1, None: unknown), before the checks and again before
    each CPU probe: a CPU speed row measured on a loaded machine is a WARN that says so (checks.under_load)."""
    from xpubench.plan import PlanRequest
    from xpubench.plan.defaults import choose_devices, incomplete_backends
    from xpubench.plan.validation import validate

    validate(PlanRequest(backends=backends, devices=devices))
    probed = choose_devices(env, backends, devices)   # a bad name, or a named backend missing a module: one line
    environ = dict(os.environ) if environ is None else environ
    share = busy()
    rows = [checks.environment(environ)]
    kernel_row = kernel_check.diagnose(env, environ, kernel_rate)
    rows += [_loaded(kernel_row, share)] if kernel_row else []
    rows.append(checks.load(share, busy_note(share) is not None))
    rows += [Row("imports", FAIL, why, backend=backend) for backend, why in incomplete_backends(env).items()
             if not backends]   # one named is refused by choose_devices
    for row in rows if on_row else ():
        on_row(row)
    for backend, chosen in probed.items():
        for device in chosen:
            config = probe_config(env, backend, device)
            share = None if is_accelerator(device) else busy()   # the load slows the CPU's own work
            for row in verdicts(env, config, probe(config)):
                row = _loaded(row, share)
                rows.append(row)
                if on_row:
                    on_row(row)
    return rows


def _loaded(row: Row, share: float | None) -> Row:
    return checks.under_load(row, share) if share is not None and busy_note(share) else row


def exit_code(rows: list[Row]) -> int:
    return 1 if any(r.status == FAIL for r in rows) else 0


def render(rows: list[Row], console) -> None:
    from rich.table import Table

    from xpubench.legible.plaintext import markup

    style = {"PASS": "green", "WARN": "yellow", "FAIL": "bold red"}
    table = Table(title="xpubench doctor", title_justify="left")
    for col in ("backend", "device", "check", "status", "reason"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(markup(r.backend), markup(r.device), markup(r.check), f"[{style[r.status]}]{r.status}[/]",
                      markup(r.reason))   # a reason quotes exceptions: text, not markup
    console.print(table)
    counts = {s: sum(r.status == s for r in rows) for s in ("PASS", "WARN", "FAIL")}
    measured = sum(r.status == FAIL and r.check != "imports" for r in rows)   # not an install's FAIL: its fix is said
    console.print(", ".join(f"{n} {s}" for s, n in counts.items()) + (
        " - send docs/accelerators.md's report back if a check fails" if measured else ""), highlight=False)
