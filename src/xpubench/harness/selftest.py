"""Deliberate faults, to check that isolation works on a machine: `xpubench run --workload selftest`.

``case.options["behaviour"]`` picks one: ok, raise, segfault, hang, oom (allocates until the memory
limit stops it), exit (exits with a code), sleep (sleeps ``seconds`` then succeeds).
"""

from __future__ import annotations

import ctypes
import os
import time

from xpubench.harness.outcome import Outcome


def run(case) -> Outcome:
    behaviour = case.options.get("behaviour", "ok")
    if behaviour == "raise":
        raise RuntimeError("selftest: deliberate exception")
    if behaviour == "segfault":
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    if behaviour == "hang":
        while True:
            time.sleep(1)
    if behaviour == "oom":
        hog = []
        while True:
            hog.append(bytearray(256 << 20))
            for i in range(0, len(hog[-1]), 4096):  # touch every page so the memory is really used
                hog[-1][i] = 1
    if behaviour == "exit":
        os._exit(int(case.options.get("code", 3)))
    if behaviour == "sleep":
        time.sleep(float(case.options.get("seconds", 0.1)))
    return Outcome(metrics={"behaviour": behaviour}, placement="cpu")
