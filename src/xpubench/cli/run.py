"""`xpubench run`: flags or a TOML file -> PlanRequest -> api.run with a progress bar -> tables."""

from __future__ import annotations

import sys
from pathlib import Path

from xpubench.errors import UserError
from xpubench.legible.plaintext import markup, shown
from xpubench.plan import PlanRequest, options_given


def request_from(args) -> tuple[PlanRequest, dict]:
    """(the PlanRequest, the run settings: output, timeout, memory_limit, processes) from the TOML file
    (if any) under the command-line flags; plan.options.OPTIONS says where each value goes."""
    values = options_given.read_config(args.config) if args.config else {}
    values.update(options_given.from_flags(args))
    fields, run_opts = options_given.split(values)
    opts = fields.get("options", {})
    if opts.get("download") and fields.get("data") != "real":
        raise UserError("--download fetches real datasets: use it with --data real")
    if fields.get("data") == "real" and fields.get("data_dir") is None:
        fields["data_dir"] = _default_data_dir()
    if opts.get("download"):
        _make_data_dir(fields["data_dir"])
    return PlanRequest(**fields), {k: run_opts.get(k) for k in ("output", "timeout", "memory_limit", "processes")}


def _make_data_dir(path) -> None:
    """--download fills the data folder: create it (the default cache folder or --data-dir) if need be."""
    if not isinstance(path, str):
        return  # plan.validation.validate says what is wrong with it
    try:
        Path(path).expanduser().mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create data directory {path}: {exc.strerror or exc}") from None


def _default_data_dir() -> str:
    """Where --data real looks without --data-dir ($XPUBENCH_DATA_DIR or the cache folder)."""
    try:
        from xpubench.data import default_data_dir
    except ImportError:
        raise UserError("--data real needs --data-dir (a folder with the dataset's files)") from None
    return str(default_data_dir())


def _check_resume_flags(args) -> None:
    given = options_given.refused_with_resume(args)
    if given:
        raise UserError(f"--resume takes the plan from the results file: drop {', '.join(given)} "
                        f"(only {' and '.join(options_given.with_resume_flags())} go with --resume)")


def execute_run(args, console) -> int:
    """The run, by its launcher (launch/launchers/: this process alone, or one of several started by hand
    or by srun): process 0 plans, runs, writes and prints; another process starts the workers process 0
    tells it to and prints only an error."""
    from xpubench.launch import launchers

    launcher = launchers.declared(*(getattr(args, k, None) for k in ("coordinator", "num_processes", "process_id")))
    dry = bool(getattr(args, "dry_run", False))
    if launcher.world.multi:   # every process refuses a bad flag itself, the same line: no one waits to hear it
        with launchers.running(launcher, told=False):
            _check_flags(args)
    with launchers.running(launcher, told=not dry):
        if launcher.leads:
            return _execute_run(args, console)
        return 0 if dry else _follow(launcher)


def _check_flags(args) -> None:
    """What can be checked of the flags without this machine's devices (plan.validation.validate and the run
    settings)."""
    from xpubench import api
    from xpubench.plan.validation import validate

    if args.resume:
        _check_resume_flags(args)
        return
    request, opts = request_from(args)
    api.check_run_settings(opts["timeout"], opts["memory_limit"], opts["processes"])
    validate(request)


def _follow(launcher) -> int:
    """Another process than 0: process 0's workers, then its last word (an error: the same line, prefixed)."""
    from xpubench.launch.follower import follow

    world = launcher.world
    print(f"xpubench: process {world.process_id} of {world.num_processes} ({launcher.name}): process 0 at "
          f"{shown(world.coordinator)} plans the run and writes its results", file=sys.stderr)
    ending = follow(launcher)
    if ending.get("error"):
        print(f"xpubench: error: process 0: {shown(ending['error'])}", file=sys.stderr)
    return int(ending.get("code") or 0) if ending.get("error") else 0


def _dry_run(args, console) -> int:
    """--dry-run: plan (for this machine, or the one --env-file describes) and print; nothing runs."""
    from xpubench import api
    from xpubench.backends.envfile import load_environment
    from xpubench.cli.plan import print_plan

    if args.resume:
        raise UserError("--dry-run plans a new run: drop --resume")
    request, opts = request_from(args)
    api.check_run_settings(opts["timeout"], opts["memory_limit"], opts["processes"])   # as the real run would
    if opts.get("output"):
        api.check_new_output(Path(opts["output"]))
    env = load_environment(args.env_file) if args.env_file else None
    planned = api.plan(request, environment=env, processes=opts.get("processes"))
    return print_plan(planned, console, args.env_file)


def _execute_run(args, console) -> int:
    from xpubench import api
    from xpubench.report.render.terminal import RunProgress, print_run_output

    if getattr(args, "dry_run", False):
        return _dry_run(args, console)
    if getattr(args, "env_file", None):
        raise UserError("--env-file describes another machine: use it with --dry-run (a run measures this one)")
    if getattr(args, "allow_changed_model", False) and not args.resume:
        raise UserError("--allow-changed-model goes with --resume (a new run records the model file as it is)")
    if args.resume:
        _check_resume_flags(args)
        timeout, memory_limit, processes = args.timeout, args.memory_limit, None
    else:
        request, opts = request_from(args)
        timeout, memory_limit, processes = opts["timeout"], opts["memory_limit"], opts["processes"]
    api.check_run_settings(timeout, memory_limit, processes)
    progress = RunProgress(console, enabled=not args.no_progress and console.is_terminal)
    timing: list[str] = []   # the estimate against what it took (plan/learnt.py): printed last
    hooks = api.RunHooks(on_plan=progress.plan, on_start=progress.start, on_result=progress.result,
                         on_budget=progress.budget, on_cut=progress.cut, on_timing=timing.append,
                         on_warning=lambda w: console.print(f"[yellow]warning:[/] {markup(w)}", highlight=False),
                         on_note=lambda n: console.print(f"[yellow]note:[/] {markup(n)}", highlight=False))
    if args.resume:
        out = Path(args.resume)
        with progress:
            results = api.run(resume=out, timeout_s=timeout, memory_limit_bytes=memory_limit, hooks=hooks,
                              allow_changed_model=getattr(args, "allow_changed_model", False))
    else:
        out = Path(opts["output"]) if opts.get("output") else api.default_output()
        with progress:
            results = api.run(request, output=out, timeout_s=timeout, memory_limit_bytes=memory_limit,
                              processes=processes, hooks=hooks,
                              measure_ceilings=getattr(args, "measure_ceilings", False))
    print_run_output(results, console, out, verbose=getattr(args, "verbose", False))
    for line in timing:
        console.print(line, markup=False, highlight=False, overflow="fold")
    if getattr(args, "print_format", None):   # -o -: the cases on stdout (publish/formats.py)
        from xpubench.publish.formats import print_results

        print_results(results, args.print_format, source=out.name)
    return summarize_failures(results)


# the exit codes of `xpubench run` (docs/bad-input.md, "Exit codes"); an interrupt is 128 + its signal
EXIT_OK = 0            # every case ended ok or was skipped with its reason, and at least one measured ok
EXIT_SOME_FAILED = 1   # some cases failed (error, crash, oom, timeout); at least one ended ok
EXIT_BAD_INPUT = 2     # bad input: nothing ran, or a case's worker found a bad input file (one line)
EXIT_NONE_OK = 3       # no case ended ok: every one failed or was skipped, nothing was measured


def summarize_failures(results) -> int:
    """The run's exit code (EXIT_*) from its cases (``results``: one Result per case of the run, a resume's
    earlier ones included), with one stderr line when not every case ended ok. A case that failed on bad
    input found inside its worker (a corrupt data file, a model file gone: the user must act) is
    EXIT_BAD_INPUT; a case whose processes partly failed ended ok (its warning says so)."""
    from xpubench.harness.failures import USER_ERRORS

    failed = [r for r in results if r.status not in ("ok", "skipped")]
    user = [r for r in failed if r.status == "error" and r.metrics.get("error_type") in USER_ERRORS]
    if user:
        first = user[0]
        more = f" (and {len(user) - 1} more case(s) like it)" if len(user) > 1 else ""
        print(f"xpubench: error: {shown(first.key)}: {shown(' '.join(str(first.message).split()))}{more}",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    statuses = [r.status for r in results]
    if "ok" not in statuses:
        skipped = statuses.count("skipped")
        print(f"xpubench: no case finished ok ({len(statuses) - skipped} failed, {skipped} skipped): nothing was "
              "measured (see the status column)", file=sys.stderr)
        return EXIT_NONE_OK
    if failed:
        print(f"{len(failed)} case(s) did not finish ok (see the status column)", file=sys.stderr)
    return EXIT_SOME_FAILED if failed else EXIT_OK
