"""The doctor's "kernels" row: a library running CPU kernels below what the CPU can do (devices/kernels.py
finds them in detection's record), with what that costs here.

The cost is measured, never assumed: for a finding that a set variable caused, the fp32 (oneDNN: bf16)
matmul of the backend that uses the library runs twice in fresh processes, N = ``SIZE`` for about
``BUDGET_S`` each (the doctor's own timing, probe.warm_flops), once with the environment as it is and once
without that variable. Run as ``python -m xpubench.doctor.kernels BACKEND PRECISION`` it prints one
such measurement as JSON.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping

from xpubench.devices import kernels
from xpubench.doctor.checks import PASS, WARN, Row
from xpubench.legible.units import fmt_flops

SIZE = 1024
BUDGET_S = 1.0
PRECISION = {"oneDNN": "bf16"}     # a library -> the precision whose matmul it runs (else fp32)


def precision_of(finding: kernels.Finding) -> str:
    return next((p for name, p in PRECISION.items() if finding.library.startswith(name)), "fp32")


def without(finding: kernels.Finding, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment less the variable that caused the finding (only the flag, for XLA_FLAGS)."""
    env = dict(environ)
    name = (finding.variable or "").split("=")[0]
    if name.startswith("--xla_cpu_max_isa"):
        env["XLA_FLAGS"] = re.sub(r"--xla_cpu_max_isa=\S+\s*", "", env.get("XLA_FLAGS", "")).strip()
    else:
        env.pop(name, None)
    return env


def matmul_rate(backend: str, precision: str, environ: Mapping[str, str], timeout_s: float = 120.0) -> float | None:
    """Warm FLOP/s of the backend's N = SIZE CPU matmul in a fresh process with ``environ``; None if it failed."""
    try:
        proc = subprocess.run([sys.executable, "-m", "xpubench.doctor.kernels", backend, precision],
                              capture_output=True, text=True, timeout=timeout_s, env=dict(environ), check=False,
                              stdin=subprocess.DEVNULL)
        return float(json.loads(proc.stdout.strip().splitlines()[-1])["flops"])
    except (subprocess.SubprocessError, OSError, ValueError, IndexError, KeyError, TypeError):
        return None


def measure_costs(found: list[kernels.Finding], environ: Mapping[str, str],
                  rate: Callable[[str, str, Mapping[str, str]], float | None] = matmul_rate
                  ) -> dict[str, tuple[float | None, float | None]]:
    """{variable: (FLOP/s with it, FLOP/s without it)} for each finding a variable caused and a backend shows."""
    costs = {}
    for f in found:
        if f.variable and f.backend and f.variable not in costs:
            precision = precision_of(f)
            costs[f.variable] = (rate(f.backend, precision, environ), rate(f.backend, precision, without(f, environ)))
    return costs


def _cost(finding: kernels.Finding, costs: dict) -> str:
    if not finding.variable:
        return ": a newer release may know this CPU (upgrade the package that ships it)"
    with_it, without_it = costs.get(finding.variable, (None, None))
    unset = finding.variable.split("=")[0]
    what = f"{finding.backend} {precision_of(finding)} matmul N={SIZE}"
    if not (with_it and without_it):
        return f"; unset {unset} for this CPU's own kernels (the cost here could not be measured)"
    ratio = without_it / with_it
    said = (f"{ratio:.2f}x faster without it" if ratio >= 1.05 else
            "no faster without it here" if ratio >= 0.95 else f"{1 / ratio:.2f}x slower without it")
    return (f"; here {what}: {fmt_flops(with_it)} with it, {fmt_flops(without_it)} without it ({said}); unset "
            f"{unset} to measure this CPU's own kernels")


def row(found: list[kernels.Finding], costs: dict, record: dict | None, flags) -> Row:
    """WARN per library below the CPU (what it runs, the variable that chose it, what it costs here); else PASS."""
    if found:
        return Row("kernels", WARN, "; ".join(f.sentence() + _cost(f, costs) for f in found),
                   details={"kernels": record or {}, "costs": {k: list(v) for k, v in costs.items()}})
    level = kernels.cpu_level(flags)
    chosen = "; ".join(f"{k} {v}" for k, v in kernels.describe(record).items())
    if level is None:
        return Row("kernels", PASS, f"SIMD levels are judged on x86 CPUs only; recorded: {chosen or 'nothing'}",
                   details={"kernels": record or {}})
    return Row("kernels", PASS,
               f"no library runs below this CPU's {kernels.LEVEL_NAMES[level]}: {chosen or 'nothing recorded'}",
               details={"kernels": record or {}})


def diagnose(env: dict, environ: Mapping[str, str], rate=matmul_rate) -> Row | None:
    """The kernels row for detection's record ``env`` (None when it holds no kernel record)."""
    if "kernels" not in env:
        return None
    flags = ((env.get("host") or {}).get("cpu") or {}).get("flags")
    found = kernels.findings(env["kernels"], flags, environ)
    return row(found, measure_costs(found, environ, rate), env["kernels"], flags)


def main(argv: list[str]) -> int:
    from xpubench.doctor.probe import doctor_ops, warm_flops
    from xpubench.launch.worker import prepare_environment

    backend, precision = argv[0], argv[1]
    prepare_environment("cpu")
    flops = warm_flops(doctor_ops(backend, "cpu").matmul(precision), SIZE, BUDGET_S)
    sys.stdout.write(json.dumps({"flops": flops}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
