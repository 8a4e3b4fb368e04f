"""A folder of results files -> one record per run (a file): its machine, date, fingerprint and cases.

Each file is read by the results store (validation, folding) and analysed (peak shares) in a pool of
worker processes; what the site needs of it is kept as plain data (``RunRecord``), cached by the file's
content digest in the site folder, so a rebuild reads only the files that are new or changed. A file that
is not a results file is left out with its one-line reason (shown on the index), never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from xpubench.errors import UserError, ends_with_parent, stops_held

CACHE_VERSION = 2


@dataclass
class RunRecord:
    id: str                 # the first 16 hex digits of the file's sha256: its pages' names
    file: str               # the path under the folder given
    digest: str
    machine: str            # a short id of the machine (hostname + chips)
    machine_label: str      # how pages name it: "vm: AMD EPYC"
    host: str
    chips: list[str]
    date: str               # when its first case started (ISO-8601 UTC), "" unknown
    xpubench: str
    git: str
    fingerprint: dict       # the first result's, as recorded
    cases: list[dict]       # publish/rows.py rows + process medians, raw samples, options

    def as_dict(self) -> dict:
        return asdict(self)


def find_files(folder: Path) -> list[Path]:
    """Every ``*.jsonl`` under ``folder`` (sorted; links to files outside it are followed as files)."""
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder of results files")
    return sorted(p for p in folder.rglob("*.jsonl") if p.is_file())


def _machine(fingerprint: dict, chips: list[str]) -> tuple[str, str, str]:
    host = str(fingerprint.get("hostname") or (fingerprint.get("host") or {}).get("hostname") or "unknown host")
    cpu = (fingerprint.get("host") or {}).get("cpu") or {}
    family = (f" (family {cpu.get('cpu_family')} model {cpu.get('cpu_model')})"
              if isinstance(cpu, dict) and cpu.get("cpu_family") is not None else "")
    label = f"{host}: {', '.join(chips) or 'unknown chip'}{family}"
    return hashlib.sha256(label.encode("utf-8", "replace")).hexdigest()[:10], label, host


def read_run(path: Path, name: str, digest: str) -> dict:
    """One results file as a RunRecord's dict; {"error": reason} when it is not a results file."""
    from xpubench import analysis
    from xpubench.publish.rows import rows
    from xpubench.report.base.frame import Entry, timing_name
    from xpubench.results import store
    from xpubench.results.plaintext import shown

    try:
        loaded = store.load_file(path)
        results = analysis.analyse(loaded.results)
    except UserError as exc:   # said with the name under the folder (a public site shows no local path)
        return {"error": shown(" ".join(str(exc).replace(str(path), name).split()))}
    except (OSError, ValueError, TypeError, RecursionError) as exc:
        return {"error": shown(f"{type(exc).__name__}: {' '.join(str(exc).replace(str(path), name).split())}")}
    if not results:
        return {"error": "no results in it"}
    cases = []
    for result, row in zip(results, rows([Entry(name, path, r) for r in results])):
        timing = timing_name(result)
        per_process = [[float(v) for v in run.samples.get(timing or "", []) or [] if isinstance(v, (int, float))]
                       for run in result.ok_runs]
        row.update(options=json.dumps(result.case.get("options") or {}, sort_keys=True, default=str),
                   process_samples=per_process)
        cases.append(row)
    fingerprint = results[0].fingerprint or {}
    chips = sorted({str(c["device_name"]) for c in cases if c.get("device_name")})
    machine, label, host = _machine(fingerprint, chips)
    dates = sorted(str(r.started_at) for r in results if r.started_at)
    return RunRecord(digest[:16], name, digest, machine, label, host, chips, dates[0] if dates else "",
                     str(fingerprint.get("xpubench") or "n/a"), str(fingerprint.get("git") or "n/a"),
                     json.loads(json.dumps(fingerprint, default=str)), cases).as_dict()


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_one(args: tuple[str, str, str]) -> dict:
    path, name, digest = args
    return read_run(Path(path), name, digest)


def _load_cache(cache: Path | None) -> dict:
    """{"records": {digest: record}, "stats": {path: [size, mtime_ns, digest]}} of an earlier build."""
    try:
        blob = json.loads(cache.read_text(encoding="utf-8")) if cache is not None and cache.is_file() else {}
    except (OSError, ValueError):
        blob = {}
    if not isinstance(blob, dict) or blob.get("cache_version") != CACHE_VERSION:
        return {"records": {}, "stats": {}}
    return {"records": blob.get("records") or {}, "stats": blob.get("stats") or {}}


def collect(folder: Path, cache: Path | None = None, jobs: int | None = None,
            on_progress=None) -> tuple[list[RunRecord], list[tuple[str, str]]]:
    """(the runs, oldest first; [(file, why it was left out)]) of every results file under ``folder``.
    ``cache``: a JSON file of what earlier builds read (by content digest; a file whose size and
    modification time are unchanged is not even hashed again)."""
    files = find_files(folder)
    if not files:
        raise UserError(f"{folder}: no results files (*.jsonl) in it")
    old = _load_cache(cache)
    stats, records, todo, names = {}, {}, [], []
    for path in files:
        name, st = path.relative_to(folder).as_posix(), path.stat()
        known = old["stats"].get(str(path))
        digest = known[2] if known and known[:2] == [st.st_size, st.st_mtime_ns] else _digest(path)
        stats[str(path)] = [st.st_size, st.st_mtime_ns, digest]
        names.append((name, digest))
        if digest in old["records"]:
            records[digest] = old["records"][digest]
        elif digest not in records:
            records[digest] = None
            todo.append((str(path), name, digest))
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    pool = None
    try:
        if jobs == 1 or len(todo) < 8:
            blobs = map(_read_one, todo)
        else:   # its workers leave Ctrl-C to this process and end with it (errors.ends_with_parent)
            with stops_held():   # the workers are forked here, by the first task
                pool = ProcessPoolExecutor(jobs, initializer=ends_with_parent)
                blobs = pool.map(_read_one, todo, chunksize=max(1, len(todo) // (jobs * 8)))
        for (_, name, digest), blob in zip(todo, blobs):
            records[digest] = blob
            if on_progress:
                on_progress(name)
    finally:   # an interrupt (Ctrl-C, SIGTERM, SIGHUP) drops the files no worker has begun
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps({"cache_version": CACHE_VERSION, "records": records, "stats": stats}),
                         encoding="utf-8")
    runs = [RunRecord(**(records[d] | {"file": n})) for n, d in names if "error" not in records[d]]
    skipped = [(n, records[d]["error"]) for n, d in names if "error" in records[d]]
    runs.sort(key=lambda r: (r.date, r.file))
    return runs, skipped
