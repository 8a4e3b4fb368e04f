"""What ends a command early, in one place: an error a user can cause (the CLI turns each into one line on
stderr and exit code 2), and a stop asked from outside -- Ctrl-C, SIGTERM, SIGHUP -- which every command
takes the one way Ctrl-C is taken (``stops_like_ctrl_c``: exit code 128 + the signal), while every child
xpubench starts ends with it (docs/robustness.md, "Stopping")."""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import threading
from collections.abc import Callable, Iterator

# Ctrl-C, kill / a batch scheduler, a closed terminal (Windows has no SIGHUP)
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class UserError(Exception):
    """Bad input from the user (flag, config, dataset file, result file): one clear line, exit 2."""


class DataUnavailable(UserError):
    """A dataset is not on disk and cannot be downloaded (offline, or checksum mismatch)."""


def warn_caller(message: str) -> None:
    """A Python warning (a notebook's way to hear one) attributed to the first line outside xpubench: the
    user's call, however deep in the library the warning arose (``xpubench.bench`` -> ``api.run`` ->
    ...), never a line of the library's own."""
    import os
    import sys
    import warnings

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 2        # stacklevel 2: warn_caller's caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, stacklevel=level)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP, raised where Python raises KeyboardInterrupt for Ctrl-C
    (``stops_like_ctrl_c``): every ``except KeyboardInterrupt`` and ``finally`` that stops a child or keeps a
    result runs for each."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def stop_signal(exc: BaseException) -> int:
    """The signal an interrupt came from (a plain KeyboardInterrupt: SIGINT). A command that stops on it
    exits with 128 + this, as a shell reports a process its signal ended: 130 Ctrl-C, 143 SIGTERM, 129
    SIGHUP."""
    return getattr(exc, "signum", int(signal.SIGINT))


def stopped_by(signum: int) -> str:
    """"Ctrl-C", "SIGTERM" or "SIGHUP": what interrupted, as a message says it."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def _drops_exceptions(frame) -> bool:
    """Whether an exception raised at ``frame`` would be printed and dropped instead of stopping the command:
    inside a garbage collector's callback (JAX registers one, run at every collection), a finaliser, or the
    unraisable hook ``_dropped`` (where the stop sent again can land while its sender starts)."""
    callbacks = {getattr(cb, "__code__", None) for cb in gc.callbacks} | {_dropped.__code__}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


_held: list[int] = []      # one entry per stops_held the main thread is in
_waiting: list[int] = []   # the stop that came meanwhile, raised when the last one ends
_again: dict = {}          # while a stop is sent again: its "signum" and the Event "taken" that ends it
_echo_until = [0.0]        # a stop sent again that crosses its own raise is dropped until this time


def _send_again(signum: int) -> None:
    """Send ``signum`` to the main thread again and again (10 ms, backing off to 1 s) until ``_interrupt``
    raises it: one send could land between the main thread's last check for signals and a blocking call
    (``time.sleep``, a socket wait), where nothing would take it until the call ends by itself."""
    if _again:
        return
    taken, main = threading.Event(), threading.main_thread().ident
    _again.update(signum=signum, taken=taken)

    def keep_sending() -> None:
        wait = 0.01
        while not taken.wait(wait):
            signal.pthread_kill(main, signum)
            wait = min(1.0, wait * 2)

    threading.Thread(target=keep_sending, name="xpubench-stop-again", daemon=True).start()


def _dropped(unraisable) -> None:
    """sys.unraisablehook while stops are taken: an Interrupted raised where Python prints and drops
    exceptions (a place ``_drops_exceptions`` did not know) is sent again, not lost."""
    if isinstance(unraisable.exc_value, Interrupted):
        _echo_until[0] = 0.0
        _send_again(unraisable.exc_value.signum)
    else:
        _earlier_hook[0](unraisable)


_earlier_hook = [sys.unraisablehook]


def _interrupt(signum, frame) -> None:
    """The handler ``stops_like_ctrl_c`` sets: Interrupted, raised where the main thread is. Unless the
    stops are held (``stops_held``): then it waits for their end; or unless an exception there would be
    dropped (``_drops_exceptions``, ``_dropped``): then the signal is sent again until it is taken outside.
    So a stop is never lost, and each one raises anew, as each Ctrl-C does."""
    import time

    if _held:
        _waiting[:] = _waiting or [signum]
        return
    if _drops_exceptions(frame):
        _send_again(signum)
        return
    if _again:                      # the stop being sent again is taken here
        _again.pop("taken").set()
        signum = _again.pop("signum")
        _echo_until[0] = time.monotonic() + 0.05
    elif time.monotonic() < _echo_until[0]:
        return                      # a send that crossed the raise: the same stop, already taken
    raise Interrupted(signum)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()   # the only one that may set a handler


@contextlib.contextmanager
def stops_like_ctrl_c() -> Iterator[None]:
    """Within it, Ctrl-C, SIGTERM and SIGHUP raise ``Interrupted`` in the main thread: a command unwinds
    the same way whichever of the three stopped it. A signal this process was started ignoring stays
    ignored (``nohup xpubench run ...`` goes on when the terminal closes; Python leaves an ignored SIGINT
    ignored too). The earlier handlers come back on leaving; outside the main thread nothing changes."""
    if not _main_thread():
        yield
        return
    earlier = {s: signal.signal(s, _interrupt) for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    hook = sys.unraisablehook
    if hook is not _dropped:      # not already within one
        _earlier_hook[0], sys.unraisablehook = hook, _dropped
    try:
        yield
    finally:
        if hook is not _dropped:
            sys.unraisablehook = hook
            if _again:            # nothing is left sending once the handlers are gone
                _again.pop("taken").set()
                _again.clear()
        for s, handler in earlier.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)


@contextlib.contextmanager
def stops_cancel(cancel: Callable[[], object]) -> Iterator[None]:
    """Within it, a stop that ``stops_like_ctrl_c`` would raise calls ``cancel`` instead, and Interrupted is
    raised on leaving: an asyncio loop's work is cancelled inside the loop, its connections closed (raised
    wherever the signal lands, the exception could leave them half-closed), as asyncio.run takes a plain
    Ctrl-C."""
    taken = [s for s in STOP_SIGNALS if signal.getsignal(s) is _interrupt] if _main_thread() else []
    got: list[int] = []

    def take(signum, frame) -> None:
        got.append(signum)
        cancel()

    for s in taken:
        signal.signal(s, take)
    try:
        yield
    except BaseException:   # the cancellation ``cancel`` caused, or another end
        if not got:
            raise
    finally:
        for s in taken:
            signal.signal(s, _interrupt)
    if got:
        raise Interrupted(got[0])


def _prctl():
    """libc's prctl on Linux, else None; looked up once, on import, so a child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()
PR_SET_PDEATHSIG = 1


def ends_with_parent() -> None:
    """What a child runs first (Popen's ``preexec_fn``, a process pool's ``initializer``) so that it ends
    with the process that started it, even one killed outright (SIGKILL, a crash): the kernel then sends it
    SIGKILL (Linux's PR_SET_PDEATHSIG, which fires when the starting *thread* ends: start such children
    from the main thread; elsewhere only the parent's own stop ends it). Ctrl-C is left to the parent,
    which stops the child (SIGINT ignored, so a terminal's Ctrl-C to the whole group does not break a pool
    mid-task); SIGTERM and SIGHUP end it (a pool ends a broken worker with SIGTERM). The three are then let
    through (``stops_held``). For the children that cannot notice their parent's end themselves: a
    worker watches its parent (launch/worker.py), a fork server reads its runner's pipe."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN if s == signal.SIGINT else signal.SIG_DFL)
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP held back while within (in the main thread, where they are taken), and
    raised on leaving: a step that must not be cut half-way (stopping a child, starting one so that it is
    known to be stopped) runs whole. A child forked within starts with them blocked, until
    ``ends_with_parent`` has said what they do there (one sent to the whole group as the child starts
    would otherwise meet the parent's handler in it)."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS) if hasattr(signal, "pthread_sigmask") else None
    main = _main_thread()
    if main:
        _held.append(1)
    try:
        yield
    finally:
        if main:
            _held.pop()
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if main and not _held and _waiting:
            raise Interrupted(_waiting.pop())
