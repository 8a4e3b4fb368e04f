"""A serve case turned back into the `xpubench serve` arguments that measure its point again
(plan/rerun.py gives a `run` case's). The case's key names what was served and asked (plan/serve.py): the
model's name, the engine, the device, the format, the users and rate, the lengths and the endpoint.

- A server xpubench started (its engine's name as the backend) is started again on the same device: a named
  shape's random weights (``--model NAME``), or the weights the case holds the path of (``--weights PATH``;
  a point recorded before cases held it says ``--weights WEIGHTS`` for the user to replace), under the
  same name (``--label`` where it is not the one the plan gives) and format. (A point recorded before cases
  held the shape is known by its name: ``smollm-135m-q8_0`` is smollm-135m's.)
- A server at a URL is asked again at that URL, under the same name, device and format.
- An open-loop point is ``--rate R``. Its cap on requests in flight is the largest ``--concurrency``, 64
  without one, so a cap other than 64 adds that closed-loop point to the sweep.
"""

from __future__ import annotations

from xpubench.case import Case
from xpubench.serve.keys import AS_SERVED, OPEN_CAP, REMOTE

WEIGHTS = "WEIGHTS"    # the placeholder for weights a case does not name


def serve_arguments(case: Case) -> list[str]:
    """The arguments after ``xpubench`` that measure ``case`` (a ``serve`` case) again."""
    o = case.options
    if o.get("url"):
        words = ["serve", "--url", str(o["url"]), "--label", case.workload]
        words += ["-d", case.device] if case.device != REMOTE else []
        words += ["--format", case.precision] if case.precision != AS_SERVED else []
    else:
        preset = o.get("preset") or (None if o.get("weights") else _shape(case))
        words = ["serve", "--server", case.backend, "-d", case.device]
        words += ["--model", preset] if preset else ["--weights", str(o.get("weights") or WEIGHTS)]
        words += ["--label", case.workload] if not preset or case.workload != f"{preset}-{case.precision}" else []
        words += ["--format", case.precision] if not str(o.get("weights", "")).endswith(".gguf") else []
    if case.rate:
        words += ["--rate", f"{case.rate:g}"] + ([] if case.users == OPEN_CAP else ["-c", str(case.users)])
    else:
        words += ["-c", str(case.users)]
    words += ["--input-len", str(o.get("input_len")), "--output-len", str(o.get("output_len")),
              "--endpoint", str(o.get("endpoint"))]
    words += [w for flag in ("requests", "warmup") if o.get(flag) is not None for w in (f"--{flag}", str(o[flag]))]
    return words + (["--seed", str(case.seed)] if case.seed else [])


def _shape(case: Case) -> str | None:
    """The named shape a point recorded before cases held it served, where its name is that shape's."""
    from xpubench.workloads.llama.config import PRESETS

    return next((name for name in PRESETS if case.workload == f"{name}-{case.precision}"), None)
