"""The accelerator check: what a short job on a GPU, TPU or Apple GPU should measure, within one time
budget, into ``results/reference/<device>/``. Run it as ``bash scripts/accelerator_check.sh`` from a
source checkout (docs/accelerators.md); nothing needs installing beyond torch and/or jax.

Steps, most valuable first, all sharing one budget (``--minutes``; default: the time left before the
job's end, ``SLURM_JOB_END_TIME``, else 8 minutes; measured from the shell's start):

1. env        ``xpubench env --json``                                    every machine
2. doctor     ``xpubench doctor --json`` (on the accelerator)             every machine
3. matmul     ``xpubench ceilings -p bf16,fp32 --no-bandwidth``: the matmul ceilings, each compared
              with the published known-good figure (devices/knowngood.py)          needs a device
4. bandwidth  ``xpubench ceilings --bandwidth-only --json``: copy / triad GB/s          needs a device
5. train      ``xpubench run -w cifar10_resnet --mode train --quick``, one case per framework, + report
6. llama      ``xpubench run -w llama`` (smollm-135m shape, prompt 512 + 128 new), per framework (and MLX-LM
              on Metal where MLX sees the Apple GPU), + report
7. tests      ``pytest -o addopts= -m gpu|tpu|mps`` on the files holding device tests (no plugin needed)

Each step gets its share of the time left among the steps still to run (``SHARES``: capped, and a step
that would get less than its least is skipped saying so); a command's own budget (``--budget``) is
sized from it. A step still running at its limit is killed with its whole process group ("cut": what it
wrote so far is kept). ``summary.md`` / ``summary.json`` are rewritten (atomically) when a step starts
and when it ends, so a job killed at any moment leaves a folder that says what finished, what was
running and what never started; SIGTERM (a scheduler's time limit) ends the running step and records it.

``--dry-run`` runs nothing and prints the plan: each step's planned seconds (as if every step used its
whole share) and whether the plan fits the budget; ``--env-file FILE`` plans another machine from its
``xpubench env --json``. Exit code: 1 when a step that ran failed (a doctor FAIL included), 2 for bad
arguments, 128 + the signal when stopped, else 0 (a step cut at its limit is said, not an error).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # the plan module beside this file
from accelerator_check_plan import (
    KILL_GRACE_S,
    ROOT,
    SHARES,
    WHAT,
    Command,
    Step,
    accelerator,
    allot,
    device_folder,
    job_budget,
    plan,
    render_plan,
    render_summary,
    schedule,
)


class Stopped(Exception):
    """The check was told to stop (SIGTERM/SIGINT: a scheduler's time limit or ^C)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# ---- running the steps -------------------------------------------------------------------------------

def run_command(argv: list[str], stdout: Path, log: Path, timeout_s: float, env: dict) -> int | None:
    """Run ``argv`` in its own process group (stdout to ``stdout``, stderr to ``log``); its exit code, or
    None when it was still running at ``timeout_s``: the whole group (a run's worker processes too) then
    gets SIGTERM, and SIGKILL after KILL_GRACE_S."""
    with open(stdout, "ab") as out, open(log, "ab") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        try:
            return proc.wait(timeout=max(timeout_s - KILL_GRACE_S, 0.5))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return None
        except BaseException:
            _kill_group(proc)
            raise


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


OWN_FILES = ("env.json", "doctor.json", "ceilings.txt", "ceilings.json", "tests.txt", "summary.md", "summary.json",
             *(f"{n}.{ext}" for n in ("train", "llama") for ext in ("jsonl", "jsonl.plan.json", "html")),
             *(f"{n}.log" for n in SHARES))


class Check:
    """One check, run in order within ``budget_s`` from ``t0`` (a ``clock`` reading). Without ``env`` the
    env step detects this machine first (into a staging folder, then the device's folder). The clock and
    the command runner are injectable: the tests use a fake clock and a fake device."""

    def __init__(self, env: dict | None, out: Path, budget_s: float, budget_source: str, *, py: str,
                 dry: bool = False, clock: Callable[[], float] = time.monotonic, t0: float | None = None,
                 runner: Callable[..., int | None] = run_command, environ: dict | None = None):
        self.env, self.out, self.py, self.dry, self.clock, self.runner = env or {}, out, py, dry, clock, runner
        self.budget_s, self.budget_source = budget_s, budget_source
        self.t0 = clock() if t0 is None else t0
        self.steps = plan(self.env, py) if env else plan({}, py)[:1]
        self.folder = out / device_folder(self.env) if env else out / f".env-{os.getpid()}"
        self.environ = dict(os.environ if environ is None else environ)
        self.state = "starting"
        self.simulated = 0.0          # a dry run's clock: every step takes its whole allotment
        self.planning_only = dry and bool(env)   # another machine's plan: only the simulated clock counts
        self.started_utc = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        self.load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
        _clear(self.folder)

    def elapsed(self) -> float:
        return self.simulated + (0.0 if self.planning_only else self.clock() - self.t0)

    def run(self) -> int:
        schedule(self.steps, self.budget_s - self.elapsed(), nominal=not self.env)
        try:
            if not self.env:
                self._run_step(self.steps[0], list(SHARES)[1:], dry=False)   # detection runs even in a dry run
                self._adopt_environment()
            for i, step in enumerate(self.steps):
                if step.status == "pending":
                    self._run_step(step, [s.name for s in self.steps[i + 1:] if s.status == "pending"], self.dry)
        except Stopped as exc:
            running = next((s for s in self.steps if s.status == "running"), None)
            for s in self.steps:
                if s is running:
                    s.status, s.reason = "stopped", f"the check was stopped ({exc}) during this step"
                    s.seconds = round(self.elapsed() - (s.started_s or 0), 1)
                elif s.status == "pending":
                    s.status, s.reason = "skipped", f"the check was stopped ({exc}) before this step"
            self.state = f"stopped by {exc}" + (f" during {running.name}" if running else "")
            self.write_summary()
            return 128 + exc.signum
        self.state = "finished"
        self.write_summary()
        return 1 if any(s.status == "failed" for s in self.steps) else 0

    def _adopt_environment(self) -> None:
        """After the env step: the machine's record, its folder (the staging folder's files moved there)
        and the plan of the remaining steps."""
        env_step, staging = self.steps[0], self.folder
        try:
            env = json.loads((staging / "env.json").read_text()) if env_step.status == "ok" else None
        except (OSError, ValueError) as exc:
            env_step.status, env_step.reason, env = "failed", f"env.json unreadable: {exc}", None
        self.env = env or {}
        self.folder = self.out / (device_folder(env) if env else "unknown-device")
        self.folder.mkdir(parents=True, exist_ok=True)
        _clear(self.folder)
        for path in staging.iterdir():
            os.replace(path, self.folder / path.name)
        staging.rmdir()
        rest = plan(self.env, self.py)[1:]
        for step in rest if env is None else ():
            step.status, step.reason = "skipped", f"no environment record (the env step: {env_step.reason})"
        self.steps = [env_step, *rest]
        schedule(rest, self.budget_s - self.elapsed())
        self.write_summary()
        print(render_plan(self.steps, self.budget_s, self.budget_source, self.env), flush=True)

    def _run_step(self, step: Step, later: list[str], dry: bool) -> None:
        left = self.budget_s - self.elapsed()
        limit = allot(step.name, later, left)
        least = SHARES[step.name][1]
        if limit < least:
            step.status = "skipped"
            step.reason = (f"not started: {max(left, 0):.0f} s of the {self.budget_s:.0f} s budget left, {limit:.0f} s "
                           f"for this step, which needs at least {least:.0f} s")
            self.write_summary()
            return
        step.limit_s, step.started_s, step.status = round(limit), round(self.elapsed(), 1), "running"
        self.state = f"running {step.name}"
        self.write_summary()
        print(f"[{self.elapsed():5.0f} s] {step.name} (up to {limit:.0f} s): {WHAT[step.name]}", flush=True)
        start = self.elapsed()
        if dry:
            step.commands = [shlex.join(self._argv(c)) for c in step.build(limit)]
            step.status, self.simulated = "dry run", self.simulated + limit
        else:
            self._execute(step, limit, start)
        step.seconds = round(self.elapsed() - start, 1)
        if step.name == "doctor" and step.status in ("ok", "failed"):
            step.reason = doctor_counts(self.folder / "doctor.json") or step.reason
        self.write_summary()

    def _argv(self, command: Command) -> list[str]:
        return [a.replace("{out}", str(self.folder)) for a in command.argv]

    def _execute(self, step: Step, limit: float, start: float) -> None:
        log, failure = self.folder / f"{step.name}.log", ""
        env = {**self.environ, "COLUMNS": "160", **step.env}
        for command in step.build(limit):
            if command.needs and not (self.folder / command.needs).exists():
                failure = failure or f"{command.needs} was not written"
                continue
            argv = self._argv(command)
            left = limit - (self.elapsed() - start)
            step.commands.append(shlex.join(argv))
            code = self.runner(argv, self.folder / command.stdout if command.stdout else log, log, left, env)
            if code is None:
                step.status = "cut"
                step.reason = (f"killed at its {limit:.0f} s limit during `{shlex.join(argv[1:5])} ...`; "
                               "what it wrote is kept")
                return
            if code != 0 and not failure:
                failure = f"exit {code}: {last_line(log)}"
        step.status, step.reason = ("failed", failure) if failure else ("ok", "")

    # ---- the summary, written after every change -----------------------------------------------------

    def summary(self) -> dict:
        found = accelerator(self.env)
        elapsed = round(self.elapsed(), 1)
        return {"device": self.folder.name, "name": found[1].get("name") if found else None,
                "kind": found[0] if found else "cpu", "dry_run": self.dry, "state": self.state,
                "budget_s": round(self.budget_s), "budget_source": self.budget_source, "elapsed_s": elapsed,
                "within_budget": elapsed <= self.budget_s, "planned_s": sum(s.planned_s or 0 for s in self.steps),
                "started_utc": self.started_utc, "host": (self.env.get("host") or {}).get("hostname"),
                "load_at_start": self.load, "frameworks": {b: i.get("version") for b, i in
                                                          self.env.get("backends", {}).items() if i.get("installed")},
                "steps": [s.as_dict() for s in self.steps]}

    def write_summary(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        data = self.summary()
        _atomic_write(self.folder / "summary.json", json.dumps(data, indent=1) + "\n")
        _atomic_write(self.folder / "summary.md", render_summary(data, self.folder))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    return (lines or ["no output"])[-1].strip()[:300]


def doctor_counts(path: Path) -> str:
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    rows = [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []
    statuses = [r.get("status") for r in rows]
    said = ", ".join(f"{statuses.count(s)} {s}" for s in ("PASS", "WARN", "FAIL"))
    good = [str(r.get("reason")) for r in rows if r.get("check") == "known-good"]
    return said + ("; known-good: " + " | ".join(good) if good else "")


def _clear(folder: Path) -> None:
    """This check's own files in ``folder`` (a re-run replaces them; anything else there is kept)."""
    for name in OWN_FILES:
        (folder / name).unlink(missing_ok=True)


def _since_shell_start(environ: dict) -> float:
    """Seconds since the shell script started (XPUBENCH_CHECK_T0, its `date +%s.%N`): the budget counts
    the interpreter's start too. 0 when unset or implausible."""
    try:
        since = time.time() - float(environ.get("XPUBENCH_CHECK_T0", ""))
    except ValueError:
        return 0.0
    return since if 0 <= since < 600 else 0.0


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 24 * 60:
        raise argparse.ArgumentTypeError(f"expected minutes between 0 and 1440, got {text!r}")
    return value


def _stop(signum, frame) -> None:
    raise Stopped(signum)


def main(argv: list[str] | None = None, *, clock: Callable[[], float] = time.monotonic,
         runner: Callable[..., int | None] = run_command, environ: dict | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    ap = argparse.ArgumentParser(prog="accelerator_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=_minutes, default=None,
                    help="the whole check's budget (default: until SLURM_JOB_END_TIME less 20 s, else 8)")
    ap.add_argument("--out", default=environ.get("XPUBENCH_CHECK_OUT", str(ROOT / "results" / "reference")),
                    help="results root (default results/reference; env XPUBENCH_CHECK_OUT)")
    ap.add_argument("--dry-run", action="store_true", default=environ.get("XPUBENCH_CHECK_DRY") == "1",
                    help="print the plan and record the commands, run none (env XPUBENCH_CHECK_DRY=1)")
    ap.add_argument("--env-file",
                    help="plan for the machine this `xpubench env --json` file describes (with --dry-run)")
    args = ap.parse_args(argv)
    if args.env_file and not args.dry_run:
        print("accelerator_check: --env-file describes another machine: use it with --dry-run", file=sys.stderr)
        return 2
    t0 = clock() - _since_shell_start(environ)
    budget_s, source = job_budget(args.minutes, environ, time.time())
    env = None
    if args.env_file:
        from xpubench.backends.envfile import load_environment
        from xpubench.errors import UserError

        try:
            env = load_environment(args.env_file)
        except UserError as exc:
            print(f"accelerator_check: {' '.join(str(exc).split())}", file=sys.stderr)
            return 2
    check = Check(env, Path(args.out), budget_s, source, py=environ.get("PYTHON") or sys.executable,
                  dry=args.dry_run, clock=clock, t0=t0, runner=runner, environ=environ)
    if env:
        check.folder.mkdir(parents=True, exist_ok=True)
        (check.folder / "env.json").write_text(json.dumps(env, indent=1) + "\n")
        schedule(check.steps, budget_s)
        print(render_plan(check.steps, budget_s, source, env), flush=True)
    handlers = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = check.run()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    print((check.folder / "summary.md").read_text(), end="")
    return code


if __name__ == "__main__":
    sys.exit(main())
