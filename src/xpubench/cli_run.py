"""`xpubench run`: flags or a TOML file -> PlanRequest -> api.run with a progress bar -> tables."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from xpubench.errors import UserError
from xpubench.plan import PlanRequest

# TOML key -> (PlanRequest field, list-valued)
CONFIG_KEYS = {
    "workload": ("workloads", True), "backend": ("backends", True), "device": ("devices", True),
    "precision": ("precisions", True), "batch_size": ("batch_sizes", True), "size": ("sizes", True),
    "mode": ("modes", True), "epochs": ("epochs", False), "steps": ("steps", False),
    "train_samples": ("train_samples", False), "eval_samples": ("eval_samples", False),
    "time_budget": ("time_budget_s", False), "data": ("data", False), "data_dir": ("data_dir", False),
    "compile": ("compile", False), "seed": ("seed", False), "quick": ("quick", False),
}
RUN_KEYS = {"output", "timeout", "memory_limit", "processes", "devices", "scaling", "lr_scaling", "selftest", "options",
            "save_weights", "download", "sync"}
# flags that shape the plan: with --resume the plan comes from the results file instead
PLAN_FLAGS = ("workload", "backend", "device", "precision", "batch_size", "size", "mode", "devices", "epochs",
              "steps", "train_samples", "eval_samples", "time_budget", "data", "data_dir", "compile", "seed",
              "config", "output", "selftest", "save_weights", "sync", "processes")
PLAN_BOOL_FLAGS = ("scaling", "lr_scaling", "quick", "download")


def _count(text) -> int:
    value = None
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str) and text.strip().isdigit():
        value = int(text)
    if value is None or value < 1:
        raise UserError(f"--devices must be a whole number of at least 1, or 'all'; got {text!r}")
    return value


def read_config(path: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    p = Path(path)
    if not p.is_file():
        raise UserError(f"config file {path} does not exist (or is not a file)")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"config file {path} is not a text (UTF-8) file: give a TOML file") from None
    except OSError as exc:
        raise UserError(f"config file {path} is unreadable: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"config file {path} is not valid TOML: {exc}") from None
    section = data.get("run", data)
    if not isinstance(section, dict):
        raise UserError(f"config file {path}: [run] must be a table of options")
    unknown = sorted(set(section) - set(CONFIG_KEYS) - RUN_KEYS - {"run"})
    if unknown:
        raise UserError(f"config file {path}: unknown option(s) {', '.join(unknown)}; "
                        f"known: {', '.join(sorted(set(CONFIG_KEYS) | RUN_KEYS))}")
    return section


def _run_options(config: dict, args) -> dict:
    """output / timeout / memory_limit / processes from the file, then the flags; each checked."""
    from xpubench.cli import parse_size

    opts = {}
    for key in ("output", "timeout", "memory_limit", "processes"):
        value = getattr(args, key, None)
        opts[key] = value if value is not None else config.get(key)
    if opts["output"] is not None and not isinstance(opts["output"], str):
        raise UserError(f"output must be a file name, got {opts['output']!r}")
    t = opts["timeout"]
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf):
        raise UserError(f"timeout must be a number of seconds above 0, got {t!r}")
    m = opts["memory_limit"]
    if isinstance(m, (str, int)) and not isinstance(m, bool):
        opts["memory_limit"] = parse_size(str(m))
    elif m is not None:
        raise UserError(f"memory_limit must be a size like \"8G\", got {m!r}")
    k = opts["processes"]
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise UserError(f"processes must be a whole number of at least 1, got {k!r}")
    return opts


def request_from(args) -> tuple[PlanRequest, dict]:
    """Merge the TOML file (if any) under the command-line flags."""
    config = read_config(args.config) if args.config else {}
    fields: dict = {}
    for key, (field, is_list) in CONFIG_KEYS.items():
        value = config.get(key)
        if value is not None and is_list and not isinstance(value, list):
            value = [value]
        if value is not None:
            fields[field] = value
    flag_values = {
        "workloads": args.workload, "backends": args.backend, "devices": args.device,
        "precisions": args.precision, "batch_sizes": args.batch_size, "sizes": args.size,
        "modes": args.mode, "epochs": args.epochs, "steps": args.steps, "train_samples": args.train_samples,
        "eval_samples": args.eval_samples, "time_budget_s": args.time_budget, "data": args.data,
        "data_dir": args.data_dir, "compile": args.compile, "seed": args.seed,
    }
    fields.update({k: v for k, v in flag_values.items() if v is not None})
    if args.quick or config.get("quick") or not fields.get("workloads"):
        fields["quick"] = True
    run_opts = _run_options(config, args)
    devices = args.devices if args.devices is not None else config.get("devices")
    if devices is not None:
        fields["device_counts"] = [0] if str(devices) == "all" else [_count(devices)]
    fields["scaling"] = args.scaling or bool(config.get("scaling"))
    options = config.get("options", {})
    if not isinstance(options, dict):
        raise UserError(f"options must be a table of name = value, got {options!r}")
    options = dict(options)
    if args.lr_scaling or config.get("lr_scaling"):
        options["lr_scaling"] = True
    sync = getattr(args, "sync", None) or config.get("sync")
    if sync is not None:
        options["sync"] = sync          # checked with the plan (plan.validate)
    if getattr(args, "download", False) or config.get("download"):
        options["download"] = True
    save = getattr(args, "save_weights", None) or config.get("save_weights")
    if save is not None:
        options["weights_dir"] = _weights_dir(save)
    behaviours = args.selftest or config.get("selftest")
    if behaviours is not None:
        options["behaviours"] = behaviours if isinstance(behaviours, list) else [behaviours]
        fields.setdefault("workloads", ["selftest"])
    if options:
        fields["options"] = options
    if options.get("download") and fields.get("data") != "real":
        raise UserError("--download fetches real datasets: use it with --data real")
    if fields.get("data") == "real" and fields.get("data_dir") is None:
        fields["data_dir"] = _default_data_dir()
    if options.get("download"):
        _make_data_dir(fields["data_dir"])
    return PlanRequest(**fields), run_opts


def _make_data_dir(path) -> None:
    """--download fills the data folder: create it (the default cache folder or --data-dir) if need be."""
    if not isinstance(path, str):
        return  # plan.validate says what is wrong with it
    try:
        Path(path).expanduser().mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create data directory {path}: {exc.strerror or exc}") from None


def _weights_dir(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"--save-weights needs a folder name, got {value!r}")
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise UserError(f"--save-weights {value}: that is a file, not a folder")
    return str(path.resolve())


def _default_data_dir() -> str:
    """Where --data real looks without --data-dir ($XPUBENCH_DATA_DIR or the cache folder)."""
    try:
        from xpubench.data import default_data_dir
    except ImportError:
        raise UserError("--data real needs --data-dir (a folder with the dataset's files)") from None
    return str(default_data_dir())


def _check_resume_flags(args) -> None:
    given = [f for f in PLAN_FLAGS if getattr(args, f, None) is not None]
    given += [f for f in PLAN_BOOL_FLAGS if getattr(args, f, False)]
    if given:
        flags = ", ".join("--" + f.replace("_", "-") for f in given)
        raise UserError(f"--resume takes the plan from the results file: drop {flags} "
                        "(only --timeout and --memory-limit go with --resume)")


def execute_run(args, console) -> int:
    with _cluster_settings(args):
        return _execute_run(args, console)


def _dry_run(args, console) -> int:
    """--dry-run: plan (for this machine, or the one --env-file describes) and print; nothing runs."""
    from xpubench import api
    from xpubench.cli_plan import print_plan
    from xpubench.devices.envfile import load_environment

    if args.resume:
        raise UserError("--dry-run plans a new run: drop --resume")
    request, _ = request_from(args)
    env = load_environment(args.env_file) if args.env_file else None
    return print_plan(api.plan(request, environment=env), console, args.env_file)


def _execute_run(args, console) -> int:
    from xpubench import api
    from xpubench.report.terminal import RunProgress, print_run_tables

    if getattr(args, "dry_run", False):
        return _dry_run(args, console)
    if getattr(args, "env_file", None):
        raise UserError("--env-file describes another machine: use it with --dry-run (a run measures this one)")
    if args.resume:
        _check_resume_flags(args)
        timeout, memory_limit, processes = _run_options({}, args)["timeout"], args.memory_limit, None
    else:
        request, opts = request_from(args)
        timeout, memory_limit, processes = opts["timeout"], opts["memory_limit"], opts["processes"]
    api.check_run_settings(timeout, memory_limit, processes)
    progress = RunProgress(console, enabled=not args.no_progress and console.is_terminal)
    fresh = []  # the results of this call (with --resume, api.run also returns the earlier ones)

    def on_result(result):
        fresh.append(result)
        progress.result(result)

    hooks = api.RunHooks(on_plan=progress.plan, on_start=progress.start, on_result=on_result,
                         on_warning=lambda w: console.print(f"[yellow]warning:[/] {w}", highlight=False))
    if args.resume:
        out = Path(args.resume)
        with progress:
            results = api.run(resume=out, timeout_s=timeout, memory_limit_bytes=memory_limit, hooks=hooks)
    else:
        out = Path(opts["output"]) if opts.get("output") else api.default_output()
        with progress:
            results = api.run(request, output=out, timeout_s=timeout, memory_limit_bytes=memory_limit,
                              processes=processes, hooks=hooks,
                              measure_ceilings=getattr(args, "measure_ceilings", False))
    print_run_tables(results, console)
    console.print(f"results: {out}", highlight=False)
    return summarize_failures(fresh)


def _cluster_settings(args):
    """--coordinator / --num-processes / --process-id: checked, then exported for the plan and the
    workers during the run (harness/cluster.py). Without them, XPUBENCH_* variables already set are used."""
    import contextlib
    import os

    from xpubench.harness import cluster

    if os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("LOCAL_RANK"):
        raise UserError("xpubench starts its own ranks (torchrun's engine) for each case: run it once per "
                        "host, not under torchrun, with --coordinator/--num-processes/--process-id "
                        "(docs/distributed.md)")
    given = [getattr(args, k, None) for k in ("coordinator", "num_processes", "process_id")]
    if any(v is not None for v in given):
        return cluster.exported(cluster.parse(*given))
    return contextlib.nullcontext()


def summarize_failures(results) -> int:
    """One stderr line about cases that did not end ok. Exit 2 when a case failed on bad input found
    inside its worker (a corrupt data file: the user must act); OOMs, crashes and timeouts are
    measurements of this machine and leave the exit code 0."""
    from xpubench.harness.failures import USER_ERRORS

    failed = list({r.key: r for r in results if r.status not in ("ok", "skipped")}.values())
    user = [r for r in failed if r.status == "error" and r.metrics.get("error_type") in USER_ERRORS]
    if user:
        first = user[0]
        more = f" (and {len(user) - 1} more case(s) like it)" if len(user) > 1 else ""
        print(f"xpubench: error: {first.key}: {first.message}{more}", file=sys.stderr)
        return 2
    if failed:
        print(f"{len(failed)} case(s) did not finish ok (see the status column)", file=sys.stderr)
    return 0
