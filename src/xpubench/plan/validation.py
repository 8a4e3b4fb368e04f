"""The validation of a request (``validate``): everything about a PlanRequest that can be checked without
looking at the machine, each wrong value one line (a UserError), whether it came from a flag, a config file
or a Python keyword. What the machine decides (a backend not installed, a device not present, more devices
than exist) is checked while the cases are built (plan/__init__.py ``build_cases``).

The names a request may ask for are declared here: ``PRECISIONS``, ``MODES`` (and the workloads' and
backends' registries), with ``LIST_LABELS``, how a message names each list field.
"""

from __future__ import annotations

from pathlib import Path

from xpubench.case import COMPILE_SETTINGS, DATA_SOURCES, SERVE, SYNC_MODES
from xpubench.errors import UserError
from xpubench.plan import prices, serve, target
from xpubench.plan.defaults import backend_ids
from xpubench.plan.devices import processes
from xpubench.plan.request import PlanRequest, is_quick, workloads_of
from xpubench.workloads import REGISTRY, check_options, get_workload

PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "int8", "int4")
MODES = ("train", "infer", target.TIME_TO_TARGET, SERVE)   # time-to-target: training to a target; serve: a
#                                                          server under load (plan/serve.py)


def _check_choice(kind: str, values: list[str] | None, allowed) -> None:
    for v in values or []:
        if v not in allowed:
            raise UserError(f"unknown {kind} {v!r}; choose from: {', '.join(allowed)}")


def _check_positive(name: str, value) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise UserError(f"{name} must be a positive whole number, got {value!r}")


def _check_list(name: str, value) -> None:
    if value is not None and not isinstance(value, (list, tuple)):
        raise UserError(f"{name} must be a list, got {value!r}")
    if value is not None and len(value) == 0:
        raise UserError(f"empty {name} list: nothing to run")


def validate(req: PlanRequest) -> None:
    """Everything about the request that can be checked without looking at the machine."""
    for name, label in LIST_LABELS.items():
        _check_list(label, getattr(req, name))
    _check_choice("workload", req.workloads, list(REGISTRY))
    _check_choice("backend", req.backends, backend_ids())
    _check_choice("precision", req.precisions, PRECISIONS)
    _check_choice("mode", req.modes, MODES)
    _check_choice("data source", [req.data], DATA_SOURCES)
    _check_choice("compile setting", [req.compile], COMPILE_SETTINGS)
    for v in req.devices or []:
        if not isinstance(v, str) or not v.strip():
            raise UserError(f"a device must be a name like cpu, gpu, gpu:1 or tpu, got {v!r}")
    for name in ("batch_sizes", "sizes", "users"):
        for v in getattr(req, name) or []:
            _check_positive(LIST_LABELS[name], v)
    serve.check(req)             # --concurrency, --rate: a serve sweep's points (plan/serve.py)
    for v in req.device_counts or []:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise UserError(f"--devices must be a positive whole number or 'all', got {v!r}")
    if req.scaling and req.device_counts:
        raise UserError("--scaling sweeps the device count itself: drop --devices")
    for name in ("epochs", "steps", "train_samples", "eval_samples"):
        _check_positive(name.replace("_", " "), getattr(req, name))
    tb = req.time_budget_s
    if tb is not None and (isinstance(tb, bool) or not isinstance(tb, (int, float)) or not tb > 0):
        raise UserError(f"time budget must be > 0 seconds, got {tb!r}")
    if isinstance(req.seed, bool) or not isinstance(req.seed, int):
        raise UserError(f"seed must be a whole number, got {req.seed!r}")
    if not isinstance(req.options, dict):
        raise UserError(f"options must be a table of name = value, got {req.options!r}")
    if req.data_dir is not None and not isinstance(req.data_dir, str):
        raise UserError(f"data directory must be a path, got {req.data_dir!r}")
    if req.data == "real" and req.data_dir is not None and not Path(req.data_dir).expanduser().exists():
        raise UserError(f"data directory {req.data_dir} does not exist; pass the folder that holds the "
                        "dataset's files as --data-dir")
    sync = req.options.get("sync")
    if sync is not None and sync not in SYNC_MODES:
        raise UserError(f"sync must be {' or '.join(SYNC_MODES)}, got {sync!r}")
    if req.options.get("download") and req.data != "real":
        raise UserError("download fetches real datasets: use it with data = \"real\" (--data real)")
    # the workloads' own options (gpt's sizes, the selftest's behaviours), of the workloads the request runs
    check_options(req.options, workloads_of(req))
    target.check(req, is_quick(req))   # --target, --mode time-to-target, --eval-every (plan/target.py)
    _check_model(req)
    _check_run_extras(req)
    if processes() > 1 and any(get_workload(w).kind == "matmul" for w in req.workloads or []):
        raise UserError("matmul runs on one device: with --num-processes choose model workloads (-w ...)")


LIST_LABELS = {"workloads": "workload", "backends": "backend", "devices": "device", "precisions": "precision",
               "batch_sizes": "batch size", "sizes": "matrix size", "modes": "mode", "device_counts": "device count",
               "users": "concurrency", "rates": "rate"}


def _check_model(req: PlanRequest) -> None:
    """--model FILE.py:FUNCTION and what it is fed (usermodel/): the file, its function, the strings."""
    from xpubench.usermodel.reference import parse_reference
    from xpubench.usermodel.spec import parse_dtype, parse_shape, parse_task, parse_vocab_size

    described = [n for n in ("input_shape", "input_dtype", "task", "vocab_size") if getattr(req, n) is not None]
    if req.model is None:
        if described:
            flags = ", ".join("--" + n.replace("_", "-") for n in described)
            verb = "describes" if len(described) == 1 else "describe"
            raise UserError(f"{flags} {verb} the input of --model: give --model FILE.py:FUNCTION too")
        return
    if not isinstance(req.model, str):
        raise UserError(f"--model must be FILE.py:FUNCTION, got {req.model!r}")
    parse_reference(req.model)
    if req.input_shape is not None:
        parse_shape(req.input_shape)
    if req.input_dtype is not None:
        parse_dtype(req.input_dtype)
    if req.task is not None:
        parse_task(req.task)
    if req.vocab_size is not None:
        parse_vocab_size(req.vocab_size)


def _check_run_extras(req: PlanRequest) -> None:
    """Prices (device -> USD per hour) and the run's budget (at most what a plan sidecar holds)."""
    from xpubench.results.validate import LARGEST

    prices.checked(req.prices)
    b = req.budget_s
    if b is not None and (isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b <= LARGEST):
        raise UserError(f"--budget must be a number of seconds above 0 (at most {LARGEST:g}), got {b!r}")


def check_one_step(cases) -> None:
    """A training case whose --train-samples hold less than one global batch has no step to time: refused
    before anything runs, naming the cases and the sizes that would (the worker would fail each alone)."""
    short = [c for c in cases if c.mode == "train" and c.train_samples and c.global_batch
             and c.train_samples < c.global_batch]
    if short:
        largest = max(c.global_batch for c in short)
        named = ", ".join(c.key for c in short[:3]) + (f" and {len(short) - 3} more" if len(short) > 3 else "")
        raise UserError(f"--train-samples {short[0].train_samples} is less than one global batch (batch x devices) "
                        f"of {named}: no step to time; give --train-samples {largest} or more, or a smaller "
                        "--batch-size")
