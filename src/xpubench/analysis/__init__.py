"""Every figure derived from measured results, computed once, after loading (results/ only reads and folds):

- peak.py: % of peak (matmul) and MFU (models) against the chip's peak at the case's precision;
- ceilings.py, efficiency.py: % of the measured ceiling, arithmetic intensity, the roofline, cost
  (cost.py) from the case's price;
- scaling.py: data-parallel speedup and efficiency against the same case on fewer devices;
- generation.py: a language model's pp MFU and its decode rate as a share of the bandwidth bound.

``analyse(results)`` fills them in place and returns the results; ``load(paths)`` is the results store's
``load_results`` (each case typed, an older file's migrated: results/schema.py) followed by ``analyse``
on each file: what every report, compare and notebook reads. Each reads the typed case (``case.devices``,
``case.batch_size``) as the planner resolved it: no default is decided here.
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
    """Results files, each folded into one typed Result per case (an older line's case migrated once, by the
    planner's reading: plan/resolve.py recorded_case) and analysed."""
    from xpubench.plan.resolve import recorded_case

    loaded = store.load_results(paths, read=recorded_case)
    for f in loaded:
        analyse(f.results)
    return loaded
