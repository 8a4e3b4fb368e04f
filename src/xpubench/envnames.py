"""xpubench's own environment variables, named in one place. (The variables of other tools that change
results -- OMP_NUM_THREADS, XLA_FLAGS, CUDA_VISIBLE_DEVICES, ... -- are devices/envvars.py's.)"""

import os
from collections.abc import Mapping
from pathlib import Path

MEMORY_LIMIT = "XPUBENCH_MEMORY_LIMIT"      # runner -> worker: bytes of address space (RLIMIT_AS), CPU cases
PARENT_PID = "XPUBENCH_PARENT_PID"          # runner -> worker: when that process dies, the worker kills itself
SCRATCH = "XPUBENCH_SCRATCH"                # worker: its private folder (fresh compilation caches live there)
SERVER = "XPUBENCH_SERVER"                  # runner -> a serve point's worker: the server's description (a file)
SERVER_HEADERS = "XPUBENCH_SERVER_HEADERS"  # ... and the credentials its requests carry (JSON; stored nowhere)
COORDINATOR = "XPUBENCH_COORDINATOR"        # several processes: process 0's HOST:PORT (launch/launchers/,
NUM_PROCESSES = "XPUBENCH_NUM_PROCESSES"    # ... how many processes               user or launcher -> worker:
PROCESS_ID = "XPUBENCH_PROCESS_ID"          # ... this process's id                backends/world.py reads them)
HOSTS = "XPUBENCH_HOSTS"                    # launcher -> worker: the machines the processes sit on
DATA_DIR = "XPUBENCH_DATA_DIR"              # user: where --data real looks without --data-dir
WEIGHTS_DIR = "XPUBENCH_WEIGHTS_DIR"        # user: the trained-weights cache ("off" disables it)
LLAMACPP_DIR = "XPUBENCH_LLAMACPP_DIR"      # user: a folder with llama.cpp's llama-bench (backends/llamacpp_)
HISTORY = "XPUBENCH_HISTORY"                # user: the timing history estimates learn from ("off": none)
LAUNCH = "XPUBENCH_LAUNCH"                  # user: how workers start: forkserver or spawn (launch/forkserver.py)
FLEET_MACHINE = "XPUBENCH_FLEET_MACHINE"    # fleet -> run: the [[machine]] entry (JSON), recorded in the fingerprint
REFRESH = "XPUBENCH_REFRESH"                # user or --refresh ("1"): measure the reference figures again (the CPU
#                                             clock, a run's brief bandwidth) instead of reading them from the cache


def cache_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """Where xpubench keeps what it measured or built between runs: ``$XDG_CACHE_HOME/xpubench``
    (``~/.cache/xpubench`` when XDG_CACHE_HOME is unset)."""
    return Path(environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "xpubench"


def refresh_asked(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(REFRESH, "") not in ("", "0")
