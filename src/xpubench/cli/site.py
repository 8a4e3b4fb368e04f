"""`xpubench site DIR -o site/`: a static site from a folder of results files (publish/site.py)."""

from __future__ import annotations

import sys


def add_parser(sub) -> None:
    site = sub.add_parser("site", help="a static site (no server, no network) from a folder of results files")
    site.add_argument("folder", help="a folder of results files (*.jsonl, searched in subfolders too)")
    site.add_argument("-o", "--output", default="site", help="the site's folder (default: site)")
    site.add_argument("-j", "--jobs", type=int, default=None, help="processes reading the files (default: the "
                      "CPU count)")
    site.add_argument("--reports", action="store_true", help="also build each run's full report page (about 3 s "
                      "a run on a 2-core CPU; kept out of the default so 1,000 files build in seconds)")


def cmd_site(args, console) -> int:
    from xpubench.errors import UserError
    from xpubench.legible.plaintext import shown
    from xpubench.publish.site import build_site

    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs must be 1 or more, got {args.jobs}")
    summary = build_site(args.folder, args.output, jobs=args.jobs, reports=args.reports)
    for name, why in summary.skipped:
        print(f"xpubench: warning: {shown(name)} left out: {shown(why)}", file=sys.stderr)
    for note in summary.notes:
        print(f"xpubench: warning: {shown(note)}", file=sys.stderr)
    counts = ", ".join(f"{n} {word if n == 1 else word + 's'}" for n, word in [
        (summary.runs, "run"), (summary.cases, "case"), (summary.machines, "machine"), (summary.workloads, "workload"),
        (summary.pages, "page")])
    console.print(f"site written to {args.output}/index.html: {counts} in {summary.seconds:.1f} s", markup=False,
                  highlight=False)
    return 0
