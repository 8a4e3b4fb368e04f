"""Deliberate faults, to check that isolation works on a machine: `xpubench run --workload selftest
--selftest ok,raise,segfault,hang,oom`.

``case.options["behaviour"]`` picks one:
  ok        succeeds at once
  sleep     sleeps ``seconds`` (default 0.1), then succeeds
  raise     raises an exception                       -> error
  baddata   raises UserError, as a corrupt data file does -> error with that one line
  segfault  reads address 0                           -> crash (SIGSEGV)
  abort     calls abort()                             -> crash (SIGABRT)
  hang      sleeps forever                            -> timeout
  oom       allocates until the memory limit stops it -> oom (host); 1 GiB without a limit
  exit      exits with ``code`` (default 3), no result -> crash
  nan       succeeds with a NaN metric (written as null)
``case.options["placement"]`` overrides the reported placement (to exercise the placement check).

A workload like the others (registered in workloads.REGISTRY), but its own measurement: its record's
``run``, which launch/dispatch.py calls instead of a backend's adapters; ``case_options`` makes one case
per behaviour (``--selftest ok,raise``, which also selects the workload). Not in the default run.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass

from xpubench import envnames
from xpubench.case import Options
from xpubench.results.outcome import Outcome
from xpubench.workloads.base import Workload, WorkloadOption

BEHAVIOURS = ("ok", "sleep", "raise", "baddata", "segfault", "abort", "hang", "oom", "exit", "nan")


def case_options(options: dict) -> list[dict]:
    """options["behaviours"] (names or tables like {behaviour = "sleep", seconds = 0.5}) -> one options
    dict per selftest case; without it, one case with the options as given. Unknown ones: UserError."""
    from xpubench.errors import UserError

    wanted = options.get("behaviours")
    base = {k: v for k, v in options.items() if k != "behaviours"}
    if wanted is None:
        return [base]
    if not isinstance(wanted, list) or not wanted:
        raise UserError(f"selftest behaviours must be a non-empty list, got {wanted!r}")
    out = []
    for item in wanted:
        item = {"behaviour": item} if isinstance(item, str) else item
        if not isinstance(item, dict) or item.get("behaviour") not in BEHAVIOURS:
            name = item.get("behaviour") if isinstance(item, dict) else item
            raise UserError(f"unknown selftest behaviour {name!r}; choose from: {', '.join(BEHAVIOURS)}")
        out.append({**base, **item})
    return out


@dataclass(frozen=True, eq=False, kw_only=True)
class SelftestOptions(Options):
    """The selftest's own options (``Workload.Options``): one case's behaviour, its exit code ("exit"), its
    sleep ("sleep") and the placement it reports; ``behaviours`` until ``case_options`` splits it."""

    behaviour: str = "ok"
    code: int = 3
    seconds: float = 0.1
    placement: str | None = None
    behaviours: list | None = None

    def unresolved(self) -> str | None:
        return "with a list of behaviours (one case per behaviour)" if self.behaviours is not None else None


def run(case) -> Outcome:
    options = SelftestOptions.of(case.options)
    behaviour = options.behaviour
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"unknown selftest behaviour {behaviour!r}; choose from: {', '.join(BEHAVIOURS)}")
    if behaviour == "raise":
        raise RuntimeError("selftest: deliberate exception")
    if behaviour == "baddata":
        from xpubench.errors import UserError

        raise UserError("selftest: data file is corrupt (deliberate); fix or delete it")
    if behaviour == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    if behaviour == "abort":
        os.abort()
    if behaviour == "hang":
        while True:
            time.sleep(1)
    if behaviour == "oom":
        cap = None if os.environ.get(envnames.MEMORY_LIMIT) else 1 << 30  # no limit: stop at 1 GiB, not the host's
        hog = []
        while True:
            if cap is not None and len(hog) * (256 << 20) >= cap:
                raise MemoryError("selftest: 1 GiB allocated with no --memory-limit (simulated OOM)")
            hog.append(bytearray(256 << 20))
            for i in range(0, len(hog[-1]), 4096):  # touch every page so the memory is really used
                hog[-1][i] = 1
    if behaviour == "exit":
        os._exit(int(options.code))
    if behaviour == "sleep":
        time.sleep(float(options.seconds))
    metrics = {"behaviour": behaviour, "value": float("nan") if behaviour == "nan" else 1.0}
    return Outcome(metrics=metrics, placement=options.placement or case.device)


BEHAVIOURS_OPTION = WorkloadOption("behaviours",
                                   "deliberate faults, e.g. ok,raise,segfault,hang,oom (checks isolation)",
                                   flag="--selftest", name="selftest", is_list=True, selects=True, hidden=True)
WORKLOAD = Workload(name="selftest", title="deliberate faults (isolation check)", kind="selftest",
                    sources=(__file__,), modes=("train",), options=(BEHAVIOURS_OPTION,), Options=SelftestOptions,
                    check_options=case_options,
                    key_options=("behaviour",), case_options=case_options, run=run, in_default_run=False)
