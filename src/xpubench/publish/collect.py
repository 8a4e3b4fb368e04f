"""A folder of results files -> one record per run (a file): its machine, date, fingerprint and cases.

Each file is read by the results store (validation, folding) and analysed (peak shares) in a pool of
worker processes; what the site needs of it is kept as plain data, cached by the file's content digest in
the site folder (publish/cache.py), so a rebuild reads only the files that are new or changed. A file that
is not a results file, or that xpubench cannot summarise, is left out with its one-line reason (shown on
the index), never a traceback and never the end of the build. Every text from a file is kept as the
terminal shows it (results/plaintext.py ``shown``): control, format and lone surrogate characters escaped.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from xpubench.case import Case
from xpubench.errors import UserError, ends_with_parent, stops_held
from xpubench.publish import cache
from xpubench.publish.folder import file_digest
from xpubench.readfile import FileProblem
from xpubench.results.plaintext import shown
from xpubench.results.validate import Invalid


@dataclass
class RunRecord:
    id: str                 # the first 16 hex digits of the file's sha256: its pages' names
    file: str               # the path under the folder given, as shown (``shown``)
    path: Path              # the file itself (read for the copy and the report; never shown)
    digest: str
    machine: str            # a short id of the machine (hostname + chips)
    machine_label: str      # how pages name it: "vm: AMD EPYC"
    host: str
    chips: list[str]
    date: str               # when its first case started (ISO-8601 UTC), "" unknown
    xpubench: str
    git: str
    fingerprint: dict       # the first result's, as recorded
    cases: list[dict]       # publish/rows.py rows + setting, process medians, raw samples, options, rerun command
    copies: list[str] = field(default_factory=list)   # other names of the same content under the folder

    @classmethod
    def of(cls, digest: str, name: str, path: Path, record: dict) -> RunRecord:
        """From a cache record (publish/cache.py): the id and machine come from the digest and the label."""
        machine = hashlib.sha256(record["machine_label"].encode("utf-8", "backslashreplace")).hexdigest()[:10]
        return cls(digest[:16], shown(name), path, digest, machine, record["machine_label"], record["host"],
                   record["chips"], record["date"], record["xpubench"], record["git"], record.get("fingerprint") or {},
                   record["cases"])


def find_files(folder: Path) -> list[Path]:
    """Every ``*.jsonl`` under ``folder`` but folders (sorted; links to files outside it are followed as files; a
    FIFO or device is left out with its reason when it is read)."""
    if not folder.is_dir():
        raise UserError(f"{shown(folder)}: not a folder of results files")
    return sorted(p for p in folder.rglob("*.jsonl") if not p.is_dir())


def _label(fingerprint: dict, chips: list[str]) -> tuple[str, str]:
    host = str(fingerprint.get("hostname") or (fingerprint.get("host") or {}).get("hostname") or "unknown host")
    cpu = (fingerprint.get("host") or {}).get("cpu") or {}
    family = (f" (family {cpu.get('cpu_family')} model {cpu.get('cpu_model')})"
              if isinstance(cpu, dict) and cpu.get("cpu_family") is not None else "")
    return shown(f"{host}: {', '.join(chips) or 'unknown chip'}{family}"), shown(host)


def setting(case: Case, row: dict) -> str:
    """What the case is measured at, every part of its key that changes the figure named: its mode's size or
    batch (report/base/frame.py ``setting``) and each key option as recorded: "b1 n_layers=4 prompt_len=64
    new_tokens=16 decode=eager", "N=2048"."""
    from xpubench.report.base.frame import setting as size

    options = case.options
    parts = [size(row, short=True), f"x{case.devices}" if case.devices != 1 else "",
             str(row["data"]) if row.get("data") not in (None, "synthetic") else "",
             *(f"{k}={options[k]}" for k in dict.fromkeys([*case.key_options, "model", "target"])
               if options.get(k) not in (None, "", [], {}))]
    return shown(" ".join(p for p in parts if p))


def read_run(path: Path, name: str) -> dict:
    """One results file as the site keeps it (publish/cache.py); {"error": reason} when it is left out."""
    from xpubench import analysis
    from xpubench.plan.rerun import rerun_command
    from xpubench.publish.rows import rows
    from xpubench.report.base.frame import Entry, timing_name

    def said(exc: BaseException) -> str:   # with the name under the folder: a public site shows no local path
        text = str(exc)
        for local in (str(path), str(path.resolve())):
            text = text.replace(local, name)
        return shown(" ".join(text.split()))[:500]

    try:
        results = analysis.load([path])[0].results
        if not results:
            return {"error": "no results in it"}
        cases = []
        for result, row in zip(results, rows([Entry(name, path, r) for r in results])):
            timing = timing_name(result)
            per_process = [[float(v) for v in run.samples.get(timing or "", []) or [] if isinstance(v, (int, float))]
                           for run in result.ok_runs]
            row.update(options=shown(json.dumps(result.case.options.as_dict(), sort_keys=True, default=str)),
                       setting=setting(result.case, row), process_samples=per_process,
                       rerun=shown(rerun_command(result.case, local_paths=False)))
            cases.append(row)
        fingerprint = results[0].fingerprint or {}
        chips = sorted({str(c["device_name"]) for c in cases if c.get("device_name")})
        label, host = _label(fingerprint, chips)
        dates = sorted(str(r.started_at) for r in results if r.started_at)
        kept = {"machine_label": label, "host": host, "chips": chips, "date": shown(dates[0] if dates else ""),
                "xpubench": shown(fingerprint.get("xpubench") or "n/a"), "git": shown(fingerprint.get("git") or "n/a"),
                "fingerprint": json.loads(json.dumps(fingerprint, default=str)), "cases": cases}
        cache.check_record(kept, name)
        return kept
    except UserError as exc:
        return {"error": said(exc)}
    except Invalid as exc:
        return {"error": f"xpubench cannot show it: {said(exc)}"}
    except Exception as exc:   # noqa: BLE001 - one contributed file never ends the build; its reason is shown
        return {"error": f"{type(exc).__name__}: {said(exc)}"}


def _read_one(args: tuple[str, str]) -> dict:
    path, name = args
    return read_run(Path(path), name)


def collect(folder: Path, cached: bytes | None = None, jobs: int | None = None,
            on_progress=None) -> tuple[list[RunRecord], list[tuple[str, str]], bytes, str]:
    """(the runs, oldest first, one per content; [(file, why it was left out)]; the new cache; why the old
    cache was not used, "" when it was) of every results file under ``folder``. ``cached``: the bytes of
    an earlier build's cache (publish/cache.py; a file whose size and modification time are unchanged is
    not even hashed again)."""
    files = find_files(folder)
    if not files:
        raise UserError(f"{shown(folder)}: no results files (*.jsonl) in it")
    old_records, old_stats, bad_cache = cache.load(cached)
    stats, records, todo, names = {}, {}, [], []
    for path in files:
        name = path.relative_to(folder).as_posix()
        try:
            st = path.stat()
            known = old_stats.get(name)
            digest = known[2] if known and known[:2] == [st.st_size, st.st_mtime_ns] else file_digest(path)
        except FileProblem as exc:   # a FIFO or device (never blocked on), unreadable
            names.append((name, path, None, shown(exc.reason)))
            continue
        except OSError as exc:   # a link to nothing, gone since
            names.append((name, path, None, shown(f"cannot be read ({exc.strerror})")))
            continue
        stats[name] = [st.st_size, st.st_mtime_ns, digest]
        names.append((name, path, digest, ""))
        if digest in old_records:
            records[digest] = old_records[digest]
        elif digest not in records:
            records[digest] = None
            todo.append((str(path), name))
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    pool = None
    try:
        if jobs == 1 or len(todo) < 8:
            blobs = map(_read_one, todo)
        else:   # its workers leave Ctrl-C to this process and end with it (errors.ends_with_parent)
            with stops_held():   # the workers are forked here, by the first task
                pool = ProcessPoolExecutor(jobs, initializer=ends_with_parent)
                blobs = pool.map(_read_one, todo, chunksize=max(1, len(todo) // (jobs * 8)))
        for (_, name), blob in zip(todo, blobs):
            records[stats[name][2]] = blob
            if on_progress:
                on_progress(shown(name))
    finally:   # an interrupt (Ctrl-C, SIGTERM, SIGHUP) drops the files no worker has begun
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    runs: dict[str, RunRecord] = {}
    skipped = []
    for name, path, digest, why in names:
        why = why or records[digest].get("error", "")
        if why:
            skipped.append((shown(name), why))
        elif digest in runs:
            runs[digest].copies.append(shown(name))
        else:
            runs[digest] = RunRecord.of(digest, name, path, records[digest])
    return sorted(runs.values(), key=lambda r: (r.date, r.file)), skipped, cache.dump(records, stats), bad_cache
