"""The accelerator check's plan (scripts/accelerator_check.py runs it): the machine's accelerator and
folder, the steps and their commands, how the budget is shared among them, and the summary's text.
Pure functions of an ``xpubench env --json`` record and a budget: the tests plan recorded machines
(tests/data/machines/) with them, and ``--dry-run`` prints what they decide."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MINUTES = 8.0
JOB_END_MARGIN_S = 20.0   # end this long before the scheduler's end time (it sends SIGTERM there)
JOB_END_WITHIN_S = 366 * 86400.0   # a job's end time further than this from now is not believed
RESERVE_S = 5.0           # kept after the last step: the last summary and the interpreter's exit
KILL_GRACE_S = 3.0        # a step's process group gets SIGTERM this long before its limit, then SIGKILL
DETECT_S = 15.0           # one xpubench command's start: imports and device detection (estimate)
CHILD_S = 10.0            # one ceiling child process's start: a framework's import and device set-up
REPORT_S = 15.0           # `xpubench report` of a small results file
ACCEL_KINDS = ("gpu", "tpu", "mps")
NEEDS_DEVICE = "needs a GPU, TPU or Apple GPU (none found here)"
OLDEST = {"torch": (2, 6), "jax": (0, 5)}   # the oldest releases whose APIs the steps' code paths use
TRAIN_WORKLOAD = "cifar10_resnet"   # ResNet-20 at batch 1024: a real convolutional training step
# (share, least, most) in seconds: at 8 minutes the shares are the planned seconds themselves
SHARES = {"env": (55, 20, 120), "doctor": (75, 30, 240), "matmul": (95, 40, 600), "bandwidth": (30, 15, 120),
          "train": (85, 45, 900), "llama": (85, 45, 900), "tests": (50, 30, math.inf)}
WHAT = {"env": "what xpubench sees: devices, peaks, frameworks",
        "doctor": "placement, timing, precision, ceiling, memory, compile, known-good",
        "matmul": "bf16 and fp32 matmul ceilings against the published known-good figures",
        "bandwidth": "copy / triad memory bandwidth",
        "train": f"a brief {TRAIN_WORKLOAD} training case per framework, and its report",
        "llama": "a llama generation case per framework (prompt 512 + 128 new tokens; MLX-LM too on an Apple GPU), and "
                 "its report",
        "tests": "the device tests"}


@dataclass
class Command:
    argv: list[str]
    stdout: str | None = None    # the file (in the folder) that gets its stdout; else the step's log
    needs: str | None = None     # run only when this file exists in the folder (a report's results file)


@dataclass
class Step:
    name: str
    needs_device: bool
    build: Callable[[float], list[Command]] = field(repr=False)   # the commands for a limit in seconds
    env: dict = field(default_factory=dict)
    note: str = ""               # said in the summary whatever the status (e.g. a framework left out)
    status: str = "pending"      # pending | running | ok | failed | cut | skipped | stopped | dry run
    reason: str = ""
    planned_s: float | None = None
    limit_s: float | None = None
    started_s: float | None = None
    seconds: float | None = None
    commands: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"name": self.name, "what": WHAT[self.name], "status": self.status, "reason": self.reason,
                "note": self.note, "planned_s": self.planned_s, "limit_s": self.limit_s,
                "started_s": self.started_s, "seconds": self.seconds, "commands": self.commands}


# ---- the machine and its plan -------------------------------------------------------------------

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


def model_ready(env: dict, backend: str) -> str | None:
    """Why ``backend`` cannot build the workloads' models here (JAX's are flax models trained with optax),
    or None. A record without package versions (an older env file) is taken as having them."""
    packages = env.get("packages")
    if backend != "jax" or packages is None:
        return None
    missing = [p for p in ("flax", "optax") if not packages.get(p)]
    return f"jax left out: its models need {' and '.join(missing)} (not installed)" if missing else None


def apple_mlx(env: dict) -> bool:
    """Whether MLX is installed and sees the Apple GPU (its ``mps`` device: backends/mlx_): the llama step then
    runs MLX-LM on Metal beside the frameworks."""
    info = (env.get("backends") or {}).get("mlx") or {}
    return bool(info.get("installed")) and any(d.get("kind") == "mps" for d in info.get("devices") or [])


def device_test_files(kind: str) -> list[str]:
    """The test files that hold tests marked ``kind``, end-to-end ones (the longest) last."""
    files = [p for p in (ROOT / "tests").glob("test_*.py") if re.search(rf"mark\.{kind}\b", p.read_text())]
    return [f"tests/{p.name}" for p in sorted(files, key=lambda p: ("e2e" in p.name, p.name))]


def plan(env: dict, py: str) -> list[Step]:
    """The steps for the machine ``env`` describes, in order; device steps carry the device's facts."""
    xb = [py, "-m", "xpubench"]
    found = accelerator(env)
    steps = [Step("env", False, lambda limit: [Command([*xb, "env", "--json"], "env.json")], note=too_old(env))]
    kind, record, backends = found if found else ("gpu", {}, [])
    device = record.get("id", kind)
    on_device = ["-b", ",".join(backends), "-d", kind] if found else []
    steps.append(Step("doctor", False, lambda limit: [   # the machine the env step just detected, not detected again
        Command([*xb, "doctor", "--json", *on_device, "--env-file", "{out}/env.json"], "doctor.json", "env.json")]))

    def matmul(limit: float) -> list[Command]:
        per = max(3.0, (limit - DETECT_S - CHILD_S * len(backends)) / (2 * max(len(backends), 1)))
        return [Command([*xb, "ceilings", "-b", ",".join(backends), "-d", device, "-p", "bf16,fp32",
                         "--no-bandwidth", "--refresh", "--budget", f"{per:.0f}"], "ceilings.txt")]

    steps.append(Step("matmul", True, matmul, note=_known_good(record, backends)))
    steps.append(Step("bandwidth", True, lambda limit: [
        Command([*xb, "ceilings", "-b", ",".join(backends), "-d", device, "--bandwidth-only", "--refresh", "--json"],
                "ceilings.json")]))
    ready = [b for b in backends if model_ready(env, b) is None]
    left_out = "; ".join(filter(None, (model_ready(env, b) for b in backends)))
    precision = _model_precision(env, ready[0], device) if found and ready else "bf16"
    for name, args in (("train", ["-w", TRAIN_WORKLOAD, "--mode", "train", "--quick"]), ("llama", ["-w", "llama"])):
        runtimes = ready + (["mlx"] if name == "llama" and found and apple_mlx(env) else [])

        def run(limit: float, name=name, args=args, runtimes=runtimes) -> list[Command]:
            budget = max(10.0, limit - REPORT_S - KILL_GRACE_S - 2)
            return [Command([*xb, "run", *args, "-b", ",".join(runtimes), "-d", device, "-p", precision, "--processes",
                             "2", "--budget", f"{budget:.0f}", "--no-progress", "-o", f"{{out}}/{name}.jsonl"]),
                    Command([*xb, "report", f"{{out}}/{name}.jsonl", "-o", f"{{out}}/{name}.html"],
                            needs=f"{name}.jsonl")]

        step = Step(name, True, run, note=left_out)
        if found and not ready:
            step.status, step.reason = "skipped", left_out
        steps.append(step)
    files = device_test_files(kind)
    steps.append(Step("tests", True, lambda limit: [Command(
        [py, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-p", "no:random_order", "-m", kind,
         "-ra", "-v", *files], "tests.txt")], env={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}))
    for step in steps:
        if step.needs_device and not found:
            step.status, step.reason = "skipped", NEEDS_DEVICE
    return steps


def too_old(env: dict) -> str:
    """Which installed framework is older than OLDEST (its steps may fail there), or ""."""
    from xpubench.devices.precisions import release

    old = [f"{b} {info.get('version')} (oldest supported {'.'.join(map(str, OLDEST[b]))})"
           for b, info in env.get("backends", {}).items() if b in OLDEST and info.get("installed")
           and (release(info.get("version")) or (0,))[:2] < OLDEST[b]]
    return ("older than supported: " + ", ".join(old)) if old else ""


def _known_good(record: dict, backends: list[str]) -> str:
    """What the matmul ceilings will be compared with (devices/knowngood.py), one line."""
    from xpubench.devices import knowngood

    if not record:
        return ""
    return knowngood.planned(record, "torch" if "torch" in backends else backends[0], ["bf16", "fp32"])


def _model_precision(env: dict, backend: str, device: str) -> str:
    """The device's 16-bit training format as the default plan picks it (bf16; fp16 on pre-Ampere NVIDIA;
    fp32 where no 16-bit training is planned), for the training and the generation case alike."""
    from xpubench.plan.defaults import model_precisions

    return model_precisions(env, backend, device)[-1]


# ---- the budget -----------------------------------------------------------------------------------

def job_budget(minutes: float | None, environ: dict, now: float) -> tuple[float, str]:
    """(seconds, where they come from): ``--minutes``, capped by the job's end when the scheduler says
    it (``SLURM_JOB_END_TIME``, epoch seconds, less JOB_END_MARGIN_S); the job's end alone; else 8 minutes.
    An end time that is not a number of seconds within a year of ``now`` (``soon``, 400 digits) is ignored,
    and the source says so."""
    end_text = environ.get("SLURM_JOB_END_TIME", "")
    number = re.fullmatch(r"\d{1,15}(\.\d{1,9})?", end_text)
    if not number or abs(float(end_text) - now) > JOB_END_WITHIN_S:
        shown = repr(end_text if len(end_text) <= 20 else end_text[:20] + "...")
        why = f"SLURM_JOB_END_TIME {shown} is not a time within a year: ignored" if end_text else \
            "no job end time found"
        if minutes is not None:
            return minutes * 60, f"--minutes {minutes:g}" + (f" ({why})" if end_text else "")
        return DEFAULT_MINUTES * 60, f"the default {DEFAULT_MINUTES:g} minutes ({why})"
    job_left = float(end_text) - now - JOB_END_MARGIN_S
    if minutes is not None and minutes * 60 <= job_left:
        return minutes * 60, f"--minutes {minutes:g}"
    said = f"the job ends in {job_left + JOB_END_MARGIN_S:.0f} s (SLURM_JOB_END_TIME), less {JOB_END_MARGIN_S:.0f} s"
    return max(job_left, 0.0), said + (f", under --minutes {minutes:g}" if minutes is not None else "")


def allot(name: str, later: list[str], left_s: float) -> float:
    """A step's seconds: its share of the time left (less RESERVE_S) among it and the steps still to run
    after it (``later``: their names), raised to its least where the time left allows (the earlier step
    is the more valuable one), at most its cap. Time a step did not use goes to the later ones."""
    share, least, most = SHARES[name]
    usable = max(left_s - RESERVE_S, 0.0)
    return min(most, usable, max(least, usable * share / (share + sum(SHARES[n][0] for n in later))))


def schedule(steps: list[Step], budget_s: float, nominal: bool = False) -> None:
    """Each pending step's planned seconds, as if every step used its whole allotment (the worst case);
    a step whose allotment would be under its least is planned at 0 (it would be skipped). ``nominal``:
    plan as if every step of SHARES followed (before detection says which will run)."""
    left = budget_s
    pending = [s for s in steps if s.status == "pending"]
    for i, step in enumerate(pending):
        later = list(SHARES)[list(SHARES).index(step.name) + 1:] if nominal else [s.name for s in pending[i + 1:]]
        seconds = allot(step.name, later, left)
        step.planned_s = round(seconds) if seconds >= SHARES[step.name][1] else 0
        left -= step.planned_s


# ---- what the plan and the summary say ---------------------------------------------------------------

def machine_line(env: dict) -> str:
    found = accelerator(env)
    if not found:
        return "no accelerator (CPU only)"
    kind, record, backends = found
    count = sum(d.get("kind") == kind for d in env["backends"][backends[0]].get("devices", []))
    versions = ", ".join(f"{b} {env['backends'][b].get('version')}" for b in backends)
    return f"{count} x {record.get('name') or record.get('id')} ({kind}; {versions})"


def render_plan(steps: list[Step], budget_s: float, source: str, env: dict) -> str:
    """The plan as a table: each step's planned seconds (every step using its whole share) and the total
    against the budget."""
    lines = [f"accelerator check plan for {machine_line(env)}", f"budget {budget_s:.0f} s: {source}", "",
             f"{'step':<10} {'planned s':>9}  what (a step already done: the seconds it took)"]
    for s in steps:
        done = s.seconds if s.seconds is not None else 0 if s.status != "pending" else None
        planned = f"{s.planned_s:.0f}" if done is None else f"{done:.0f}"
        said = WHAT[s.name] + ("" if done is None else f" [{s.status}" + (f": {s.reason}]" if s.reason else "]"))
        lines.append(f"{s.name:<10} {planned:>9}  {said}" + (f" ({s.note})" if s.note else ""))
    total = sum((s.planned_s or 0) if s.status == "pending" else (s.seconds or 0) for s in steps)
    verdict = "fits" if total <= budget_s else "DOES NOT FIT"
    lines.append(f"{'total':<10} {total:>9.0f}  of {budget_s:.0f} s ({budget_s / 60:g} minutes): {verdict}")
    return "\n".join(lines) + "\n"


def render_summary(data: dict, folder: Path) -> str:
    """summary.md from the summary's record (the same facts as summary.json)."""
    name = f"{data['name']} ({data['kind']})" if data["name"] else "no accelerator (CPU only)"
    state = data["state"]
    if state.startswith("running"):
        state += (" -- if the job has ended, it was killed during this step: the steps above it finished, "
                  "the ones below never started")
    lines = [f"# xpubench accelerator check: {name}", "",
             f"- host {data['host']}, started {data['started_utc']}, load average at start {data['load_at_start']}",
             f"- frameworks: {', '.join(f'{k} {v}' for k, v in data['frameworks'].items())}",
             f"- budget {data['budget_s']} s ({data['budget_source']}); {data['elapsed_s']:.0f} s used"
             + ("" if data["within_budget"] else " (OVER the budget)"),
             f"- state: {state}" + ("; DRY RUN: nothing was executed" if data["dry_run"] else ""), "",
             "| step | status | planned s | limit s | seconds | what | note |", "|---|---|---:|---:|---:|---|---|"]
    for s in data["steps"]:
        note = "; ".join(filter(None, (s["reason"], s["note"]))).replace("|", "/")
        cells = [s["name"], s["status"], _n(s["planned_s"]), _n(s["limit_s"]), _n(s["seconds"]), s["what"], note]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Commands:", ""] + [f"    {c}" for s in data["steps"] for c in s["commands"]]
    lines += ["", f"Everything is in {folder}: send it back as docs/accelerators.md says (\"What to send back\")."]
    return "\n".join(lines) + "\n"


def _n(value) -> str:
    return "" if value is None else f"{value:g}"
