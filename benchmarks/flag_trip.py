"""A flag's trip: the source files of xpubench a value given on the command line crosses, from the
command line to the JSON line and on to the summary table (issue 53 item 2).

How it counts (reproducible, the same for any tree): the command runs for real (one case, one process),
with a profile hook in every Python process it starts (the CLI, the fork server, the worker: a
``sitecustomize`` on PYTHONPATH). For each function of ``src/xpubench`` that runs, the hook looks at its
arguments when it is called and at its locals and return value when it returns, and into what they hold
(lists, dicts, dataclasses such as the Case, a pandas frame), three levels deep, for the flag's value:

- **carried**: the function held the value (as a number or string, or inside a request, a case, a
  record, a frame);
- **handled**: it held the value *and* its own code names it (a variable, an argument, an attribute, a
  keyword or a dict key spelled ``batch_size``, ``batch_sizes``, ``global_batch``... for
  ``--batch-size``; ``decode``, ``decode_steps``, ``decode_variant`` for ``--decode``; a method call of
  the same name, ``text.decode()``, is not the value): where a default could be decided again.

A file is on the trip when one of its functions carried (handled) the value; "to the JSON line" counts
what ran before the first result line was appended (``results/store.py append``), "to the summary table"
everything until the command ended. ``--batch-size`` runs twice, with 37 and 41, and a function counts
only when it held each run's own value (a 37 that is something else is not counted). Module and class
bodies (run at import: a field, a default, an option row) are not counted.

    python benchmarks/flag_trip.py [--src src] [--flag batch-size|decode] [--functions] [--json]

Nothing is timed; the two flags take about a minute on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

NAMES = {
    "batch-size": ("batch_size", "batch_sizes", "global_batch", "per_device_batch", "quick_batch_size",
                   "generation_batch_sizes"),
    "decode": ("decode", "decode_steps", "decode_variant", "DECODE_STEPS"),
}
VALUES = {"batch-size": (37, 41), "decode": ("eager",)}   # values seldom met otherwise
COMMANDS = {   # a real tiny run of each: one case, one process
    "batch-size": ["run", "-w", "mnist_cnn", "-b", "torch", "--batch-size", "{}", "--epochs", "1", "--steps",
                   "2", "--train-samples", "128", "--eval-samples", "64", "--processes", "1"],
    "decode": ["run", "-w", "llama", "-b", "torch", "--decode", "{}", "--quick", "--processes", "1"],
}
MARK = "results/store.py:append"   # the JSON line is written here
SITE_HOOK = "sitecustomize"        # the module every Python process imports at start-up (site)

HOOK = r'''
import dis, os, sys, threading, time, types
_root = os.environ["FLAG_TRIP_ROOT"]
_names = frozenset(os.environ["FLAG_TRIP_NAMES"].split(","))
_value = os.environ["FLAG_TRIP_VALUE"]
_value = int(_value) if _value.isdigit() else _value
_log = os.environ["FLAG_TRIP_LOG"]
_mark = os.environ["FLAG_TRIP_MARK"]
_said = set()
_SKIP = (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.CodeType,
         types.FrameType)
_READS = {"LOAD_ATTR", "STORE_ATTR", "LOAD_NAME", "STORE_NAME", "LOAD_FAST", "STORE_FAST", "LOAD_GLOBAL",
          "STORE_GLOBAL", "LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE", "DELETE_FAST", "DELETE_NAME"}


def _names_it(code):
    if _names.intersection(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]):
        return True
    for ins in dis.get_instructions(code):
        if ins.opname in _READS and ins.argval in _names:
            return True
        if ins.opname in ("LOAD_CONST", "KW_NAMES"):
            values = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
            if any(isinstance(v, str) and v in _names for v in values):
                return True
    return False


def _holds(obj, depth, seen):
    if type(obj) is type(_value):
        return obj == _value
    if obj is None or isinstance(obj, (int, float, str, bytes, bool, complex, _SKIP)) or depth == 0:
        return False
    if id(obj) in seen or len(seen) > 400:
        return False
    seen.add(id(obj))
    if isinstance(obj, (list, tuple, set, frozenset)):
        return any(_holds(o, depth - 1, seen) for o in list(obj)[:64])
    if isinstance(obj, dict):
        return any(_holds(o, depth - 1, seen) for o in list(obj.values())[:64])
    if type(obj).__module__.startswith("pandas") and hasattr(obj, "isin"):
        return bool(obj.isin([_value]).to_numpy().any())
    fields = getattr(obj, "__dict__", None)
    if isinstance(fields, dict):
        return any(_holds(o, depth - 1, seen) for o in list(fields.values())[:64])
    slots = [s for k in type(obj).__mro__ for s in getattr(k, "__slots__", ())]
    return any(_holds(getattr(obj, s, None), depth - 1, seen) for s in slots[:64])


def _say(kind, where, code):
    if (kind, code) in _said:
        return
    _said.add((kind, code))
    line = f"{time.monotonic():.6f}\t{kind}\t{where}\t{code.co_qualname}\n"
    fd = os.open(_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _profile(frame, event, arg):
    if event not in ("call", "return"):
        return
    code = frame.f_code
    if not code.co_filename.startswith(_root) or ("holds", code) in _said:
        return
    where = code.co_filename[len(_root):].lstrip("/")
    if not code.co_flags & 0x2:   # a module's or a class's body (no CO_NEWLOCALS): run at import
        return
    try:
        found = _holds(dict(frame.f_locals), 4, set()) or (event == "return" and _holds(arg, 3, set()))
    except Exception:
        found = False
    if found:
        _say("holds", where, code)
        if _names_it(code):
            _say("names", where, code)
    if event == "call" and f"{where}:{code.co_name}" == _mark:   # after: the line's writer is on its trip
        _say("mark", where, code)


sys.setprofile(_profile)
threading.setprofile(_profile)
'''


def _run(flag: str, value, src: Path) -> list[list[str]]:
    """The hook's lines of one run of the flag's command with ``value``: [time, kind, file, function]."""
    with tempfile.TemporaryDirectory(prefix="flag-trip-") as tmp:
        Path(tmp, f"{SITE_HOOK}.py").write_text(HOOK)
        log, out = Path(tmp, "log"), Path(tmp, "results.jsonl")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, str(src.resolve())]),
               "FLAG_TRIP_ROOT": str((src / "xpubench").resolve()), "FLAG_TRIP_NAMES": ",".join(NAMES[flag]),
               "FLAG_TRIP_VALUE": str(value), "FLAG_TRIP_LOG": str(log), "FLAG_TRIP_MARK": MARK}
        command = [sys.executable, "-m", "xpubench", *(a.replace("{}", str(value)) for a in COMMANDS[flag]),
                   "-o", str(out), "--no-progress"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0 or not out.exists():
            raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        return [line.split("\t") for line in log.read_text().splitlines()]


def trip(flag: str, src: Path) -> dict:
    """{"command", "carried": {"json_line": files, "table": files}, "handled": {...}, "functions": {file:
    [function (carried|handled)]}} of one flag, over one run per value in VALUES."""
    runs = [_run(flag, value, src) for value in VALUES[flag]]
    found: dict[tuple, float] = {}   # (kind, file, function) -> when, in every run (the first run's time)
    keys = [{(r[1], r[2], r[3]) for r in rows} for rows in runs]
    common = set.intersection(*keys)
    written = min((float(r[0]) for r in runs[0] if r[1] == "mark"), default=float("inf"))
    for r in runs[0]:
        if (r[1], r[2], r[3]) in common and r[1] != "mark":
            found.setdefault((r[1], r[2], r[3]), float(r[0]))
    out = {"command": ["xpubench", *(a.replace("{}", str(VALUES[flag][0])) for a in COMMANDS[flag])]}
    for kind, label in (("holds", "carried"), ("names", "handled")):
        hits = {k: t for k, t in found.items() if k[0] == kind}
        out[label] = {"json_line": sorted({f for (_, f, _), t in hits.items() if t <= written}),
                      "table": sorted({f for _, f, _ in hits})}
    functions: dict[str, list] = {}
    for _, f, q in sorted(k for k in found if k[0] == "holds"):
        functions.setdefault(f, []).append(q + (" (handled)" if ("names", f, q) in found else ""))
    out["functions"] = functions
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default=str(Path(__file__).resolve().parent.parent / "src"),
                        help="the source tree whose xpubench runs (default: this checkout's src)")
    parser.add_argument("--flag", choices=tuple(NAMES), action="append", help="default: both")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the lists")
    parser.add_argument("--functions", action="store_true", help="the functions too, per file")
    args = parser.parse_args()
    found = {flag: trip(flag, Path(args.src)) for flag in args.flag or NAMES}
    if args.json:
        print(json.dumps(found, indent=1))
        return
    for flag, t in found.items():
        c, h = t["carried"], t["handled"]
        print(f"--{flag} ({' '.join(t['command'])}):\n  carried by {len(c['json_line'])} files to the JSON line, "
              f"{len(c['table'])} to the summary table; handled by name in {len(h['json_line'])} and "
              f"{len(h['table'])}")
        for name in c["table"]:
            where = "JSON line" if name in c["json_line"] else "table    "
            print(f"  {where}  {'handled' if name in h['table'] else '       '}  {name}")
            if args.functions:
                print("".join(f"      {q}\n" for q in t["functions"][name]), end="")


if __name__ == "__main__":
    main()
