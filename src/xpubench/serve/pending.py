"""What an event loop still waits for, in one line: serve/sweep.py records it when a point's time limit cuts
the point, so a point that overran names its cause (a request held in httpx's pool, a reading of the server's
metrics, a future nobody resolves) in its results line instead of leaving a worker to be inspected.

Each pending task reads as its coroutine, where it waits (the innermost frame of its chain of awaits, and the
innermost in xpubench where that is elsewhere) and what it awaits there; alike tasks are counted. A task that
only waits for other tasks (a gather of them) is left out: those are named."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import PurePath


def _where(frame) -> str:
    parts = PurePath(frame.f_code.co_filename).parts
    inside = len(parts) - parts[::-1].index("xpubench") if "xpubench" in parts else len(parts) - 2
    return f"{'/'.join(parts[inside:])}:{frame.f_lineno} {frame.f_code.co_name}"


def _awaits(coro) -> tuple[list, object]:
    """The frames of a coroutine's chain of awaits, outermost first, and what the innermost awaits."""
    frames = []
    while True:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            return frames, coro
        frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None) or getattr(coro, "gi_yieldfrom", None)


def described(tasks) -> str:
    """``tasks`` (pending asyncio tasks) as one line: "2 x _closed.user at serve/client.py:86 _stream <-
    httpcore/_async/connection_pool.py:216 handle_async_request (awaits Future)"; "none" when none waits."""
    seen: Counter[str] = Counter()
    for task in tasks:
        coro = task.get_coro()
        frames, awaited = _awaits(coro)
        awaited = getattr(task, "_fut_waiter", None) or awaited   # the future itself, not its iterator
        if not frames or isinstance(awaited, asyncio.Task) or hasattr(awaited, "_children"):   # a gather
            continue
        ours = [f for f in frames if "xpubench" in PurePath(f.f_code.co_filename).parts]
        where = _where(frames[-1])
        if ours and ours[-1] is not frames[-1]:
            where = f"{_where(ours[-1])} <- {where}"
        name = coro.__qualname__.replace("<locals>.", "")
        seen[f"{name} at {where} (awaits {type(awaited).__name__})"] += 1
    return "; ".join(f"{n} x {what}" for what, n in seen.most_common()) or "none"
