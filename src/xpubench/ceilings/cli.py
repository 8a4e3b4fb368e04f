"""``xpubench ceilings``: measure (or show) this machine's ceilings into the cache, and the cached
ceilings that ``xpubench env`` prints.

    xpubench ceilings                      # every installed backend with an adapter, its devices, fp32
    xpubench ceilings -b torch -p fp32,bf16 --budget 20
    xpubench ceilings --show               # what the cache holds for this machine, measure nothing
    xpubench ceilings --refresh            # measure again even when cached

A run ranks its results against the cached figures (docs/ceilings.md); without them "% of ceiling"
is n/a and the run says how to get them.
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from xpubench.ceilings import cache
from xpubench.ceilings.measure import ADAPTERS, PRECISIONS, ceilings_for
from xpubench.errors import UserError


def add_parser(sub) -> None:
    p = sub.add_parser("ceilings", help="measure this machine's achievable FLOP/s and GB/s (cached)")
    p.add_argument("-b", "--backend", help="comma list of numpy, torch, jax (default: installed)")
    p.add_argument("-d", "--device", help="comma list of device ids (default: every device of each backend)")
    p.add_argument("-p", "--precision", default="fp32", help="comma list (default fp32)")
    p.add_argument("--budget", type=float, default=None, help="seconds per precision (default 30 on a CPU)")
    p.add_argument("--no-bandwidth", action="store_true", help="skip the copy / triad bandwidth")
    p.add_argument("--refresh", action="store_true", help="measure again even when cached")
    p.add_argument("--show", action="store_true", help="only print what the cache holds for this machine")
    p.add_argument("--json", action="store_true", help="print the cached rows as JSON")


def _split(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def cached_table(env: dict) -> Table | str:
    """The cache's figures for this machine key, or one line saying why there are none."""
    entry, problem = cache.lookup(cache.machine_key(env))
    rows = cache.summary_rows(entry)
    if not rows:
        return f"Measured ceilings: none cached for this machine ({problem or 'empty entry'}); run `xpubench ceilings`"
    t = Table(title=f"Measured ceilings (cache {cache.cache_path()})")
    for col in ("backend", "device", "what", "value", "where", "written"):
        t.add_column(col, justify="right" if col == "value" else "left")
    for r in rows:
        value = "n/a" if r["value"] is None else f"{r['value']:,.1f} {r['unit']}"
        t.add_row(r["backend"], r["device"], r["what"], value, str(r["where"]), str(r["written"]))
    return t


def cmd_ceilings(args: argparse.Namespace, console: Console) -> int:
    from xpubench.devices.detect import environment

    env = environment()
    if args.budget is not None and not args.budget > 0:
        raise UserError(f"--budget must be > 0 seconds, got {args.budget}")
    if not args.show:
        installed = [b for b, info in env.get("backends", {}).items() if info.get("installed") and b in ADAPTERS]
        backends = _split(args.backend) or installed
        for b in backends:
            if b not in installed:
                raise UserError(f"no ceiling for backend {b!r} here (installed with an adapter: {', '.join(installed)})")
        precisions = _split(args.precision) or ["fp32"]
        for b in backends:
            devices = _split(args.device) or [d["id"] for d in env["backends"][b].get("devices", [])]
            for device in devices:
                usable = [p for p in precisions if p in PRECISIONS[b]]
                if not usable:
                    continue
                console.print(f"{b} {device}: {', '.join(usable)} ...", highlight=False)
                got = ceilings_for(env, b, device, usable, budget_s=args.budget, refresh=args.refresh,
                                   with_bandwidth=not args.no_bandwidth)
                console.print(f"  {got['source']}" + (f" ({got['cache_note']})" if got["cache_note"] else ""),
                              highlight=False)
    if args.json:
        entry, _ = cache.lookup(cache.machine_key(env))
        print(json.dumps(cache.summary_rows(entry), indent=1))
    else:
        console.print(cached_table(env))
    return 0
