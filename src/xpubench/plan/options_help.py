"""The help texts of `xpubench run`'s options (and `doctor`'s -b and -d), each made from what it
describes: the workload and backend registries, the brief run's choice, the modes, the spellings
devices/device.py reads; a flag several workloads share says each of their texts once
(``shared_help``). options.py declares the options with them."""

from __future__ import annotations

import re

from xpubench.plan.request import BRIEF_BUDGET_S
from xpubench.plan.validation import MODES
from xpubench.workloads import get_workload, offered

_DEFAULT = re.compile(r"\s*\((default [^)]*)\)$")


def shared_help(texts: list[str]) -> str:
    """One help text of a flag several workloads share, each of their texts said once: "gpt generation:
    prompt tokens per sequence" and "llama generation: prompt tokens per sequence (default 512)" read
    "gpt, llama generation: prompt tokens per sequence (llama: default 512)". A text is "who: what
    (default ...)"; texts with the same "what" (and the same kind of who: "generation") are one."""
    said: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for text in texts:
        who, _, what = text.partition(": ")
        found = _DEFAULT.search(what)
        name, _, kind = who.partition(" ")
        said.setdefault((kind, _DEFAULT.sub("", what)), []).append((name, found.group(1) if found else ""))
    parts = []
    for (kind, what), whose in said.items():
        defaults = [(name, d) for name, d in whose if d]
        tail = ("" if not defaults else f" ({defaults[0][1]})" if len(whose) == 1 else
                " (" + "; ".join(f"{name}: {d}" for name, d in defaults) + ")")
        parts.append(f"{', '.join(name for name, _ in whose)}{' ' + kind if kind else ''}: {what}{tail}")
    return "; ".join(parts)


REFRESH_HELP = ("measure the reference figures again instead of reading them from the cache: the CPU clock behind "
                "the peak estimate, a run's brief bandwidth behind %% of the bandwidth bound (docs/ceilings.md)")


def comma_list(items) -> str:
    return ", ".join(map(str, items))


def workload_help() -> str:
    """-w's help, from the workload registry and the brief run's choice (plan/brief.py)."""
    from xpubench.plan.brief import PRIORITY

    return (f"comma list of {comma_list(offered())} (default: the brief run, {comma_list(PRIORITY)} as far as its "
            f"{BRIEF_BUDGET_S:g} s budget goes; --all: every default workload briefly)")


def _backend_help(ids: list[str], default: list[str]) -> str:
    """-b's help (run's and doctor's), from the backend registry (backends/__init__.py)."""
    return f"comma list of {comma_list(ids)} (default: {comma_list(default)}, those installed here)"


def run_backend_help() -> str:
    from xpubench.plan.defaults import backend_ids, default_backends

    return _backend_help(backend_ids(), default_backends())


def doctor_backend_help() -> str:
    """The backends with doctor adapters (``Backend.doctor_ops``); its default, as run's, those installed."""
    from xpubench import backends
    from xpubench.backends.base import Backend
    from xpubench.plan.defaults import default_backends

    checked = [n for n in backends.names() if type(backends.get(n)).doctor_ops is not Backend.doctor_ops]
    return _backend_help(checked, default_backends())


def device_help(more: str = "") -> str:
    """-d's help (run's and doctor's): the spellings devices/device.py reads."""
    from xpubench.devices.device import SPELLINGS

    return f"{SPELLINGS} (default: the first device of each kind a backend sees{more})"


def precision_help() -> str:
    from xpubench import backends

    every = dict.fromkeys(p for n in backends.names() for p in backends.get(n).precisions)
    return f"comma list of {comma_list(every)} (default: each workload's and device's, `--dry-run` shows them)"


def mode_help() -> str:
    """--mode's help: the modes (plan.validation.MODES) and the workloads whose default is not training."""
    others = [f"{name}: {', '.join(get_workload(name).default_modes)}" for name in offered()
              if get_workload(name).default_modes != ("train",)]
    return (f"comma list of {comma_list(MODES)} (time-to-target: train to the workload's default target; default "
            f"train{''.join('; ' + o for o in others)})")
