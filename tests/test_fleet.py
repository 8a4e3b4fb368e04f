"""`xpubench fleet` without a cluster (issue 49): a bad fleet file or folder is one line and exit 2 with nothing
written or submitted; the fleet's folder read by `report` and `compare`; the summary and the answer with a
column per machine; the machine entry in the fingerprint; what comes back over a channel (ssh, a pod's log)
read into DIR by `--collect`; Slurm's answers (squeue, sacct, scontrol) read into a machine's state.

The real engines: tests/test_fleet_slurm.py (a one-node Slurm), tests/test_fleet_ssh.py (a local sshd),
tests/test_fleet_manifests.py (the Kubernetes and SkyPilot files)."""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
from pathlib import Path

import pytest
from bad_input_doc import Case, check_row, run_case, untouched

from xpubench import cli
from xpubench.backends.fingerprint import fleet_machine
from xpubench.envnames import FLEET_MACHINE
from xpubench.fleet.engines import ENDED, Job
from xpubench.fleet.engines.slurm import parse_sacct, parse_scontrol, settle
from xpubench.fleet.stream import message, messages
from xpubench.results.validate import FINGERPRINT, Invalid

DATA = Path(__file__).parent / "data"
RUN = '[run]\nworkload = ["matmul"]\nbackend = ["numpy"]\nsize = [64]\n'
LOCAL = '[[machine]]\nname = "here"\nlocal = true\n'

SLURM = '[[machine]]\nname = "gpu"\nslurm = { partition = "gpu" }\n'
POD = '[[machine]]\nname = "pod"\nkubernetes = { image = "x" }\n'
FLEET = "xpubench fleet {dir}/fleet.toml -o {dir}/out"
ROWS = [   # (input, the fleet file, the command with {dir}, what its one line says): docs/bad-input.md's fleet rows
    ("a key that is neither `[run]` nor `[[machine]]`", RUN + LOCAL + "[runs]\nx = 1\n", FLEET,
     "unknown key(s) runs (known: [run], [[machine]])"),
    ("an unknown `[run]` option", RUN + "batchsize = 3\n" + LOCAL, FLEET, "[run] unknown option(s) batchsize"),
    ("a `[run]` value `xpubench run` refuses", '[run]\nworkload = ["resnet9000"]\n' + LOCAL, FLEET,
     "unknown workload 'resnet9000'"),
    ("`output` in `[run]`", RUN + 'output = "x.jsonl"\n' + LOCAL, FLEET,
     "[run] output: the fleet writes DIR/<name>.jsonl"),
    ("no `[[machine]]`", RUN, FLEET, "no [[machine]]: give one or more"),
    ("a machine with no engine", RUN + '[[machine]]\nname = "a"\n', FLEET,
     "machine 'a': no engine: give exactly one of local, ssh, slurm"),
    ("a machine with two engines", RUN + '[[machine]]\nname = "a"\nlocal = true\nssh = "me@box"\n', FLEET,
     "machine 'a': two engines (local, ssh): give exactly one"),
    ("two machines of one name", RUN + LOCAL + LOCAL, FLEET, "two machines named 'here'"),
    ("two machine names equal but for case", RUN + LOCAL + '[[machine]]\nname = "HERE"\nlocal = true\n', FLEET,
     "two machines named 'HERE'"),
    ("a machine name with `/`", RUN + '[[machine]]\nname = "a/b"\nlocal = true\n', FLEET,
     "name 'a/b' is not a file name"),
    ("a machine name with `..`", RUN + '[[machine]]\nname = "a..b"\nlocal = true\n', FLEET,
     "name 'a..b' is not a file name"),
    ("a machine name with a space", RUN + '[[machine]]\nname = "a b"\nlocal = true\n', FLEET,
     "name 'a b' is not a file name"),
    ("a machine name with a control character", RUN + '[[machine]]\nname = "a\\u001b[2Jb"\nlocal = true\n', FLEET,
     "name 'a\\x1b[2Jb' is not a file name"),
    ("a machine with no name", RUN + "[[machine]]\nlocal = true\n", FLEET, "[[machine]] 1: has no name"),
    ("`nodes` on a local machine", RUN + LOCAL + "nodes = 2\n", FLEET, "machine 'here': nodes goes with slurm"),
    ("`ntasks` on an ssh machine", RUN + '[[machine]]\nname = "a"\nssh = "me@box"\nntasks = 2\n', FLEET,
     "ntasks goes with slurm"),
    ("an unknown key of a machine", RUN + LOCAL + 'gpu = "h100"\n', FLEET, "machine 'here': unknown key(s) gpu"),
    ("an unknown key of its engine's table", RUN + '[[machine]]\nname = "a"\nslurm = { partion = "gpu" }\n', FLEET,
     "machine 'a': slurm: unknown key(s) partion (known: account, gres, partition, sbatch_args, setup, time)"),
    ("a value of the wrong kind", RUN + '[[machine]]\nname = "a"\nslurm = { time = 20 }\n', FLEET,
     "slurm: time must be a string"),
    ("an ssh destination that is an option", RUN + '[[machine]]\nname = "a"\nssh = "-oProxyCommand=x"\n', FLEET,
     "ssh must be a destination such as \"user@host\""),
    ("a kubernetes machine without `image`", RUN + '[[machine]]\nname = "a"\nkubernetes = { namespace = "lab" }\n',
     FLEET, "machine 'a': kubernetes needs image"),
    ("`local = false`", RUN + '[[machine]]\nname = "a"\nlocal = false\n', FLEET, "machine 'a': local must be true"),
    ("not TOML", "[run\n", FLEET, "is not valid TOML"),
    ("`sbatch` not on PATH", RUN + SLURM, "PATH={dir}/bin " + FLEET, "machine 'gpu': sbatch is not on PATH"),
    ("`--submit` without kubectl on PATH", RUN + POD, "PATH={dir}/bin " + FLEET + " --submit",
     "--submit calls kubectl, which is not on PATH"),
    ("no `-o`", RUN + LOCAL, "xpubench fleet {dir}/fleet.toml", "-o DIR is needed"),
    ("neither a fleet file nor `--resume` or `--collect`", RUN + LOCAL, "xpubench fleet",
     "give one of: FILE.toml -o DIR"),
    ("a fleet file and `--resume`", RUN + LOCAL, "xpubench fleet {dir}/fleet.toml --resume {dir}/empty",
     "give one of: FILE.toml -o DIR"),
    ("`-o` with `--resume`", RUN + LOCAL, "xpubench fleet --resume {dir}/empty -o {dir}/empty",
     "--resume names the folder itself: drop -o"),
    ("`--collect` with `--submit`", RUN + LOCAL, "xpubench fleet --collect {dir}/empty --submit",
     "--collect reads what came back"),
    ("`--resume` of a folder without a fleet", RUN + LOCAL, "xpubench fleet --resume {dir}/empty", "cannot resume"),
    ("`--collect` of a folder without a fleet", RUN + LOCAL, "xpubench fleet --collect {dir}/empty", "cannot collect"),
    ("DIR already holds a fleet", RUN + LOCAL, "xpubench fleet {dir}/fleet.toml -o {dir}/fleet",
     "already holds a fleet (fleet.toml): --resume"),
    ("DIR/<name>.jsonl already holds results", RUN + LOCAL, "xpubench fleet {dir}/fleet.toml -o {dir}/results",
     "here.jsonl already holds results"),
    ("a second `fleet` writing into the same DIR", RUN + LOCAL, "xpubench fleet {dir}/fleet.toml -o {dir}/running",
     "another xpubench fleet is writing"),
    ("a folder without results files", "", "xpubench compare {dir}/empty", "holds no results files (*.jsonl)"),
    ("the same, to `report`", "", "xpubench report {dir}/empty", "holds no results files (*.jsonl)"),
]


@contextlib.contextmanager
def _fleet_file(folder: Path, text: str):
    """``folder/fleet.toml`` holding ``text`` (a second fleet running in ``folder/running``); nothing else in
    the folder written, deleted or submitted."""
    from xpubench.launch.runfile import held

    (folder / "fleet.toml").write_text(text)
    with held(folder / "running" / "fleet.lock", create=True, what="fleet"), untouched(folder):
        yield


def doc_cases(folder: Path) -> list[Case]:
    """Each found before anything is written or submitted: DIR/out is not made, no other folder changes."""
    for name in ("bin", "empty", "fleet", "results", "running"):
        (folder / name).mkdir()
    (folder / "fleet" / "fleet.toml").write_text(RUN + LOCAL)
    (folder / "results" / "here.jsonl").write_text("{}\n")
    cases = []
    for name, text, argv, says in ROWS:
        env, _, argv = argv.rpartition("xpubench ")
        env = dict(e.split("=", 1) for e in env.format(dir=folder).split())
        cases.append(Case(name, "xpubench " + argv.format(dir=folder), says, env=env,
                          within=functools.partial(_fleet_file, folder, text)))
    return cases


def fleet_cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(["fleet", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _no_program(monkeypatch, tmp_path) -> None:
    """PATH an empty folder (so sbatch, kubectl, sky are not on it)."""
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))


@pytest.mark.parametrize("name", [r[0] for r in ROWS])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, name):
    case = next(c for c in doc_cases(tmp_path) if c.input == name)
    check_row(case, run_case(case))


def test_report_and_compare_read_a_folder(tmp_path, capsys):
    """A fleet's DIR as it is: its *.jsonl (a run cut before its first result left an empty one: left out),
    not its plans, logs or manifests."""
    out = tmp_path / "fleet"
    (out / "logs").mkdir(parents=True)
    for name in ("first", "second"):
        shutil.copy(DATA / "compare" / f"{name}.jsonl", out / f"{name}.jsonl")
    (out / "empty.jsonl").write_text("")
    (out / "first.jsonl.plan.json").write_text("{}")
    (out / "logs" / "first.log").write_text("a log\n")
    assert cli.main(["compare", str(out)]) == 0
    said = capsys.readouterr().out
    assert "A: first" in said and "B: second" in said
    assert cli.main(["report", str(out), "-o", str(tmp_path / "r.md")]) == 0
    capsys.readouterr()
    assert "first" in (tmp_path / "r.md").read_text() and "second" in (tmp_path / "r.md").read_text()


def test_the_summary_has_a_column_per_machine_and_the_answer_ranks_them(tmp_path):
    """Two machines' files with the same backend and device: each its own column (they used to share one,
    the second file's figure in place of the first's), and the answer ranks the machines."""
    from xpubench import analysis
    from xpubench.report.base.frame import ResultSet
    from xpubench.report.sentences.answer import answer_lines
    from xpubench.report.tables.summary import summary_table

    for name, source in (("laptop", "first"), ("server", "slow")):
        shutil.copy(DATA / "compare" / f"{source}.jsonl", tmp_path / f"{name}.jsonl")
    data = ResultSet.load(analysis.load([tmp_path / "laptop.jsonl", tmp_path / "server.jsonl"]))
    table = summary_table(data.frame, data)
    assert [c.name for c in table.columns][3:5] == ["laptop: numpy", "server: numpy"]
    assert "per results file (machine) and backend" in table.title
    lines = answer_lines(data)
    assert any(line.startswith("- matmul: fastest laptop: numpy cpu") and "server: numpy cpu" in line for line in lines)


def test_the_fingerprint_records_the_machine_entry_and_loading_checks_it():
    entry = {"name": "gpu-node", "engine": "slurm", "settings": {"partition": "gpu"}, "ntasks": 2}
    assert fleet_machine({FLEET_MACHINE: json.dumps(entry)}) == {"fleet_machine": entry}
    assert fleet_machine({}) == {} and fleet_machine({FLEET_MACHINE: "not json"}) == {}
    FINGERPRINT({"fleet_machine": entry}, "fingerprint")
    with pytest.raises(Invalid, match="fleet_machine.engine is missing"):
        FINGERPRINT({"fleet_machine": {"name": "x"}}, "fingerprint")
    with pytest.raises(Invalid, match="fleet_machine.ntasks must be a whole number"):
        FINGERPRINT({"fleet_machine": {**entry, "ntasks": 0}}, "fingerprint")


def test_messages_are_found_in_a_log_that_prefixes_or_cuts_lines():
    log = ["[pod/xpubench-a-0/xpubench] " + message(line='{"a": 1}'), "some warning of the run\n",
           "(task, pid=12) " + message(exit=0), message(plan="{}")[:-9], message(hello="0.1.0")]
    assert list(messages(log)) == [{"line": '{"a": 1}'}, {"exit": 0}, {"hello": "0.1.0"}]


def test_collect_reads_a_pods_log_into_the_folder(tmp_path, capsys, monkeypatch):
    """--collect: a kubernetes machine's log (as `kubectl logs` prints it, or put there by hand) becomes
    DIR/<name>.jsonl and its plan; `compare` reads the folder after."""
    result = (DATA / "compare" / "first.jsonl").read_text()
    case = json.loads(result)["case"]
    plan = json.dumps({"plan_version": 1, "settings": {"processes": 1}, "cases": [case]})
    out = tmp_path / "out"
    (out / "logs").mkdir(parents=True)
    (out / "fleet.toml").write_text(RUN + '[[machine]]\nname = "pod"\nkubernetes = { image = "x" }\n')
    (out / "logs" / "pod.log").write_text("starting\n" + message(hello="x") + message(plan=plan)
                                           + message(line=result.strip()) + message(exit=0))
    _no_program(monkeypatch, tmp_path)   # no kubectl: the log in DIR/logs is read as it is
    code, said, _ = fleet_cli(capsys, "--collect", out)
    assert code == 0
    assert "pod: done (1/1 cases)" in said
    assert (out / "pod.jsonl").read_text() == result
    assert json.loads((out / "pod.jsonl.plan.json").read_text())["cases"] == [case]


def test_collect_says_what_is_missing(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "fleet.toml").write_text(RUN + '[[machine]]\nname = "pod"\nkubernetes = { image = "x" }\n')
    _no_program(monkeypatch, tmp_path)
    code, said, _ = fleet_cli(capsys, "--collect", out)
    assert code == 3
    assert "pod: failed: no log: kubectl is not on PATH (put the pod's or task's log in" in said


# what the one-node Slurm of tests/slurm_cluster.py answered for an array task (scontrol show job -o)
SCONTROL = ("JobId=9 ArrayJobId=8 ArrayTaskId=1 JobName=xpubench-a UserId=root(0) JobState=TIMEOUT Reason=TimeLimit "
            "ExitCode=0:15 RunTime=00:01:02 Partition=debug StdOut=/x/logs/slurm-8_1.log\n"
            "JobId=8 ArrayJobId=8 ArrayTaskId=0 JobName=xpubench-a JobState=COMPLETED Reason=None ExitCode=0:0\n"
            "JobId=10 JobName=xpubench-b JobState=FAILED Reason=NonZeroExitCode ExitCode=7:0\n")


def test_slurm_final_states_become_the_machines_result():
    assert parse_scontrol(SCONTROL) == {"8_1": ("TIMEOUT", 0), "8_0": ("COMPLETED", 0), "10": ("FAILED", 7)}
    assert parse_sacct("8_0|COMPLETED|0:0\n8_1|CANCELLED by 0|0:15\n11|PREEMPTED|0:0\n12|FAILED|1:0\n") == {
        "8_0": ("COMPLETED", 0), "8_1": ("CANCELLED", 0), "11": ("PREEMPTED", 0), "12": ("FAILED", 1)}
    said = {}
    for name, final in {"ok": ("COMPLETED", 0), "some failed": ("FAILED", 1), "timeout": ("TIMEOUT", 0),
                        "setup broke": ("FAILED", 7), "preempted": ("PREEMPTED", 0), "gone": None}.items():
        job = Job(name)
        settle(job, final)
        assert job.phase == ENDED
        said[name] = (job.exit_code, job.ended)
    assert said["ok"] == (0, "") and said["some failed"] == (1, "")   # the run's own exit codes
    assert said["timeout"] == (None, "Slurm: TIMEOUT") and said["preempted"] == (None, "Slurm: PREEMPTED")
    assert said["setup broke"] == (None, "Slurm: FAILED (exit code 7)")
    assert said["gone"][1].startswith("Slurm: left the queue, its final state no longer known")


@pytest.mark.skipif(shutil.which("sbatch") is None, reason="Slurm's sbatch is not installed")
def test_ntasks_runs_the_run_under_srun_on_every_task(tmp_path, capsys):
    """``ntasks``/``nodes``: the job asks Slurm for them and starts the run with ``srun --ntasks`` (each task
    finds its rank in Slurm's variables: launch/, docs/distributed.md); machines whose settings are the same
    share one job array."""
    (tmp_path / "fleet.toml").write_text(RUN + "".join(
        f'[[machine]]\nname = "{name}"\nslurm = {{ time = "00:20:00", gres = "gpu:1" }}\nnodes = 2\nntasks = 2\n'
        for name in ("a", "b")))
    code, said, _ = fleet_cli(capsys, tmp_path / "fleet.toml", "-o", tmp_path / "out", "--dry-run")
    assert code == 0
    assert "a, b (slurm, one job array of 2):" in said
    assert (f"sbatch --parsable --job-name=xpubench-a --time=00:20:00 --gres=gpu:1 --nodes=2 --ntasks=2 --array=0-1 "
            f"--output={tmp_path}/out/logs/slurm-%A_%a.log SCRIPT") in said
    assert 'eval exec srun --ntasks=2 "$RUN"' in said
    assert f"-o {tmp_path}/out/b.jsonl --num-processes 2'" in said
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_local_fleet_records_the_machine_and_its_summary(tmp_path, capsys, one_thread_workers):
    """``local = true``: the run in a child process, its results in DIR/<name>.jsonl with the entry recorded,
    then the summary and `report DIR`."""
    (tmp_path / "fleet.toml").write_text(RUN + "processes = 2\n" + LOCAL)
    out = tmp_path / "out"
    code, said, _ = fleet_cli(capsys, tmp_path / "fleet.toml", "-o", out, "--no-progress")
    assert code == 0, said
    assert "here (local, pid " in said and "here: done (1/1 cases)" in said
    assert "Answer:" in said and f"xpubench report {out} -o report.html" in said
    lines = (out / "here.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0])["fingerprint"]["fleet_machine"] == {"name": "here", "engine": "local"}
    assert (out / "fleet.toml").read_text() == RUN + "processes = 2\n" + LOCAL
    assert cli.main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
