"""How a run on another machine comes back over one channel (an ssh session's stdout, a pod's log, a
SkyPilot job's log): fleet/remote.py writes one message a line, ``XPUBENCH-FLEET {json}``, and the fleet
reads them into DIR. The mark lets a message be found in a log that prefixes its lines (``kubectl logs
--prefix``, SkyPilot's ``(task, pid=...)``) or mixes in other output; anything else is not a message.

| message | what |
|---|---|
| ``{"hello": VERSION}`` | the helper started, with its xpubench version |
| ``{"error": TEXT}`` | it could not run (another xpubench version): one line, nothing measured |
| ``{"plan": TEXT}`` | the run's plan sidecar (DIR/<name>.jsonl.plan.json) |
| ``{"line": TEXT}`` | one line of the results file, complete, as the run appended it |
| ``{"exit": CODE}`` | the run ended with this exit code |
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from xpubench.fleet.folder import plan_of

MARK = "XPUBENCH-FLEET "


def message(**fields) -> str:
    return MARK + json.dumps(fields, ensure_ascii=True) + "\n"


def messages(lines: Iterable[str]) -> Iterator[dict]:
    for line in lines:
        at = line.find(MARK)
        if at < 0:
            continue
        try:
            blob = json.loads(line[at + len(MARK):])
        except ValueError:
            continue   # a message cut off (the connection dropped mid-line)
        if isinstance(blob, dict):
            yield blob


@dataclass
class Received:
    """What came back of one machine's run."""

    hello: str | None = None
    error: str | None = None
    exit_code: int | None = None
    lines: int = 0


def receive(blobs: Iterable[dict], results: Path) -> Received:
    """Write the messages into ``results`` (each line appended and fsynced as it arrives) and its plan."""
    from xpubench.results.store import write_atomically

    got = Received()
    for blob in blobs:
        if "hello" in blob:
            got.hello = str(blob["hello"])
        elif "error" in blob:
            got.error = str(blob["error"])
        elif "plan" in blob and isinstance(blob["plan"], str):
            write_atomically(plan_of(results), blob["plan"].encode("utf-8", "surrogateescape"))
        elif "line" in blob and isinstance(blob["line"], str):
            append_line(results, blob["line"])
            got.lines += 1
        elif "exit" in blob and isinstance(blob["exit"], int):
            got.exit_code = blob["exit"]
    return got


def append_line(path: Path, line: str) -> None:
    with open(path, "ab") as fh:
        fh.write(line.rstrip("\n").encode("utf-8", "surrogateescape") + b"\n")
        fh.flush()
        os.fsync(fh.fileno())
