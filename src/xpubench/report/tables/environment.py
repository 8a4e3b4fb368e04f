"""A results file's fingerprint as readable label -> value pairs, what differs between two of them, and the
report's environments table (one column per file) with the warnings it leads to.

A result measured against a server xpubench did not start (`xpubench serve --url`) carries the fingerprint of
the client that sent the requests; the machine that served them was never seen. Its facts about a machine
(host, CPU, devices, kernels, versions, variables, how busy it was) read ``REMOTE`` in every table and
comparison, never "not detected" nor the client's own, and are never compared: its summary is the host
(``REMOTE``) and what xpubench saw of the run, the xpubench that timed the requests and when it ran
(``SEEN_OF_REMOTE``); beside other files every other fact of its column reads ``REMOTE``."""

from __future__ import annotations

import pandas as pd

from xpubench.devices import envvars, kernels
from xpubench.legible.units import fmt_bytes

ENV_VARS = envvars.NAMES   # the result-changing variables (devices/envvars.py says what each changes)
NOT_COMPARED = ("recorded at", "CPU busy at start")   # differs between any two runs: shown, never warned about
BELOW = "kernels below the CPU"
LIKELY_CAUSE = "the CPU kernels differ: a likely cause of a speed difference"
NOT_RECORDED = "not recorded"
DIFFER = "the environments differ"
REMOTE = "remote server: not seen by xpubench"
SEEN_OF_REMOTE = ("xpubench", "recorded at")   # what a remote server's file says of its run: the client's
UNSEEN = "unseen_server"   # the key ``file_fingerprints`` marks a remote server's fingerprint with


def served_unseen(result) -> bool:
    """Whether ``result`` was measured against a server xpubench did not start (`serve --url`)."""
    return bool(result.case.options.get("url"))


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
    if fp.get(UNSEEN):   # the client's machine, not the server's: see the module docstring
        return {"host": REMOTE, **{label: out[label] for label in SEEN_OF_REMOTE}}
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
    """source label -> the distinct fingerprints its results carry (usually one per file); a remote server's
    marked ``UNSEEN`` (``served_unseen``)."""
    seen: dict[str, list[dict]] = {}
    for e in entries:
        fps = seen.setdefault(e.source, [])
        fp = e.result.fingerprint or {}
        fp = {**fp, UNSEEN: True} if fp and served_unseen(e.result) else fp
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
    (a side that never loaded the library, a numpy-only run's torch kernels, says "not recorded": no claim).
    A remote server's side (``UNSEEN``) is said once, "B: remote server: not seen by xpubench", and only what
    xpubench saw of it is compared."""
    sa, sb = summarize_fingerprint(a), summarize_fingerprint(b)
    unseen = [f"{name}: {REMOTE} (its machine, devices and software are unknown)"
              for name, fp in zip(names, (a, b)) if (fp or {}).get(UNSEEN)]
    first, rest = [], list(unseen)
    for label in dict.fromkeys([*sa, *sb]):
        if label in NOT_COMPARED or (unseen and label not in SEEN_OF_REMOTE):
            continue
        va, vb = _fact(sa, a, label), _fact(sb, b, label)
        if va != vb:
            line = f"{label}: {va} ({names[0]}) vs {vb} ({names[1]})"
            if is_kernel(label) and NOT_RECORDED not in (va, vb):
                first.append(f"{line} - {LIKELY_CAUSE}")
            else:
                rest.append(line)
    return first + rest


def differences_title(lines: list[str]) -> str:
    """The heading of ``differences``' lines: "the environments differ", or where a side is a remote server's
    (nothing of its machine seen, so nothing to say they differ) "the environments cannot all be compared"."""
    return "the environments cannot all be compared" if any(REMOTE in line for line in lines) else DIFFER


def environment_table(items) -> pd.DataFrame:
    """Rows = facts (host, CPU, framework versions, devices, drivers...), one column per file of the
    entries ``items`` (report/base/frame.py)."""
    columns, unseen = {}, []
    for source, fps in file_fingerprints(items).items():
        for i, fp in enumerate(fps or [{}]):
            name = source if i == 0 else f"{source} #{i + 1}"
            columns[name] = summarize_fingerprint(fp)
            unseen += [name] if fp.get(UNSEEN) else []
    table = pd.DataFrame(columns)
    table[unseen] = table[unseen].fillna(REMOTE)   # a fact only the other files have: not seen there either
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
        title = differences_title(diff)
        if diff:
            lines.append((f"{other} ran in another environment than {names[0]}" if title == DIFFER else
                          f"{other} against {names[0]}: {title}") + ": " + "; ".join(diff))
    return lines
