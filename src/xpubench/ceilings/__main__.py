"""``python -m xpubench.ceilings --backend B --device D --precisions fp32,bf16 [--budget S] [--bandwidth
[--bandwidth-repeats N]]``: measure in this process and print the ceilings (and bandwidth: the first, and
all N) as one JSON object on stdout.

This is the child that ``measure.measure_in_subprocess`` starts; bad input ends in one line on stderr
and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from xpubench.ceilings import measure
from xpubench.errors import UserError


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xpubench.ceilings", description=__doc__.splitlines()[0])
    ap.add_argument("--backend", required=True, choices=sorted(measure.with_ceilings()))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precisions", default="fp32")
    ap.add_argument("--budget", type=_positive, default=None, help="seconds per precision for the shape search")
    ap.add_argument("--bandwidth", action="store_true", help="also measure copy / triad bandwidth")
    ap.add_argument("--bandwidth-budget", type=_positive, default=measure.BANDWIDTH_BUDGET_S)
    ap.add_argument("--spec-bandwidth", type=_positive, default=None, help="the chip's bytes/s, to compare against")
    ap.add_argument("--bandwidth-repeats", type=int, default=1, help="bandwidth measurements, one after the other")
    args = ap.parse_args(argv)
    try:
        ceilings = [measure.search(args.backend, args.device, p.strip(), budget_s=args.budget)
                    for p in args.precisions.split(",") if p.strip()]
        bws = [measure.bandwidth(args.backend, args.device, budget_s=args.bandwidth_budget,
                                 spec_bytes_per_s=args.spec_bandwidth)
               for _ in range(max(args.bandwidth_repeats, 1) if args.bandwidth else 0)]
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    json.dump({"ceilings": [c.as_dict() for c in ceilings], "bandwidth": bws[0].as_dict() if bws else None,
               "bandwidths": [bw.as_dict() for bw in bws]}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
