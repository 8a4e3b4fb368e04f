"""How long `xpubench site` takes over a folder of N results files (default 1,000).

The files are made from the recorded ones under tests/data (runs/ and gate/: default runs, a llama run,
a report run, the gate's matmul files), cycled: each copy is put on one of ``--machines`` hosts (its
fingerprint's hostname) and on a date spread over ``--days`` days, and its timings scaled by a slow drift
per machine, plus a 1.3x slowdown on machine 0 from the middle of the period on (so the charts show a
regression). The figures are synthetic; the file format, the sizes and the reading cost are real.

    python3 benchmarks/site_build.py [--files 1000] [--out /tmp/site-bench] [--jobs N] [--keep]

Prints the build time from a cold cache, then a rebuild (every file already read: the digest cache).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDED = sorted((ROOT / "tests" / "data" / "runs").glob("*.jsonl")) + sorted(
    (ROOT / "tests" / "data" / "gate").glob("*.jsonl"))


def _scaled(metrics: dict, factor: float) -> dict:
    out = {}
    for k, v in metrics.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if k.endswith("per_s"):
                v = v / factor
            elif k.endswith("_s"):
                v = v * factor
        out[k] = v
    return out


def make_folder(out: Path, files: int = 1000, machines: int = 10, days: int = 120) -> Path:
    """``files`` results files in ``out`` (see the module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    sources = [p.read_text().splitlines() for p in RECORDED]
    start = datetime(2026, 6, 1, tzinfo=timezone.utc)
    for i in range(files):
        machine, lines = i % machines, sources[i % len(sources)]
        when = start + timedelta(days=days * i / files, minutes=machine)
        factor = (1 + 0.001 * machine * (i / files)) * (1.3 if machine == 0 and i > files // 2 else 1.0)
        records = []
        for line in lines:
            r = json.loads(line)
            r["fingerprint"] = {**r.get("fingerprint", {}), "hostname": f"ci-runner-{machine}"}
            r["started_at"] = when.isoformat(timespec="seconds")
            r["samples"] = {k: [v * factor if isinstance(v, (int, float)) else v for v in vs]
                            for k, vs in (r.get("samples") or {}).items()}
            r["metrics"] = _scaled(r.get("metrics") or {}, factor)
            records.append(json.dumps(r))
        (out / f"run-{i:04d}.jsonl").write_text("\n".join(records) + "\n")
    return out


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--out", default="/tmp/xpubench-site-bench")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the results folder and the site")
    args = ap.parse_args()
    base = Path(args.out)
    shutil.rmtree(base, ignore_errors=True)
    folder = make_folder(base / "results", args.files)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["n/a"]
    command = [sys.executable, "-m", "xpubench", "site", str(folder), "-o", str(base / "site")]
    command += ["--jobs", str(args.jobs)] if args.jobs else []
    for label in ("cold cache", "rebuild"):
        t, cpu = time.perf_counter(), _children_cpu()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wall, cpu = time.perf_counter() - t, _children_cpu() - cpu
        print(f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU (the whole command, its worker processes included), "
              f"exit {done.returncode}: {done.stdout.strip()}")
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return 1
    print(f"load average before: {' '.join(load)}; after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
