"""A planned case checked by the results reader's own schema before anything is measured."""

from __future__ import annotations

from xpubench.case import Case
from xpubench.errors import UserError


def readable(case: Case) -> None:
    """UserError unless the results file's reader accepts the case as a run would record it: the checks
    of results/validate.py, the one validation of both directions, so a run never writes a file that its
    report, compare and --resume refuse (a price or time budget above 1e100, a seed or batch size of
    2**63 and more)."""
    import json

    from xpubench.results.validate import Invalid, check_case

    try:
        check_case(json.loads(json.dumps(case.as_dict())), "case")
    except (Invalid, ValueError, OverflowError) as exc:
        reason = str(exc).removeprefix("case.").replace("options.", "")
        raise UserError(f"{case.key}: a results file could not hold this case ({reason})") from None
