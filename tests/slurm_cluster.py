"""A one-node Slurm on 127.0.0.1 from Debian's ``slurm-wlm`` and ``munge`` packages, for the tests of
``xpubench fleet`` (and of runs started by ``srun``).

A private munged (its own key, socket and seed in the cluster's folder) and a slurmctld and slurmd whose
``slurm.conf`` lives there too (``SLURM_CONF``): nothing of the machine's own Slurm or munge is read or
touched, and every daemon is a child started in the foreground, stopped by its own process id. It starts
in about 3 s (``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``: no cgroups needed, so it
runs in a container). No accounting (``sacct`` says it is disabled): a finished job's state is read from
``scontrol show job`` for ``MinJobAge`` seconds.

- ``cluster()``, a context manager: the run's one cluster, shared by the test processes (xdist's
  workers) through ``conftest.session_dir()`` (which names its folder): the first to ask starts it (under
  ``session_lock``), each user is counted, and the last to leave stops it and removes its folder.
  ``stop_left(session_dir())`` (conftest's ``pytest_unconfigure``) stops whatever a crashed worker left.
- ``missing()``: why there can be no cluster here (a package absent, not root), or None.
- ``python tests/slurm_cluster.py DIR`` starts one in DIR and waits (Ctrl-C or SIGTERM stops it):
  ``SLURM_CONF=DIR/slurm.conf`` then reaches it from another shell (scripts/fleet_slurm_demo.sh uses it).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo", "srun")
PARTITIONS = ("debug", "batch")   # the first is the default
CPUS = 2
START_S = 60


@dataclass
class Cluster:
    folder: Path
    partitions: tuple[str, ...] = PARTITIONS

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    def environ(self) -> dict[str, str]:
        """What a command needs to reach this cluster: its SLURM_CONF."""
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, **self.environ()})

    def queue(self) -> list[str]:
        """The job ids squeue lists (every job of this cluster)."""
        return self.run("squeue", "-h", "-o", "%i").stdout.split()

    def cancel_all(self) -> None:
        """Cancel every job of this cluster (its own, private controller) and wait for the queue to empty."""
        self.run("scancel", "--user", str(os.getuid()))
        deadline = time.monotonic() + 30
        while self.queue() and time.monotonic() < deadline:
            time.sleep(0.5)


def missing() -> str | None:
    """Why this machine cannot run the cluster, or None."""
    absent = [p for p in PROGRAMS if shutil.which(p) is None and not Path("/usr/sbin", p).exists()]
    if absent:
        return (f"needs Debian's slurm-wlm and munge packages ({', '.join(absent)} not found; "
                "`scripts/setup.sh test` installs them)")
    if os.geteuid() != 0:
        return "the one-node Slurm runs its daemons as root (SlurmUser=root): run the tests as root (as CI does)"
    return None


def _program(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _conf(folder: Path) -> str:
    host = socket.gethostname()
    lines = [
        "ClusterName=xpb", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}", "AuthType=auth/munge", f"AuthInfo=socket={folder}/munge.socket",
        "CredType=cred/munge", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core", f"StateSaveLocation={folder}/state",
        f"SlurmdSpoolDir={folder}/spool", f"SlurmctldPidFile={folder}/slurmctld.pid",
        f"SlurmdPidFile={folder}/slurmd.pid", "SlurmUser=root", "SlurmdUser=root", "ReturnToService=2",
        "MpiDefault=none", "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
        "MinJobAge=300", "KillWait=5", "InactiveLimit=0", "SchedulerType=sched/backfill",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={CPUS} RealMemory=4000 State=UNKNOWN",
    ]
    for i, name in enumerate(PARTITIONS):
        lines.append(f"PartitionName={name} Nodes={host} MaxTime=INFINITE State=UP Default={'YES' if i == 0 else 'NO'}")
    return "\n".join(lines) + "\n"


def _start_daemons(folder: Path) -> list[int]:
    """munged, slurmctld and slurmd in the foreground, as children of this process in sessions of their own
    (a test's Ctrl-C never reaches them); their pids, in the order to stop them (last first)."""
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)   # munged wants its socket's folder open to all, its key's closed
    (folder / "key").mkdir(mode=0o700, exist_ok=True)
    key = folder / "key" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    (folder / "slurm.conf").write_text(_conf(folder))
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    commands = [
        [_program("munged"), "-F", f"--key-file={key}", f"--socket={folder}/munge.socket",
         f"--pid-file={folder}/munged.pid", f"--seed-file={folder}/key/munged.seed"],
        [_program("slurmctld"), "-D", "-i"],
        [_program("slurmd"), "-D"],
    ]
    pids: list[int] = []
    try:
        for argv in commands:
            with open(folder / f"{Path(argv[0]).name}.log", "ab") as log:
                pids.append(subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                             start_new_session=True).pid)
            if argv[0].endswith("munged"):
                _wait(lambda: (folder / "munge.socket").exists(), 10, "munged's socket", folder)
    except BaseException:
        for pid in reversed(pids):
            _end(pid)
        raise
    return pids


def _wait(ready, seconds: float, what: str, folder: Path) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            logs = "; ".join(f"{p.name}: {p.read_text(errors='replace')[-400:]}" for p in sorted(folder.glob("*.log")))
            raise RuntimeError(f"the one-node Slurm did not start ({what} not ready in {seconds:g} s); {logs}")
        time.sleep(0.2)


def start(folder: Path) -> Cluster:
    """Start a cluster in ``folder`` (made if need be) and wait for its node to be idle."""
    folder.mkdir(parents=True, exist_ok=True)
    pids = _start_daemons(folder)
    (folder / "pids.json").write_text(json.dumps(pids))
    cluster = Cluster(folder)
    try:
        _wait(lambda: cluster.run("sinfo", "-h", "-o", "%t", timeout=10).stdout.split()[:1] == ["idle"], START_S,
              "the node", folder)
    except Exception:
        stop(folder)
        raise
    return cluster


def stop(folder: Path) -> None:
    """Cancel the cluster's jobs, then stop its daemons by their pids (slurmd, slurmctld, munged); nothing is left."""
    pids_file = folder / "pids.json"
    if not pids_file.exists():
        return
    pids = json.loads(pids_file.read_text())
    if len(pids) == 3 and _alive(pids[1]):
        with contextlib.suppress(Exception):
            Cluster(folder).cancel_all()
    for pid in reversed(pids):
        _end(pid)
    pids_file.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError, OSError):   # our child: reap a zombie
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
    return True


def _end(pid: int) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        if not _alive(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)


def _users(folder: Path, change: int) -> int:
    path = folder / "users"
    count = (int(path.read_text()) if path.exists() else 0) + change
    path.write_text(str(count))
    return count


def _folder(session: Path, make: bool) -> Path | None:
    """The cluster's folder, named in the session's ``slurm.folder``: in the temporary folder, not under the
    session's (munged refuses a socket below a folder that not everyone may enter)."""
    record = session / "slurm.folder"
    if record.exists():
        return Path(record.read_text())
    if not make:
        return None
    folder = Path(tempfile.mkdtemp(prefix="xpubench-slurm-"))
    record.write_text(str(folder))
    return folder


@contextlib.contextmanager
def cluster():
    """The test run's one-node Slurm (module docstring); pytest.skip with the reason where there can be none."""
    import pytest
    from conftest import session_dir, session_lock

    why = missing()
    if why:
        pytest.skip(why)
    with session_lock("slurm"):
        folder = _folder(session_dir(), make=True)
        if not (folder / "pids.json").exists():
            start(folder)
        _users(folder, +1)
    try:
        yield Cluster(folder)
    finally:
        with session_lock("slurm"):
            if _users(folder, -1) <= 0:
                stop_left(session_dir())


def stop_left(session: Path) -> None:
    """Stop the session's cluster (also one a crashed test process left running) and remove its folder."""
    folder = _folder(session, make=False)
    if folder is not None:
        stop(folder)
        shutil.rmtree(folder, ignore_errors=True)
        (session / "slurm.folder").unlink(missing_ok=True)


if __name__ == "__main__":
    where = Path(sys.argv[1] if len(sys.argv) > 1 else "slurm-cluster").resolve()
    if missing():
        sys.exit(missing())
    started = start(where)
    print(f"export SLURM_CONF={started.conf}   # Ctrl-C (or SIGTERM) stops the cluster", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # a script's background job ignores SIGINT
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        stop(where)
