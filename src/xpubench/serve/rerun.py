"""A serve case turned back into the `xpubench serve` arguments that measure its point again
(plan/rerun.py gives a `run` case's). The case's key names what was asked (serve/record.py): its label,
where the server ran, the weights' format, the users or the cap on requests in flight, the load, the
lengths and the endpoint.

- A server xpubench started here (device ``cpu``) is started again: ``--model NAME --format F`` when the
  label is a named shape's (``smollm-135m-q8_0``). Otherwise the weights were the user's, and a case does
  not hold their path, so the command says ``--weights WEIGHTS`` for the user to replace, with
  ``--label`` (and ``--format``, unless a GGUF file was served as it is).
- A server at a URL (device ``remote``) is asked again at that URL, under the same label.
- An open-loop point (``poisson R rps``) is ``--rate R``. Its cap on requests in flight is the largest
  ``--concurrency``, 64 without one, so a cap other than 64 adds that closed-loop point to the sweep.
"""

from __future__ import annotations

from xpubench.case import Case
from xpubench.serve.model import AS_IN_THE_FILE, FORMATS, served_as
from xpubench.workloads.llama.config import PRESETS

OPEN_CAP = 64          # an open-loop point's cap on requests in flight without --concurrency (serve/run.py's)
WEIGHTS = "WEIGHTS"    # the placeholder for weights a case does not name


def serve_arguments(case: Case) -> list[str]:
    """The arguments after ``xpubench`` that measure ``case`` (a ``serve`` case) again."""
    o = case.options
    if case.device == "remote":
        words = ["serve", "--url", str(o.get("url")), "--label", case.workload]
    else:
        shape = next((name for name in PRESETS if case.precision in FORMATS
                      and served_as(name, case.precision) == (case.workload, case.precision)), None)
        words = ["serve", "--server", "llamacpp", *(["--model", shape] if shape else
                                                       ["--weights", WEIGHTS, "--label", case.workload])]
        words += ["--format", case.precision] if case.precision != AS_IN_THE_FILE else []
    load = str(o.get("load"))
    if load.startswith("poisson"):
        words += ["--rate", load.split()[1]] + ([] if case.batch_size == OPEN_CAP else ["-c", str(case.batch_size)])
    else:
        words += ["-c", str(case.batch_size)]
    words += ["--input-len", str(o.get("input_len")), "--output-len", str(o.get("output_len")),
              "--endpoint", str(o.get("endpoint"))]
    words += [w for flag in ("requests", "warmup") if o.get(flag) is not None for w in (f"--{flag}", str(o[flag]))]
    return words + (["--seed", str(case.seed)] if case.seed else [])
