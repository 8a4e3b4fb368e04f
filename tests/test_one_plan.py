"""The notebook API and the command line plan the same run (issue 53 item 3): ``api.plan()`` with no
arguments (the plan ``xpubench.run()`` runs) is `xpubench run`'s brief default run, the same cases, notes,
budget and worker processes, and so is every other request asked both ways, through one set of rules
(plan/request.py). Planned on recorded machines: nothing runs, nothing is detected."""

from __future__ import annotations

import pytest
from machine_facts import MACHINES

from xpubench import api, cli
from xpubench.backends.envfile import load_environment
from xpubench.cli.run import request_from
from xpubench.errors import UserError
from xpubench.plan.request import BRIEF_BUDGET_S, DEFAULT_PROCESSES

MODEL = "docs/examples/model_families.py:tiny_bert"
# the same request, written as `xpubench run` flags and as keywords of xpubench.run (api.plan)
ASKED = [
    ([], {}),                                                             # the brief default run
    (["--all"], {"all_cases": True}),
    (["--quick"], {"quick": True}),
    (["-w", "mnist_cnn", "--batch-size", "64"], {"workloads": ["mnist_cnn"], "batch_sizes": [64]}),
    (["--preset", "small"], {"preset": "small"}),                         # an option that selects its workloads
    (["--selftest", "ok"], {"selftest": ["ok"]}),
    (["--model", MODEL], {"model": MODEL}),
    (["-w", "llama", "--decode", "eager"], {"workload": "llama", "decode": ["eager"]}),
    (["--budget", "60"], {"budget_s": 60}),
]


def _both(flags: list[str], keywords: dict, machine: str):
    env_file = str(MACHINES / f"{machine}.json")
    args = cli.build_parser().parse_args(["run", *flags, "--env-file", env_file])
    request, opts = request_from(args)
    env = load_environment(env_file)
    by_cli = api.plan(request, environment=env, processes=opts["processes"])   # what --dry-run prints
    by_api = api.plan(environment=env, **keywords)
    return by_cli, by_api


@pytest.mark.parametrize("machine", ["h100-sxm", "apple-m2"])
@pytest.mark.parametrize("flags, keywords", ASKED, ids=lambda a: " ".join(a) if isinstance(a, list) else None)
def test_the_api_plans_what_the_command_line_plans(flags, keywords, machine):
    by_cli, by_api = _both(flags, keywords, machine)
    assert [c.key for c in by_api.cases] == [c.key for c in by_cli.cases]
    assert [c.run_id for c in by_api.cases] == [c.run_id for c in by_cli.cases]
    assert (by_api.notes, by_api.budget_s, by_api.processes) == (by_cli.notes, by_cli.budget_s, by_cli.processes)


def test_xpubench_plan_with_no_arguments_is_the_brief_run():
    by_api = api.plan(environment=load_environment(str(MACHINES / "h100-sxm.json")))
    assert by_api.budget_s == BRIEF_BUDGET_S and by_api.processes == DEFAULT_PROCESSES
    assert any(note.startswith("brief run: ") for note in by_api.notes)   # plan/brief.py's left-out line
    full = api.plan(environment=by_api.environment, quick=False)      # the full default sweep, asked for
    assert len(by_api.cases) < len(full.cases) and full.budget_s is None
    assert {c.workload for c in by_api.cases} <= {"llama", "matmul", "mnist_cnn", "gpt"}


def test_a_price_the_command_line_refuses_is_refused_from_a_notebook():
    """One check of prices (plan/prices.py checked) for a flag, a file and a keyword: "$1.20" is text, not a
    number of dollars, from either side (the old notebook path took it as 1.2)."""
    env_file = str(MACHINES / "h100-sxm.json")
    assert cli.main(["run", "-w", "matmul", "--price-per-hour", "gpu=$1.20", "--env-file", env_file, "--dry-run"]) == 2
    with pytest.raises(UserError, match=r"price for gpu must be US dollars per hour.*'\$1.20'"):
        api.plan(workloads=["matmul"], prices={"gpu": "$1.20"}, environment=load_environment(env_file))


@pytest.mark.parametrize("name", ["mnist_cnn", "imdb_lstm", "gpt", "llama"])
def test_xpubench_list_shows_the_batch_sizes_the_planner_plans(name):
    """One batch-size rule (plan/defaults.py default_batch_sizes): `xpubench list`'s column is what
    `xpubench run -w NAME` plans on a CPU, in each mode the workload lists (training, generation)."""
    from xpubench.cli.listing import _batches
    from xpubench.workloads import get_workload

    env = load_environment(str(MACHINES / "h100-sxm.json"))
    workload = get_workload(name)
    for listed, mode in (("train", "train"), ("generate", "infer")):
        if listed == "generate" and not workload.generates:
            continue
        cases = api.plan(workloads=[name], backends=["torch"], devices=["cpu"], precisions=["fp32"], modes=[mode],
                         environment=env).cases
        assert cases and {c.mode for c in cases} == {listed}
        assert ", ".join(map(str, sorted({c.batch_size for c in cases}))) == _batches(workload, listed)
