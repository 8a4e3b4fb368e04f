"""Every figure derived from measured results, computed once, after loading (results/ only reads and folds):

- peak.py: % of peak (matmul) and MFU (models) against the chip's peak at the case's precision;
- ceilings.py, efficiency.py: % of the measured ceiling, arithmetic intensity, the roofline, cost
  (cost.py) from the case's price;
- scaling.py: data-parallel speedup and efficiency against the same case on fewer devices;
- generation.py: a language model's pp MFU and its decode rate as a share of the bandwidth bound.

``analyse(results)`` fills them in place and returns the results; ``load(paths)`` is the results store's
``load_results`` followed by ``analyse`` on each file: what every report, compare and notebook reads.
"""

from __future__ import annotations

from xpubench.analysis import generation, peak, scaling
from xpubench.analysis.ceilings import annotate
from xpubench.results import store
from xpubench.results.schema import Result


def analyse(results: list[Result]) -> list[Result]:
    """Every derived figure of these results (one file's, or one run's), in place."""
    for r in results:
        if r.status == "ok":
            peak.add_peak_metrics(r.metrics, r.case, r.fingerprint or {})
            generation.add_generation_bounds(r.metrics, r.case, r.fingerprint or {})
    annotate(results)   # % of the measured ceiling, intensity, roofline, cost (ceilings.py)
    for r in results:
        if r.status == "ok":
            scaling.annotate(r.metrics, r.case, results)
    return results


def load(paths) -> list[store.LoadedFile]:
    """Results files, each folded into one Result per case and analysed."""
    from xpubench.plan.resolve import current_key

    loaded = store.load_results(paths)
    for f in loaded:
        for record in (*f.runs, *f.results):   # an older file's keys as this xpubench gives them (plan/resolve.py)
            if record.case.get("key"):
                record.case["key"] = current_key(record.case)
        analyse(f.results)
    return loaded
