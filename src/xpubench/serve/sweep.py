"""One sweep point under load: closed loop (N users, each sending its next request when its answer ended)
or open loop (Poisson arrivals at a rate, whatever is in flight, up to a cap), after warm-up requests
whose samples are discarded.

A point sends ``requests`` measured requests, or fewer where ``duration_s`` runs out first (no new
request starts after it; those in flight finish). Its time limit ``point_timeout_s`` cancels whatever is
still in flight then: those requests count as timeouts with that reason, and ``cut`` says what each task
of the point was still waiting for (serve/pending.py; the point's warning). ``samples`` is filled as each
request ends, so a Ctrl-C, SIGTERM or SIGHUP keeps every request finished by then.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from xpubench.errors import stop_signal, stops_cancel
from xpubench.serve.bounded import HEADERS
from xpubench.serve.client import send
from xpubench.serve.pending import described
from xpubench.serve.sample import Sample


@dataclass(frozen=True)
class Load:
    """What one point asks of the server."""

    concurrency: int                 # closed loop: users; open loop: the cap on requests in flight
    rate: float | None = None        # open loop: requests/s (Poisson); None: closed loop
    requests: int = 32
    warmup: int = 1
    duration_s: float | None = None
    request_timeout_s: float = 120.0
    point_timeout_s: float = 600.0
    seed: int = 0

    @property
    def label(self) -> str:
        return "closed loop" if self.rate is None else "poisson"


@dataclass
class PointRun:
    """What a point measured: the measured requests' samples and the window they span."""

    load: Load
    samples: list[Sample] = field(default_factory=list)
    warmup_samples: list[Sample] = field(default_factory=list)
    window_s: float | None = None
    interrupted: int | None = None   # the signal that cut it: Ctrl-C's SIGINT, SIGTERM or SIGHUP
    in_flight: int = 0
    cut: str | None = None           # the point's time limit cut it: what its tasks were waiting for then
    on_request: Callable[[int], None] | None = None    # told the measured requests ended so far

    async def send(self, client, url: str, body: dict, clock0: float) -> None:
        """One measured request; while it runs it is counted in flight (a cut point makes it a timeout)."""
        self.in_flight += 1
        sample = await send(client, url, body, self.load.request_timeout_s, clock0)
        self.in_flight -= 1
        self.samples.append(sample)
        if self.on_request:
            self.on_request(len(self.samples))

    def close_window(self) -> None:
        ends = [s.start + (s.e2e_s or 0.0) for s in self.samples if s.e2e_s is not None]
        if self.samples and ends:
            self.window_s = max(ends) - min(s.start for s in self.samples)


async def _closed(client, url: str, bodies: list[dict], load: Load, run: PointRun, clock0: float) -> None:
    queue = iter(range(len(bodies)))
    deadline = None if load.duration_s is None else time.perf_counter() + load.duration_s

    async def user() -> None:
        for i in queue:
            if deadline is not None and time.perf_counter() >= deadline:
                return
            await run.send(client, url, bodies[i], clock0)

    await asyncio.gather(*(user() for _ in range(load.concurrency)))


async def _open(client, url: str, bodies: list[dict], load: Load, run: PointRun, clock0: float) -> None:
    rng = random.Random(load.seed)
    cap = asyncio.Semaphore(load.concurrency)
    start = time.perf_counter()
    tasks = []

    async def one(i: int) -> None:
        async with cap:
            await run.send(client, url, bodies[i], clock0)

    at = 0.0
    for i in range(len(bodies)):
        if load.duration_s is not None and at >= load.duration_s:
            break
        delay = start + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
        at += rng.expovariate(load.rate)
    await asyncio.gather(*tasks)


async def _point(url: str, warm: list[dict], bodies: list[dict], load: Load, run: PointRun,
                 headers: dict[str, str], watch=None) -> None:
    limits = httpx.Limits(max_connections=load.concurrency + 4, max_keepalive_connections=load.concurrency + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(load.request_timeout_s), limits=limits,
                                 headers={**HEADERS, **headers}) as client:
        clock0 = time.perf_counter()
        for i in range(0, len(warm), load.concurrency):   # warm-up: discarded, concurrency at a time
            batch = warm[i:i + load.concurrency]
            run.warmup_samples += await asyncio.gather(*(send(client, url, b, load.request_timeout_s, clock0)
                                                         for b in batch))
        if watch is not None:   # the server's metrics (serve/telemetry.py), as the window opens and within it
            await watch.read(client)
        clock0 = time.perf_counter()
        loop = _closed if load.rate is None else _open
        task = asyncio.ensure_future(loop(client, url, bodies, load, run, clock0))
        reading = asyncio.ensure_future(watch.during(client, task)) if watch is not None else None
        try:
            done, _ = await asyncio.wait({task}, timeout=load.point_timeout_s)
            if not done:   # named before they are cancelled
                run.cut = (f"cut by the point's time limit ({load.point_timeout_s:g} s) with "
                           f"{run.in_flight} requests in flight; waiting then: "
                           f"{described(asyncio.all_tasks() - {asyncio.current_task()})}")
        finally:   # the point's time limit, or the point cancelled (a stop): its requests end here, in the loop
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            if reading is not None:
                reading.cancel()
                await asyncio.gather(reading, return_exceptions=True)
        if watch is not None:
            await watch.read(client)
        if not done:
            _cut(run, f"cut by the point's time limit ({load.point_timeout_s:g} s)")
        else:
            task.result()


def _cut(run: PointRun, reason: str) -> None:
    """Requests in flight when the point ended early: failures with that reason (none is dropped)."""
    for _ in range(run.in_flight):
        run.samples.append(Sample(start=run.load.point_timeout_s, error=reason, timed_out=True))
    run.in_flight = 0


def measure(url: str, warm: list[dict], bodies: list[dict], load: Load,
            headers: dict[str, str] | None = None, on_request: Callable[[int], None] | None = None,
            watch=None) -> PointRun:
    """Run one point (``headers``: sent with each request, the credentials; ``watch``: a telemetry.Watch that
    reads the server's metrics over the measured window); a Ctrl-C, SIGTERM or SIGHUP
    (errors.stops_like_ctrl_c) returns what was measured with ``interrupted`` set."""
    run = PointRun(load, on_request=on_request)
    try:
        asyncio.run(_stoppable(_point(url, warm, bodies, load, run, headers or {}, watch)))
    except KeyboardInterrupt as exc:    # the requests in flight then (``in_flight``) were not measured
        run.interrupted = stop_signal(exc)
    run.close_window()
    return run


async def _stoppable(work) -> None:
    """``work`` as a task that Ctrl-C (asyncio.run's own way), SIGTERM and SIGHUP (errors.stops_cancel)
    cancel, so its requests end inside the loop before the stop goes on."""
    task, loop = asyncio.ensure_future(work), asyncio.get_running_loop()

    def cancel() -> None:
        task.cancel()
        loop.call_soon_threadsafe(lambda: None)   # wakes the loop from its wait, as asyncio.run does on Ctrl-C

    with stops_cancel(cancel):
        await task
