"""Measured ceilings (issue 14): what this machine's backends really reach, and results against it.

* ``harness/ceiling.py``: the matmul shape search -> ``Ceiling`` (achievable FLOP/s per backend,
  device and dtype); ``harness/bandwidth.py``: STREAM copy / triad -> ``Bandwidth``.
* ``ceilings/measure.py``: runs both for one backend and device, here or in a child process, and
  through ``ceilings/cache.py`` (per machine key, never a stale or foreign entry).
* ``analysis/efficiency.py`` (on load): a result's % of spec peak, % of measured ceiling, arithmetic intensity,
  and the label that keeps a CPU estimate honest.

See docs/ceilings.md.
"""
