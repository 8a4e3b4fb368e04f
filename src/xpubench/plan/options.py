"""Every option of `xpubench run`, declared once, in OPTIONS: its flags and help (made by options_help.py),
how its text is read, its TOML key (``--config`` and the notebook API's keywords) and where its value
goes. From the table (plan/options_given.py): the `run` parser, the keys a config file may hold, the
flags refused with ``--resume`` and the mapping to a PlanRequest and the run settings; and the command
that plans a recorded case again (plan/rerun.py).

Values are only read here (text -> number / list, options_text.py); whether they are acceptable is
decided once: plan.validation.validate (the plan) and api.check_run_settings (timeout, memory limit,
processes).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from xpubench.case import COMPILE_SETTINGS, DATA_SOURCES, SYNC_MODES
from xpubench.plan import MATMUL_SIZES, MATMUL_SIZES_ACCEL
from xpubench.plan import options_text as read
from xpubench.plan.options_help import (
    REFRESH_HELP,
    comma_list,
    device_help,
    mode_help,
    precision_help,
    run_backend_help,
    shared_help,
    workload_help,
)
from xpubench.plan.request import DEFAULT_PROCESSES
from xpubench.workloads import option_rows
from xpubench.workloads.base import WorkloadOption


@dataclass(frozen=True)
class Option:
    """One option. ``name`` is its argparse dest and its TOML key; ``goes`` where its value ends up:
    ``request.FIELD`` (a PlanRequest field), ``options.KEY`` (a key of PlanRequest.options), ``run.KEY``
    (a run setting: output, timeout, memory_limit, processes) or ``cli`` (read by the command itself:
    display, --resume, --dry-run, the cluster flags)."""

    name: str
    flags: tuple[str, ...]            # () : a TOML key only
    goes: str
    help: str | None = None
    type: Callable | None = None      # command-line text -> value
    toml: Callable | None = None      # TOML value -> value (default: as written; a list for a list option)
    choices: tuple | None = None
    action: str | type | None = None  # "store_true", or an argparse.Action
    metavar: str | None = None
    is_list: bool = False             # comma-separated on the command line, a TOML array
    in_config: bool = True            # a TOML key of --config (and a keyword of xpubench.run / plan)
    with_resume: bool = False         # allowed with --resume (which takes the plan from the results file)


def _o(name, flags, goes, help=None, **kw) -> Option:
    return Option(name, tuple(flags.split()), goes, help, **kw)


def _list(kind, label: str, name: str, flags: str, goes: str, help=None, **kw) -> Option:
    return _o(name, flags, goes, help, type=read.csv(kind, label), is_list=True, **kw)


CLI_ONLY = {"in_config": False, "with_resume": True}


def _workload_options() -> tuple[Option, ...]:
    """The rows of the workloads' own options that have a flag (workloads/base.py WorkloadOption: gpt's
    --preset, the selftest's --selftest); the others are keys of [run.options] only. Workloads that share
    a flag (gpt's and llama's --preset, --prompt-len) share one option: its choices are all of theirs, its
    help each text once (``shared_help``)."""
    by_flag: dict[str, list[tuple[str, WorkloadOption]]] = {}
    for workload, row in option_rows():
        if row.flag:
            by_flag.setdefault(row.flag, []).append((workload, row))
    out = []
    for flag_, rows in by_flag.items():
        workload, row = rows[0]
        choices = tuple(dict.fromkeys(c for _, r in rows for c in r.choices))
        said = shared_help([r.help for _, r in rows])
        if all(r.hidden for _, r in rows):   # the selftest's --selftest, an isolation check: not offered in --help
            said = argparse.SUPPRESS
        out.append(Option(row.option_name, (flag_,), f"options.{row.key}", said, choices=choices or None,
                          type=read.csv(int if row.least is not None else str, f"{workload} {row.key}")
                          if row.is_list else read.whole if row.least is not None else None, is_list=row.is_list,
                          metavar="N" if row.least is not None else None))
    return tuple(out)


OPTIONS: tuple[Option, ...] = (
    _list(str, "workload", "workload", "-w --workload", "request.workloads", workload_help()),
    _list(str, "backend", "backend", "-b --backend", "request.backends", run_backend_help()),
    _list(str, "device", "device", "-d --device", "request.devices",
          device_help("; --devices N: data parallel over N")),
    _list(str, "precision", "precision", "-p --precision --dtype", "request.precisions", precision_help()),
    _list(int, "batch size", "batch_size", "--batch-size", "request.batch_sizes", "per-device batch sizes"),
    _list(int, "matrix size", "size", "--size", "request.sizes",
          f"matmul N (default {comma_list(MATMUL_SIZES)}; {comma_list(MATMUL_SIZES_ACCEL)} on an accelerator)"),
    _list(str, "mode", "mode", "--mode", "request.modes", mode_help()),
    _list(int, "concurrency", "concurrency", "-c --concurrency", "request.users", "--mode serve: closed-loop users "
          "per point (default 1,2,4 without --rate; `xpubench serve` has the serving options)"),
    _list(float, "rate", "rate", "--rate", "request.rates", "--mode serve: open-loop points, Poisson requests/s"),
    _o("devices", "--devices", "request.device_counts", "data-parallel device count N, or 'all'",
       type=read.device_count, toml=read.device_count),
    _o("scaling", "--scaling", "request.scaling", "sweep N = 1, 2, 4, ... devices", action="store_true"),
    _o("lr_scaling", "--lr-scaling", "options.lr_scaling", "scale the learning rate linearly with N",
       action="store_true"),
    _o("coordinator", "--coordinator", "cli", "several hosts: process 0's address; PORT and PORT+1 are used "
       "(docs/distributed.md; under srun: derived)", metavar="HOST:PORT", **CLI_ONLY),
    _o("num_processes", "--num-processes", "cli", "several hosts: how many processes (one per host; under srun: "
       "the step's tasks)", metavar="P", **CLI_ONLY),
    _o("process_id", "--process-id", "cli", "several hosts: this process's id, 0..P-1 (not under srun)", metavar="I",
       **CLI_ONLY),
    _o("epochs", "--epochs", "request.epochs", "training epochs per case (default: the workload's, "
       "`xpubench list`; 3 in the brief run)", type=read.whole),
    _o("steps", "--steps", "request.steps", "cap on steps per epoch", type=read.whole),
    _o("train_samples", "--train-samples", "request.train_samples", "training samples per epoch (default: the "
       "workload's, `xpubench list`)", type=read.whole),
    _o("eval_samples", "--eval-samples", "request.eval_samples", "validation samples per evaluation (default: "
       "the workload's)", type=read.whole),
    _o("target", "--target", "request.target", "train until a validation metric reaches VALUE (accuracy, mse "
       "or val_loss; real data), or --epochs pass; time to target over 5 seeds", metavar="METRIC=VALUE"),
    _o("eval_every", "--eval-every", "request.eval_every", "with a target: evaluate every N steps (default: "
       "every epoch)", type=read.whole, metavar="STEPS"),
    _o("time_budget", "--time-budget", "request.time_budget_s", "seconds of measurement per case",
       type=read.seconds),
    _o("budget", "--budget", "request.budget_s", "seconds for the whole run, worker starts and compiles "
       "included", type=read.seconds, metavar="SECONDS"),
    _o("save_weights", "--save-weights", "options.weights_dir",
       "inference cases keep the weights they train in DIR (.npz; default: a temp cache)", metavar="DIR",
       type=read.text()),
    _o("data", "--data", "request.data", "synthetic (default: generated, nothing to fetch) or real (the "
       "workload's data set, from --data-dir)", choices=DATA_SOURCES),
    _o("data_dir", "--data-dir", "request.data_dir", "where real data sets are read (and --download writes; "
       "default: XPUBENCH_DATA_DIR or ~/.cache/xpubench/datasets)", metavar="DIR"),
    _o("download", "--download", "options.download",
       "with --data real: fetch missing dataset files (checksum-verified) into the data dir", action="store_true"),
    _o("sync", "--sync", "options.sync", "training: synchronise every step (per-step times; default on CPUs) "
       "or once per steady epoch (pipelined; default on accelerators)", choices=SYNC_MODES),
    _o("compile", "--compile", "request.compile", "torch.compile the training step: auto (on CUDA/ROCm, eager "
       "elsewhere), on or off; JAX always compiles", choices=COMPILE_SETTINGS),
    _o("seed", "--seed", "request.seed", "random seed of weights and data (default 0; each "
       "process of a --target case adds its index)",
       type=int),
    _o("quick", "--quick", "request.quick", "a few steps per case (the default with no -w)", action="store_true"),
    _o("all", "--all", "request.all_cases", "with no -w: every default workload, matrix size and dtype "
       "briefly, no budget unless --budget (the default run keeps a few cases, 2+ processes each)",
       action="store_true"),
    _o("model", "--model", "request.model", "your own model: FUNCTION() in FILE.py returns a torch, flax or "
       "Keras model (or module:function)", metavar="FILE.py:FUNCTION"),
    _o("input_shape", "--input-shape", "request.input_shape", "--model's input: one sample's shape, no batch "
       "axis, e.g. 28,28,1", metavar="SHAPE"),
    _o("input_dtype", "--input-dtype", "request.input_dtype", "--model's input dtype: float32 (default) or "
       "int32 (token ids)"),
    _o("task", "--task", "request.task", "--model's task: classes:N, binary, regression:N or tokens:VOCAB"),
    _o("vocab_size", "--vocab-size", "request.vocab_size", "--model's token ids (int32 inputs): how many distinct "
       "ids (default: the model's config.vocab_size or first embedding's rows)", type=read.whole, metavar="N"),
    *_workload_options(),
    _o("prices", "--prices", "request.prices", "TOML or JSON file of device = US dollars per hour (cost per "
       "result)", type=read.prices, toml=read.prices, metavar="FILE"),
    _o("price_per_hour", "--price-per-hour", "request.prices", "a device's price, e.g. gpu=2.50 (repeatable; "
       "over --prices)", type=read.price, action=read.KeyValues, metavar="DEVICE=USD", in_config=False),
    _o("options", "", "request.options", toml=read.table()),    # TOML only: [run.options]
    _o("config", "--config", "cli", "TOML file with the same options", in_config=False),
    _o("output", "-o --output", "run.output", "results file (JSON Lines)", toml=read.text()),
    _o("resume", "--resume", "cli", "finish the cases of an interrupted results file", **CLI_ONLY),
    _o("allow_changed_model", "--allow-changed-model", "cli", "with --resume: import a --model file whose content "
       "changed since the run was planned (its results carry the new sha256)", action="store_true", **CLI_ONLY),
    _o("processes", "--processes", "run.processes", "worker processes per case, interleaved with the other "
       f"cases (default {DEFAULT_PROCESSES}; the machine's noise between processes is measured only with 2 or more)",
       type=read.whole, metavar="K"),
    _o("timeout", "--timeout", "run.timeout", "seconds per worker process before it is killed",
       type=read.seconds, with_resume=True),
    _o("memory_limit", "--memory-limit", "run.memory_limit", "address-space cap (RLIMIT_AS) per worker of a CPU "
       "case, e.g. 8G; accelerator cases run without it (CUDA, ROCm and libtpu reserve more address space "
       "than memory)", type=read.parse_size, toml=read.parse_size, with_resume=True),
    _o("no_progress", "--no-progress", "cli", "no live progress line (it is off anyway when the output is not "
       "a terminal)", action="store_true", **CLI_ONLY),
    _o("measure_ceilings", "--measure-ceilings", "cli", "measure the missing ceilings (FLOP/s, GB/s) before "
       "the run, ~30 s per precision on a CPU (docs/ceilings.md)", action="store_true", **CLI_ONLY),
    _o("refresh", "--refresh", "cli", REFRESH_HELP, action="store_true", **CLI_ONLY),
    _o("verbose", "--verbose", "cli", "full tables after the run instead of the compact summary",
       action="store_true", **CLI_ONLY),
    _o("dry_run", "--dry-run", "cli", "print the cases the run would execute and an estimate of its time; "
       "run nothing", action="store_true", **CLI_ONLY),
    _o("env_file", "--env-file", "cli", "with --dry-run: plan for the machine FILE describes (`xpubench env "
       "--json` saved there)", metavar="FILE", **CLI_ONLY),
)
BY_NAME = {o.name: o for o in OPTIONS}
CONFIG_KEYS = tuple(sorted(o.name for o in OPTIONS if o.in_config))


def flag(o: Option) -> str:
    """The option's name on the command line: its first long flag (--precision, not --dtype)."""
    return next(f for f in o.flags if f.startswith("--"))
