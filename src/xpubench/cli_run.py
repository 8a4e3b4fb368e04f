"""`xpubench run`: flags or a TOML file -> PlanRequest -> api.run with a progress bar -> tables."""

from __future__ import annotations

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
RUN_KEYS = {"output", "timeout", "memory_limit", "devices", "scaling", "lr_scaling"}


def _count(text) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        raise UserError(f"--devices must be a whole number or 'all', got {text!r}") from None



def read_config(path: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    p = Path(path)
    if not p.is_file():
        raise UserError(f"config file {path} does not exist")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, OSError) as exc:
        raise UserError(f"config file {path} is unreadable: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"config file {path} is not valid TOML: {exc}") from None
    section = data.get("run", data)
    unknown = sorted(set(section) - set(CONFIG_KEYS) - RUN_KEYS)
    if unknown:
        raise UserError(f"config file {path}: unknown option(s) {', '.join(unknown)}; "
                        f"known: {', '.join(sorted(set(CONFIG_KEYS) | RUN_KEYS))}")
    return section


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
    run_opts = {k: config.get(k) for k in RUN_KEYS if k in config}
    for key in ("output", "timeout", "memory_limit", "devices"):
        if getattr(args, key, None) is not None:
            run_opts[key] = getattr(args, key)
    devices = run_opts.pop("devices", None)
    if devices is not None:
        fields["device_counts"] = [0] if str(devices) == "all" else [_count(devices)]
    fields["scaling"] = args.scaling or bool(config.get("scaling"))
    if args.lr_scaling or config.get("lr_scaling"):
        fields["options"] = {"lr_scaling": True}
    if fields.get("data") == "real" and fields.get("data_dir") is None:
        raise UserError("--data real needs --data-dir (a folder with the dataset's files)")
    return PlanRequest(**fields), run_opts


def execute_run(args, console) -> int:
    from xpubench import api
    from xpubench.report.terminal import RunProgress, print_run_tables

    if args.resume and (args.workload or args.backend or args.config or args.output):
        raise UserError("--resume takes the plan from the results file: drop --workload/--backend/--config/--output")
    progress = RunProgress(console, enabled=not args.no_progress and console.is_terminal)
    hooks = api.RunHooks(on_plan=progress.plan, on_start=progress.start, on_result=progress.result,
                         on_warning=lambda w: console.print(f"[yellow]warning:[/] {w}"))
    if args.resume:
        with progress:
            results = api.run(resume=args.resume, timeout_s=args.timeout,
                              memory_limit_bytes=args.memory_limit, hooks=hooks)
        out = Path(args.resume)
    else:
        request, opts = request_from(args)
        out = Path(opts["output"]) if opts.get("output") else api.default_output()
        with progress:
            results = api.run(request, output=out, timeout_s=opts.get("timeout"),
                              memory_limit_bytes=opts.get("memory_limit"), hooks=hooks)
    print_run_tables(results, console)
    console.print(f"results: {out}")
    failed = [r for r in results if r.status not in ("ok", "skipped")]
    if failed:
        print(f"{len(failed)} case(s) did not finish ok (see the status column)", file=sys.stderr)
    return 0
