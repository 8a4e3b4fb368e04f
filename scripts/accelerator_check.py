"""The first hour on a GPU or TPU (or an Apple GPU): check and measure what matters, in steps of under
10 minutes each and 45 minutes in all, and leave everything in ``results/reference/<device>/``, ready to
commit. Run it as ``bash scripts/accelerator_check.sh`` from a checkout (docs/accelerators.md).

Steps (each in its own process, killed at STEP_LIMIT_S; a step that would pass the TOTAL_LIMIT_S is
skipped and says so):

1. env       ``xpubench env --json``                                      every machine
2. doctor    ``xpubench doctor --json``                                   every machine
3. tests     ``pytest -m gpu|tpu|mps -ra tests`` (the device tests)       needs a device
4. default   ``xpubench run`` (the brief default run, 150 s budget) + its HTML report      needs a device
5. ceilings  ``xpubench ceilings -b <backends> -d <device> -p fp32,bf16`` (compared with the published
             known-good figures, devices/knowngood.py)                    needs a device
6. sweep     torch and jax training (mnist_cnn, cifar10_resnet) and gpt generation on the device,
             ``--quick --budget 420`` + its HTML report                   needs a device

On a machine without an accelerator the steps that need one are skipped, each with the reason, and the
check ends 0. ``--dry-run`` records every command without running it (detection too, when
``--env-file FILE``, another machine's ``xpubench env --json``, says what machine to plan for): the
logic runs in seconds (tests/test_accelerator_check.py). Exit code: 1 when a step that ran failed
(a doctor FAIL included), 2 for bad arguments, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP_LIMIT_S = 540          # 9 minutes: under the 10-minute job limit of shared nodes
TOTAL_LIMIT_S = 45 * 60
MIN_STEP_S = 60             # a step is not started with less time than this left of the total
ACCEL_KINDS = ("gpu", "tpu", "mps")
NEEDS_DEVICE = "needs a GPU, TPU or Apple GPU (none found: on a CPU run `xpubench run` / `xpubench ceilings` yourself)"
OUTPUTS = ("env.json", "doctor.json", "tests.txt", "default.jsonl", "default.jsonl.plan.json",
           "default.html", "ceilings.txt", "ceilings.json", "sweep.jsonl", "sweep.jsonl.plan.json", "sweep.html",
           "summary.md", "summary.json")


@dataclass
class Step:
    name: str
    what: str
    commands: list[list[str]]            # run in order; the first one's stdout goes to ``output``
    output: str | None = None            # file in the results folder
    needs_device: bool = False
    status: str = "pending"              # ok | failed | timed out | skipped | dry run
    reason: str = ""
    seconds: float = 0.0
    logs: list[str] = field(default_factory=list)


def slug(text: str) -> str:
    """A folder name from a device name: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown-device"


def accelerator(env: dict) -> tuple[str, dict, list[str]] | None:
    """(kind, first device record of that kind, backends that have it) of the first accelerator kind the
    environment record lists (gpu before tpu before mps), or None on a CPU-only machine."""
    backends = env.get("backends", {})
    for kind in ACCEL_KINDS:
        having = [name for name, info in backends.items() if info.get("installed") and name in ("torch", "jax")
                  and any(d.get("kind") == kind for d in info.get("devices", []))]
        if having:
            record = next(d for d in backends[having[0]]["devices"] if d.get("kind") == kind)
            return kind, record, having
    return None


def device_folder(env: dict) -> str:
    found = accelerator(env)
    if found:
        return slug(found[1].get("name") or found[1].get("id") or found[0])
    return "cpu-" + slug(((env.get("host") or {}).get("cpu") or {}).get("model") or "unknown")


def plan(env: dict, py: str) -> list[Step]:
    """The steps for this machine (its environment record); the env step itself is done by ``main``."""
    xb = [py, "-m", "xpubench"]
    found = accelerator(env)
    kind, record, backends = found if found else ("gpu|tpu|mps", {}, [])   # CPU only: the steps are skipped
    device = record.get("id", "the accelerator")
    steps = [Step("doctor", "xpubench doctor: placement, timing, precision, ceiling, memory, compile, known-good",
                  [[*xb, "doctor", "--json"]], "doctor.json")]
    steps.append(Step("tests", f"the device tests (pytest -m {kind})",
                      [[py, "-m", "pytest", "-m", kind, "-ra", "-q", "tests"]], "tests.txt", needs_device=True))
    steps.append(Step("default", "the default run (150 s budget) and its report",
                      [[*xb, "run", "--no-progress", "-o", "{out}/default.jsonl"],
                       [*xb, "report", "{out}/default.jsonl", "-o", "{out}/default.html"]], needs_device=True))
    steps.append(Step("ceilings", f"measured ceilings on {device}, against the known-good figures",
                      [[*xb, "ceilings", "-b", ",".join(backends) or "torch", "-d", device, "-p", "fp32,bf16",
                        "--budget", "45", "--refresh"],
                       [*xb, "ceilings", "--show", "--json"]], "ceilings.txt", needs_device=True))
    steps.append(Step("sweep", f"training and generation in {' and '.join(backends) or 'torch and jax'} on {kind}",
                      [[*xb, "run", "--no-progress", "-w", "mnist_cnn,cifar10_resnet,gpt", "-b",
                        ",".join(backends) or "torch,jax", "-d", kind, "--mode", "train,infer", "--quick",
                        "--processes", "2", "--budget", "420", "-o", "{out}/sweep.jsonl"],
                       [*xb, "report", "{out}/sweep.jsonl", "-o", "{out}/sweep.html"]], needs_device=True))
    return steps


def run_step(step: Step, out: Path, limit_s: float, dry: bool) -> None:
    """Run a step's commands (each within what is left of ``limit_s``); its status and logs are set."""
    start = time.monotonic()
    for i, argv in enumerate(step.commands):
        argv = [a.replace("{out}", str(out)) for a in argv]
        step.logs.append(shlex.join(argv))
        if dry:
            continue
        target = out / step.output if step.output and i == 0 else None
        if step.name == "ceilings" and i == 1:
            target = out / "ceilings.json"
        left = limit_s - (time.monotonic() - start)
        try:
            proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=max(left, 1),
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired as exc:
            _save(out, step, i, exc.stdout, exc.stderr, target)
            step.status, step.reason = "timed out", f"killed after {limit_s:.0f} s: {shlex.join(argv)}"
            break
        _save(out, step, i, proc.stdout, proc.stderr, target)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
            step.status, step.reason = "failed", f"exit {proc.returncode}: {tail[:300]}"
            break
    else:
        step.status = "dry run" if dry else "ok"
    step.seconds = round(time.monotonic() - start, 1)
    if step.name == "doctor" and step.status in ("ok", "failed") and not dry:
        step.reason = _doctor_counts(out / "doctor.json") or step.reason


def _save(out: Path, step: Step, i: int, stdout, stderr, target: Path | None) -> None:
    text = stdout.decode() if isinstance(stdout, bytes) else (stdout or "")
    err = stderr.decode() if isinstance(stderr, bytes) else (stderr or "")
    if target is not None:
        target.write_text(text)
    elif text:
        with open(out / f"{step.name}.log", "a") as fh:
            fh.write(text)
    if err.strip():
        with open(out / f"{step.name}.log", "a") as fh:
            fh.write(err)


def _doctor_counts(path: Path) -> str:
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    rows = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
    statuses = [r.get("status") for r in rows]
    said = ", ".join(f"{statuses.count(s)} {s}" for s in ("PASS", "WARN", "FAIL"))
    good = [str(r.get("reason")) for r in rows if r.get("check") == "known-good"]
    return said + ("; known-good: " + " | ".join(good) if good else "")


def summary(env: dict, steps: list[Step], folder: Path, elapsed: float, dry: bool) -> str:
    found = accelerator(env)
    name = f"{found[1].get('name')} ({found[0]})" if found else "no accelerator (CPU only)"
    lines = [f"# xpubench accelerator check: {name}", "",
             f"host {env.get('host', {}).get('hostname', '?')}; {time.strftime('%Y-%m-%d %H:%M %Z')}; "
             f"{elapsed:.0f} s in all" + ("; DRY RUN: nothing was executed" if dry else ""), "",
             "| step | status | seconds | what | note |", "|---|---|---:|---|---|"]
    for s in steps:
        lines.append(f"| {s.name} | {s.status} | {s.seconds:g} | {s.what} | {s.reason.replace('|', '/')} |")
    skipped = [s.name for s in steps if s.status == "skipped" and s.needs_device and not found]
    if skipped:
        lines += ["", f"Skipped because they need a device: {', '.join(skipped)}."]
    lines += ["", "Commands:", ""] + [f"    {log}" for s in steps for log in s.logs]
    lines += ["", (f"Everything is in {folder}; commit it as a reference, or attach it to an issue "
                   "(docs/accelerators.md, \"What to send back\").")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="accelerator_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("XPUBENCH_CHECK_OUT", str(ROOT / "results" / "reference")),
                    help="results root (default results/reference; env XPUBENCH_CHECK_OUT)")
    ap.add_argument("--dry-run", action="store_true", default=os.environ.get("XPUBENCH_CHECK_DRY") == "1",
                    help="record the commands, run none (env XPUBENCH_CHECK_DRY=1)")
    ap.add_argument("--env-file", help="plan for the machine this `xpubench env --json` file describes (with --dry-run)")
    args = ap.parse_args(argv)
    if args.env_file and not args.dry_run:
        print("accelerator_check: --env-file describes another machine: use it with --dry-run", file=sys.stderr)
        return 2
    py, began = os.environ.get("PYTHON") or sys.executable, time.monotonic()
    env_step = Step("env", "what xpubench sees: devices, peaks, frameworks", [[py, "-m", "xpubench", "env", "--json"]])
    try:
        env = json.loads(Path(args.env_file).read_text()) if args.env_file else _detect(py)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"accelerator_check: no environment record: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    folder = Path(args.out) / device_folder(env)
    folder.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS + tuple(f"{s}.log" for s in ("env", "doctor", "tests", "default", "ceilings", "sweep")):
        (folder / name).unlink(missing_ok=True)    # this check's own files only: a re-run replaces them
    (folder / "env.json").write_text(json.dumps(env, indent=1) + "\n")
    env_step.status, env_step.output = ("dry run" if args.env_file else "ok"), "env.json"
    env_step.seconds = round(time.monotonic() - began, 1)
    env_step.logs = [shlex.join(c) for c in env_step.commands]
    steps = [env_step] + plan(env, py)
    has_device = accelerator(env) is not None
    for step in steps[1:]:
        left = TOTAL_LIMIT_S - (time.monotonic() - began)
        if step.needs_device and not has_device:
            step.status, step.reason = "skipped", NEEDS_DEVICE
        elif left < MIN_STEP_S:
            step.status, step.reason = "skipped", f"the {TOTAL_LIMIT_S // 60}-minute total is spent"
        else:
            print(f"[{time.monotonic() - began:5.0f} s] {step.name}: {step.what}", flush=True)
            run_step(step, folder, min(STEP_LIMIT_S, left), args.dry_run)
    text = summary(env, steps, folder, time.monotonic() - began, args.dry_run)
    (folder / "summary.md").write_text(text)
    (folder / "summary.json").write_text(json.dumps({"device": device_folder(env), "dry_run": args.dry_run,
                                                     "steps": [asdict(s) for s in steps]}, indent=1) + "\n")
    print(text, end="")
    return 1 if any(s.status in ("failed", "timed out") for s in steps) else 0


def _detect(py: str) -> dict:
    proc = subprocess.run([py, "-m", "xpubench", "env", "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=STEP_LIMIT_S, stdin=subprocess.DEVNULL, check=False)
    if proc.returncode != 0:
        raise RuntimeError((proc.stderr.strip().splitlines() or ["xpubench env failed"])[-1])
    return json.loads(proc.stdout)


if __name__ == "__main__":
    sys.exit(main())
