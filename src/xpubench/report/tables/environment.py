"""A results file's fingerprint as readable label -> value pairs, what differs between two of them, and the
report's environments table (one column per file) with the warnings it leads to."""

from __future__ import annotations

import pandas as pd

from xpubench.devices import envvars, kernels
from xpubench.legible.units import fmt_bytes

ENV_VARS = envvars.NAMES   # the result-changing variables (devices/envvars.py says what each changes)
NOT_COMPARED = ("recorded at", "CPU busy at start")   # differs between any two runs: shown, never warned about
BELOW = "kernels below the CPU"
LIKELY_CAUSE = "the CPU kernels differ: a likely cause of a speed difference"
NOT_RECORDED = "not recorded"


def is_kernel(label: str) -> bool:
    """Whether a label is about which CPU kernels ran (devices/kernels.py, and the variables that pick them)."""
    return label in envvars.KERNEL_NAMES or label == BELOW or label.endswith((" BLAS kernel", " CPU kernels",
                                                                              " CPU target"))


def _device_text(dev: dict) -> str:
    name = dev.get("name") or "unknown chip"
    extras = [f"driver {dev['driver']}" if dev.get("driver") else "",
              f"compute capability {dev['compute_capability']}" if dev.get("compute_capability") else "",
              fmt_bytes(dev["memory_bytes"]) if dev.get("memory_bytes") else ""]
    extras = [e for e in extras if e]
    return f"{dev.get('id', '?')}: {name}" + (f" ({', '.join(extras)})" if extras else "")


def summarize_fingerprint(fp: dict | None) -> dict[str, str]:
    """The facts a reader needs to trust or question a comparison, in a fixed order; unknown -> "n/a"."""
    fp = fp or {}
    host = fp.get("host") or {}
    cpu = host.get("cpu") or {}
    cores = cpu.get("usable_cores") or cpu.get("logical_cores")
    out: dict[str, str] = {
        "host": str(fp.get("hostname") or host.get("hostname") or "n/a"),
        "CPU": f"{cpu.get('model') or 'n/a'}" + (f", {cores} usable cores" if cores else ""),
        "memory": fmt_bytes(host.get("memory_bytes") or cpu.get("memory_bytes")),
        "OS": str(fp.get("platform") or host.get("os") or "n/a"),
        "python": str(fp.get("python") or host.get("python") or "n/a"),
        "xpubench": f"{fp.get('xpubench') or 'n/a'} (git {_short_git(fp.get('git'))})",
    }
    for name, version in sorted((fp.get("packages") or {}).items()):
        if version:
            out[name] = str(version)
    for backend, info in sorted((fp.get("backends") or {}).items()):
        if not isinstance(info, dict) or not info.get("installed"):
            continue
        for field, label in (("blas", "BLAS"), ("cuda_version", "CUDA"), ("cudnn_version", "cuDNN"),
                             ("hip_version", "HIP"), ("platform", "platform"), ("error", "error")):
            if info.get(field):
                out[f"{backend} {label}"] = str(info[field])
        devices = [_device_text(d) for d in info.get("devices") or [] if isinstance(d, dict)]
        out[f"{backend} devices"] = "; ".join(devices) or (
            "not detected (no case of the run used it)" if info.get("detected") is False else "none")
    env = fp.get("env") or {}
    for var in ENV_VARS:  # only those set: the rest read as missing(var) = "unset"
        if var in env:
            out[var] = str(env[var])
    out.update(kernels.describe(fp.get("kernels")))
    below = kernels.findings(fp.get("kernels"), cpu.get("flags"), env)
    if below:
        out[BELOW] = "; ".join(f.sentence() for f in below)
    busy = fp.get("cpu_busy_at_start")
    out["CPU busy at start"] = "n/a" if busy is None else f"{busy:.0%} (other processes, before any case ran)"
    out["recorded at"] = str(fp.get("time") or "n/a")
    return out


def missing(label: str) -> str:
    """What a fact absent from a fingerprint means: an environment variable unset, no kernel below the CPU,
    a kernel not recorded (an older file, a library not loaded), a package not installed."""
    if label in ENV_VARS:
        return "unset"
    if label == BELOW:
        return "none"
    return NOT_RECORDED if is_kernel(label) else "not installed"


def file_fingerprints(entries) -> dict[str, list[dict]]:
    """source label -> the distinct fingerprints its results carry (usually one per file)."""
    seen: dict[str, list[dict]] = {}
    for e in entries:
        fps = seen.setdefault(e.source, [])
        fp = e.result.fingerprint or {}
        if fp and not any(_same(fp, other) for other in fps):
            fps.append(fp)
    return seen


def _same(a: dict, b: dict) -> bool:
    strip = dict.fromkeys(NOT_COMPARED)
    sa, sb = summarize_fingerprint(a), summarize_fingerprint(b)
    return {k: v for k, v in sa.items() if k not in strip} == {k: v for k, v in sb.items() if k not in strip}


def _fact(summary: dict[str, str], fp: dict | None, label: str) -> str:
    """A fact of a summarised fingerprint, or what its absence means (``missing``); which kernels ran
    below the CPU is "not recorded" where the fingerprint holds no kernels at all."""
    if label == BELOW and label not in summary and not (fp or {}).get("kernels"):
        return NOT_RECORDED
    return summary.get(label, missing(label))


def differences(a: dict | None, b: dict | None, names: tuple[str, str] = ("A", "B")) -> list[str]:
    """One line per fact that differs between two fingerprints: "torch: 2.13.0+cpu (A) vs 2.4.0 (B)"; those
    about the CPU kernels first, flagged as a likely cause (LIKELY_CAUSE) where both sides recorded them
    (a side that never loaded the library, a numpy-only run's torch kernels, says "not recorded": no claim)."""
    sa, sb = summarize_fingerprint(a), summarize_fingerprint(b)
    first, rest = [], []
    for label in dict.fromkeys([*sa, *sb]):
        if label in NOT_COMPARED:
            continue
        va, vb = _fact(sa, a, label), _fact(sb, b, label)
        if va != vb:
            line = f"{label}: {va} ({names[0]}) vs {vb} ({names[1]})"
            if is_kernel(label) and NOT_RECORDED not in (va, vb):
                first.append(f"{line} - {LIKELY_CAUSE}")
            else:
                rest.append(line)
    return first + rest


def environment_table(items) -> pd.DataFrame:
    """Rows = facts (host, CPU, framework versions, devices, drivers...), one column per file of the
    entries ``items`` (report/base/frame.py)."""
    columns = {}
    for source, fps in file_fingerprints(items).items():
        for i, fp in enumerate(fps or [{}]):
            columns[source if i == 0 else f"{source} #{i + 1}"] = summarize_fingerprint(fp)
    table = pd.DataFrame(columns)
    table = table.apply(lambda row: row.fillna(missing(str(row.name))), axis=1)
    return table.reset_index(names="")


def environment_tables(items) -> list[tuple[str, pd.DataFrame]]:
    """The environment table as the report shows it: one file's as it is; with several, the facts every
    file shares once ("the same in every file": fact, value) and then only what differs, one column per
    file (the same versions and devices side by side five times made the page wider than a screen)."""
    table = environment_table(items).set_index("")
    if table.shape[1] < 2:
        return [("", table.reset_index(names=""))]
    same = table.nunique(axis=1, dropna=False) == 1
    shared = table.loc[same].iloc[:, :1].set_axis(["value"], axis=1).reset_index(names="")
    return [("The same in every file", shared), ("What differs", table.loc[~same].reset_index(names=""))]


def _short_git(commit) -> str:
    """A commit as git log --oneline shows it (12 hex digits), "+dirty" kept; n/a when unknown."""
    text = str(commit or "n/a")
    head, dirty, _ = text.partition("+dirty")
    return (head[:12] if len(head) == 40 else head) + ("+dirty" if dirty else "")


def environment_warnings(items) -> list[str]:
    """One line per file that ran in another environment than the first, naming what differs."""
    fps = file_fingerprints(items)
    names = list(fps)
    if len(names) < 2:
        return []
    lines = []
    for other in names[1:]:
        diff = differences((fps[names[0]] or [{}])[0], (fps[other] or [{}])[0], (names[0], other))
        if diff:
            lines.append(f"{other} ran in another environment than {names[0]}: " + "; ".join(diff))
    return lines
