"""``xpubench ceilings``: measure (or show) this machine's ceilings into the cache, and the cached
ceilings that ``xpubench env`` prints.

    xpubench ceilings                      # every installed backend with an adapter, its devices, fp32
    xpubench ceilings -b torch -p fp32,bf16 --budget 20
    xpubench ceilings --show               # what the cache holds for this machine, measure nothing
    xpubench ceilings --refresh            # measure again even when cached
    xpubench ceilings --bandwidth-only     # copy / triad GB/s alone
    xpubench ceilings --dry-run -p bf16 --env-file tests/data/machines/h100-sxm.json   # plan another machine

A run ranks its results against the cached figures (docs/ceilings.md); without them "% of ceiling"
is n/a and the run says how to get them. Each figure that has a published known-good counterpart
(devices/knowngood.py: same chip, precision and framework) is compared with it: "your H100 reaches 92%
of the known-good 794.5 TFLOP/s (mamf-finder, torch 2.7.0+cu126)", or how far below and what to check.
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from xpubench.ceilings import cache
from xpubench.ceilings.measure import ceilings_for, precisions_of, with_ceilings
from xpubench.errors import UserError
from xpubench.harness.ceiling import Ceiling
from xpubench.legible.plaintext import markup


def add_parser(sub) -> None:
    p = sub.add_parser("ceilings", help="measure this machine's achievable FLOP/s and GB/s (cached)")
    p.add_argument("-b", "--backend", help="comma list of numpy, torch, jax (default: installed)")
    p.add_argument("-d", "--device", help="comma list of device ids (default: every device of each backend)")
    p.add_argument("-p", "--precision", default="fp32", help="comma list (default fp32)")
    p.add_argument("--budget", type=float, default=None, help="seconds per precision (default 30 on a CPU)")
    p.add_argument("--no-bandwidth", action="store_true", help="skip the copy / triad bandwidth")
    p.add_argument("--bandwidth-only", action="store_true", help="only the copy / triad bandwidth (no matmul search)")
    p.add_argument("--refresh", action="store_true", help="measure again even when cached (the CPU clock too)")
    p.add_argument("--show", action="store_true", help="only print what the cache holds for this machine")
    p.add_argument("--json", action="store_true", help="print the cached rows as JSON")
    p.add_argument("--dry-run", action="store_true",
                   help="say what would be measured and which known-good figure each is compared with; measure nothing")
    p.add_argument("--env-file", metavar="FILE",
                   help="with --dry-run: plan for the machine FILE describes (`xpubench env --json` saved there)")


def _split(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def cached_table(env: dict) -> Table | str:
    """The cache's figures for this machine key, or one line saying why there are none."""
    entry, problem = cache.lookup(cache.machine_key(env))
    rows = cache.summary_rows(entry)
    if not rows:
        return (f"Measured ceilings: none cached for this machine ({markup(problem or 'empty entry')}); run "
                "`xpubench ceilings`")
    t = Table(title=f"Measured ceilings (cache {markup(cache.cache_path())})")
    for col in ("backend", "device", "what", "value", "where", "written"):
        t.add_column(col, justify="right" if col == "value" else "left", overflow="fold")   # never cut
    for r in rows:
        value = "n/a" if r["value"] is None else f"{r['value']:,.1f} {r['unit']}"
        t.add_row(*(markup(v) for v in (r["backend"], r["device"], r["what"], value, r["where"], r["written"])))
    return t


def _plan(env: dict, args: argparse.Namespace) -> list[tuple[str, str, list[str]]]:
    """(backend, device, precisions) to measure, checked against what is installed (one line if not)."""
    installed = [b for b, info in env.get("backends", {}).items() if info.get("installed") and b in with_ceilings()]
    backends = _split(args.backend) or installed
    for b in backends:
        if b not in installed:
            raise UserError(f"no ceiling for backend {b!r} here (installed with an adapter: {', '.join(installed)})")
    precisions = [] if args.bandwidth_only else _split(args.precision) or ["fp32"]
    planned = []
    for b in backends:
        for device in _split(args.device) or [d["id"] for d in env["backends"][b].get("devices", [])]:
            usable = [p for p in precisions if p in precisions_of(b)]
            if usable or args.bandwidth_only:
                planned.append((b, device, usable))
    return planned


def known_good_lines(env: dict, entry: dict | None) -> list[str]:
    """One line per device of the cached figures: each ceiling with a known-good counterpart compared with
    it (devices/knowngood.py), or that none is published for the chip."""
    from xpubench.backends.peaks import device_record
    from xpubench.devices import knowngood

    lines, said = [], set()
    for data in (entry or {}).get("ceilings", {}).values():
        c = Ceiling.from_dict(data)
        record = device_record(env, c.backend, c.device)
        name = record.get("name") or c.device
        good = knowngood.comparable(record.get("chip"), "matmul", c.precision, c.backend)
        if good and c.flops_per_s:
            healthy, sentence = knowngood.verdict(c.flops_per_s, good, record.get("vendor"), name)
            lines.append(f"{c.backend} {c.device} {c.precision}: {sentence}" + ("" if healthy else " [WARN]"))
        elif not knowngood.figures_for(record.get("chip")) and name not in said:
            said.add(name)
            lines.append(f"{c.backend} {c.device}: known-good: none published for {name}")
    return lines


def cmd_ceilings(args: argparse.Namespace, console: Console) -> int:
    from xpubench.backends.detect import environment
    from xpubench.backends.envfile import load_environment

    if args.env_file and not args.dry_run:
        raise UserError("--env-file describes another machine: use it with --dry-run (ceilings are measured here)")
    if args.bandwidth_only and args.no_bandwidth:
        raise UserError("--bandwidth-only and --no-bandwidth leave nothing to measure: give one of them")
    env = load_environment(args.env_file) if args.env_file else environment()
    if args.budget is not None and not args.budget > 0:
        raise UserError(f"--budget must be > 0 seconds, got {args.budget}")
    planned = [] if args.show else _plan(env, args)
    if args.dry_run:
        return _dry_run(env, planned, args, console)
    for b, device, usable in planned:
        console.print(f"{b} {device}: {', '.join(usable) or 'bandwidth'} ...", markup=False, highlight=False)
        got = ceilings_for(env, b, device, usable, budget_s=args.budget, refresh=args.refresh,
                           with_bandwidth=not args.no_bandwidth)
        console.print(f"  {got['source']}" + (f" ({got['cache_note']})" if got["cache_note"] else ""),
                      markup=False, highlight=False)
        if got["unkept"]:   # the cache table below will not hold them: the figures here, and why
            for line in [*_measured_lines(got), got["unkept"]]:
                console.print(f"  {line}", markup=False, highlight=False)
    entry, _ = cache.lookup(cache.machine_key(env))
    if args.json:
        print(json.dumps(cache.summary_rows(entry), indent=1))
        return 0
    console.print(cached_table(env))
    for line in known_good_lines(env, entry):
        console.print(line, markup=False, highlight=False)
    return 0


def _measured_lines(got: dict) -> list[str]:
    from xpubench.legible.units import fmt_flops

    lines = [f"{p}: {fmt_flops(c.flops_per_s)}" + (f" at {c.shape}" if c.shape else "")
             for p, c in got["ceilings"].items() if c is not None]
    bw = got["bandwidth"]
    return lines + ([f"bandwidth: {bw.gb_per_s:,.1f} GB/s"] if bw is not None and bw.gb_per_s else [])


def _dry_run(env: dict, planned: list, args: argparse.Namespace, console: Console) -> int:
    from xpubench.backends.peaks import device_record
    from xpubench.devices import knowngood

    where = f"the machine {args.env_file} describes" if args.env_file else "this machine"
    console.print(f"Dry run for {where}: nothing is measured, nothing is written.", markup=False, highlight=False)
    for b, device, usable in planned:
        what = " and ".join(filter(None, (usable and ", ".join(usable) + " matmul ceiling",
                                          not args.no_bandwidth and "copy/triad bandwidth")))
        console.print(f"{b} {device}: would measure the {what}", markup=False, highlight=False)
        if usable:
            console.print(f"  {knowngood.planned(device_record(env, b, device), b, usable)}",
                          markup=False, highlight=False)
    return 0
