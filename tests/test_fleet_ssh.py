"""`xpubench fleet` over SSH (issue 49 item 5), against Debian's OpenSSH server started here: ``sshd -D`` on
127.0.0.1 at a free port, with a host key and a client key the test makes, its authorized keys in tmp
(``StrictModes no``), stopped by its pid at the end. The remote side is this machine with this xpubench
(a ``python`` wrapper that puts this checkout first, as an install there would).

One fleet of five machines: the reachable one runs and its results come back over the session into
DIR/box.jsonl; a refused key, an unreachable port, a remote xpubench of another version and a remote Python
without xpubench are one line each, and the reachable machine goes on. Then ``--resume`` sends the results
so far and the plan, and the remote run finishes only the processes left."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import xpubench
from xpubench import cli

pytestmark = pytest.mark.slow
PROGRAMS = ("/usr/sbin/sshd", "ssh", "ssh-keygen")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _python(path: Path, src: Path, *flags: str) -> Path:
    """An interpreter for the remote side: this one, with ``src`` first on its path."""
    path.write_text(f"#!/bin/sh\nPYTHONPATH={src} XPUBENCH_HISTORY=off XDG_CACHE_HOME={path.parent / 'cache'} "
                    f"OMP_NUM_THREADS=1 exec {sys.executable} {' '.join(flags)} \"$@\"\n")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        pytest.skip(f"needs Debian's openssh-server and openssh-client ({', '.join(missing)} not found)")
    if os.geteuid() != 0:
        pytest.skip("the local sshd logs in as the user running it: run the tests as root (as CI does)")
    folder = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "client_key", "stranger_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)], check=True)
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    port = _free_port()
    (folder / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\nAuthorizedKeysFile "
        f"{folder / 'authorized_keys'}\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"UsePAM no\nPermitRootLogin prohibit-password\nPidFile {folder / 'sshd.pid'}\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)   # sshd's privilege separation folder (the service makes it)
    with open(folder / "sshd.log", "wb") as log:
        server = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(folder / "sshd_config")],
                                  stdout=log, stderr=log, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert server.poll() is None and time.monotonic() < deadline, (folder / "sshd.log").read_text()
            time.sleep(0.1)
        yield folder, port
    finally:
        server.terminate()
        server.wait(10)


def _ssh_args(folder: Path, port: int, key: str = "client_key") -> list[str]:
    return ["-p", str(port), "-i", str(folder / key), "-o", "StrictHostKeyChecking=no", "-o",
            "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]


def _machine(name: str, folder: Path, port: int, python: Path | None, key: str = "client_key") -> str:
    args = _ssh_args(folder, port, key)
    return (f'[[machine]]\nname = "{name}"\nssh = "root@127.0.0.1"\n'
            + (f'python = "{python}"\n' if python else "") + f"ssh_args = {json.dumps(args)}\n")


def test_a_fleet_over_ssh_and_its_failures_one_line_each(sshd, tmp_path, capsys):
    folder, port = sshd
    src = Path(xpubench.__file__).resolve().parents[1]
    other = tmp_path / "other" / "src"   # the same code reporting another version
    shutil.copytree(src / "xpubench", other / "xpubench", ignore=shutil.ignore_patterns("__pycache__"))
    (other / "xpubench" / "version.py").write_text('__version__ = "0.0.1-other"\n')
    python = _python(tmp_path / "python", src)
    closed = _free_port()   # nothing listens there
    (tmp_path / "fleet.toml").write_text(
        '[run]\nworkload = ["matmul"]\nbackend = ["numpy"]\nsize = [64]\nprocesses = 2\n\n'
        + _machine("box", folder, port, python)
        + _machine("refused", folder, port, python, key="stranger_key")
        + _machine("unreachable", folder, closed, python)
        + _machine("other-version", folder, port, _python(tmp_path / "python-other", other))
        + _machine("no-xpubench", folder, port, _python(tmp_path / "python-bare", src, "-S", "-E")))
    out = tmp_path / "out"
    code = cli.main(["fleet", str(tmp_path / "fleet.toml"), "-o", str(out), "--no-progress"])
    said = capsys.readouterr().out
    assert code == 1, said   # some machines failed, one finished
    assert "box: done (1/1 cases)" in said
    assert "refused: failed: ssh root@127.0.0.1: root@127.0.0.1: Permission denied (publickey)." in said
    assert f"unreachable: failed: ssh root@127.0.0.1: ssh: connect to host 127.0.0.1 port {closed}: Connection " \
           "refused" in said
    assert (f"other-version: failed: xpubench 0.0.1-other on {socket.gethostname()}, the fleet's is "
            f"{xpubench.__version__}: install the same version on both (docs/fleet.md)") in said
    assert "no-xpubench: failed: no xpubench with the fleet helper for" in said
    assert "No module named 'xpubench'" in said
    lines = (out / "box.jsonl").read_text().splitlines()
    assert len(lines) == 2   # one case, 2 processes, as the remote run appended them
    assert json.loads(lines[0])["fingerprint"]["fleet_machine"] == {
        "name": "box", "engine": "ssh", "settings": {"host": "root@127.0.0.1"}, "python": str(python),
        "ssh_args": _ssh_args(folder, port)}
    assert (out / "box.jsonl.plan.json").exists()
    assert sorted(p.name for p in out.glob("*.jsonl")) == ["box.jsonl"]   # a failed machine leaves no empty file

    (out / "box.jsonl").write_text(lines[0] + "\n")   # as if the session dropped after the first process
    code = cli.main(["fleet", "--resume", str(out), "--no-progress"])
    said = capsys.readouterr().out
    assert "box: done (1/1 cases)" in said
    resumed = (out / "box.jsonl").read_text().splitlines()
    assert resumed[0] == lines[0] and len(resumed) == 2 and json.loads(resumed[1])["process"] == 1

