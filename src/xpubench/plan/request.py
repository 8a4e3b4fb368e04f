"""A request (``PlanRequest``: what the user asked for, None meaning "the default"), and the run-level
defaults it leaves open, each decided here once and read by the command line, the notebook API and the
planner alike (docs/architecture.md, "Where each default is decided"):

- ``workloads_of``: the workloads it runs: those named (-w), else those its options select (``--preset``,
  ``--selftest``: the workloads that have the option), else none beside a user's model, else the default
  run's;
- ``is_quick``: whether its cases are brief (a few steps each): ``--quick``, else whether no workload is
  named with -w (the brief run, ``--all``, ``--model``, ``--preset`` alone);
- ``is_brief``: whether it is the brief default run (plan/brief.py): brief, and naming nothing to run (no
  workload, model, selecting option or ``--all``); ``xpubench run`` and ``xpubench.run()`` both are;
- ``budget_s``: the run's budget: ``--budget``, else ``BRIEF_BUDGET_S`` for the brief run, else none;
- ``worker_processes``: worker processes per case: ``--processes``, else 5 seeds where a case trains to
  a target (plan/target.py), else ``DEFAULT_PROCESSES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xpubench.case import COMPILE_SETTINGS, DATA_SOURCES
from xpubench.plan.target import TARGET_SEEDS
from xpubench.workloads import default_run, get_workload, option_rows

DEFAULT_PROCESSES = 3       # worker processes per case (docs/methodology.md, "Two levels of noise")
BRIEF_BUDGET_S = 150.0      # the brief run's budget (issue 17: 97-257 s measured without one)


@dataclass
class PlanRequest:
    """What the user asked for; None means "the default for this workload / machine"."""

    workloads: list[str] | None = None
    backends: list[str] | None = None
    devices: list[str] | None = None          # device spellings, resolved against the environment
    precisions: list[str] | None = None
    batch_sizes: list[int] | None = None
    sizes: list[int] | None = None
    modes: list[str] | None = None
    device_counts: list[int] | None = None    # data-parallel N per case
    epochs: int | None = None
    steps: int | None = None
    train_samples: int | None = None
    eval_samples: int | None = None
    time_budget_s: float | None = None
    data: str = DATA_SOURCES[0]
    data_dir: str | None = None
    compile: str = COMPILE_SETTINGS[0]
    seed: int = 0
    quick: bool | None = None                 # None: brief when no workload is named (``is_quick``)
    all_cases: bool = False                   # the default run: every workload, size and dtype (plan/brief.py)
    scaling: bool = False                     # sweep N = 1, 2, 4, ... devices
    model: str | None = None                  # a user's model, "FILE.py:FUNCTION" (usermodel/)
    input_shape: str | None = None            # its input, "28,28,1" (one sample, no batch axis)
    input_dtype: str | None = None            # "float32" | "int32"
    task: str | None = None                   # "classes:N" | "binary" | "regression:N" | "tokens:VOCAB"
    vocab_size: int | None = None             # its token ids (int32 inputs): how many distinct ids
    prices: dict[str, float] = field(default_factory=dict)  # device ("cpu", "gpu", "gpu:1") -> USD per hour
    budget_s: float | None = None             # the whole run's seconds, worker start and compile included
    target: str | None = None                 # a quality target, "accuracy=0.975" (plan/target.py)
    eval_every: int | None = None             # with a target: evaluate every N steps (default: every epoch)
    users: list[int] | None = None            # --mode serve: the closed-loop points' users (plan/serve.py)
    rates: list[float] | None = None          # --mode serve: the open-loop points' requests/s
    headers: dict[str, str] = field(default_factory=dict, repr=False)   # a --url server's credentials (in no case)
    options: dict[str, Any] = field(default_factory=dict)


def selected(req: PlanRequest) -> list[str]:
    """The workloads the request's options select (``WorkloadOption.selects``: --selftest the selftest,
    --preset the workloads that have that preset), in registry order."""
    options = req.options if isinstance(req.options, dict) else {}
    return list(dict.fromkeys(name for name, row in option_rows() if row.selects and row.key in options
                              and (not row.choices or options[row.key] in row.choices)))


def workloads_of(req: PlanRequest, spans: int = 1) -> list[str]:
    """The workloads the request runs (module docstring); over ``spans`` processes (several hosts) the
    default run leaves matmul out (it runs on one device)."""
    if req.workloads or selected(req):
        return list(req.workloads or selected(req))
    if req.model:
        return []   # --model alone runs that model only
    return [w for w in default_run() if not (spans > 1 and get_workload(w).kind == "matmul")]


def is_quick(req: PlanRequest) -> bool:
    """Whether the request's cases are brief: ``quick`` as given, else no workload named with -w."""
    return bool(req.quick) if req.quick is not None else not req.workloads


def is_brief(req: PlanRequest) -> bool:
    """Whether the request is the brief default run (plan/brief.py): brief, and naming nothing to run."""
    return is_quick(req) and not (req.workloads or req.model or req.all_cases or selected(req))


def budget_s(req: PlanRequest) -> float | None:
    """The run's budget in seconds: the one asked for, else ``BRIEF_BUDGET_S`` for the brief run, else
    None (unlimited)."""
    if req.budget_s is not None:
        return float(req.budget_s)
    return BRIEF_BUDGET_S if is_brief(req) else None


def worker_processes(cases, asked: int | None = None) -> int:
    """Worker processes per case: ``asked`` (--processes), else ``TARGET_SEEDS`` when a case trains to a
    target (each process is one seed), else ``DEFAULT_PROCESSES``."""
    if asked:
        return asked
    return TARGET_SEEDS if any(c.options.get("target") for c in cases) else DEFAULT_PROCESSES
