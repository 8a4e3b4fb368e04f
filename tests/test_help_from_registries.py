"""`xpubench run --help` and `doctor --help` say what the registries hold (issue 52 item 9): every backend
id, every workload, the brief run's workloads as the default, the precisions and modes, and a flag shared
by several workloads (--prompt-len) says each text once. Generated, so they can't drift."""

from __future__ import annotations

import argparse

import pytest

from xpubench import backends
from xpubench.cli import build_parser
from xpubench.plan.brief import PRIORITY
from xpubench.plan.defaults import default_backends
from xpubench.plan.validation import MODES
from xpubench.workloads import REGISTRY, get_workload


def offered() -> list[str]:
    return [n for n in REGISTRY if get_workload(n).kind != "selftest"]   # the isolation check is not offered


def helps(command: str) -> dict[str, str]:
    """{first long flag: its help, whitespace folded} of one subcommand."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {next(f for f in a.option_strings if f.startswith("--")): " ".join(str(a.help).split())
            for a in sub._actions if a.option_strings and a.help != argparse.SUPPRESS}


def test_run_backend_help_names_every_backend_and_the_default_ones():
    said = helps("run")["--backend"]
    listed, _, default = said.partition(" (default: ")
    assert [b.strip() for b in listed.removeprefix("comma list of ").split(",")] == backends.every_id()
    assert default.startswith(", ".join(default_backends()) + ",")
    assert {"keras", "llamacpp"} <= set(backends.names())   # the 3-of-5 list of issue 52 named neither


def test_run_workload_help_names_every_workload_and_the_brief_runs_default():
    said = helps("run")["--workload"]
    assert "default: all" not in said
    listed, _, default = said.partition(" (default: ")
    assert [w.strip() for w in listed.removeprefix("comma list of ").split(",")] == offered()
    assert f"the brief run, {', '.join(PRIORITY)} " in f"the {default}"


def test_run_precision_and_mode_help_come_from_the_records():
    said = helps("run")
    every = dict.fromkeys(p for n in backends.names() for p in backends.get(n).precisions)
    assert said["--precision"].startswith("comma list of " + ", ".join(every) + " (")
    assert said["--mode"].startswith("comma list of " + ", ".join(MODES) + " (")
    assert "llama: infer" in said["--mode"]                   # its default mode is not training


def repeated_phrase(text: str, n: int = 4) -> str | None:
    words = text.split()
    seen = set()
    for i in range(len(words) - n + 1):
        phrase = " ".join(words[i:i + n])
        if phrase in seen:
            return phrase
        seen.add(phrase)
    return None


@pytest.mark.parametrize("command", ["run", "doctor"])
def test_no_help_repeats_itself(command):
    repeats = {flag: repeated_phrase(text) for flag, text in helps(command).items() if repeated_phrase(text)}
    assert not repeats, repeats


def test_a_flag_several_workloads_share_says_each_text_once():
    said = helps("run")["--prompt-len"]
    assert said.count("prompt tokens per sequence") == 1
    assert said.startswith("gpt, llama generation: ") and "default 512" in said


def test_doctor_backend_help_names_the_backends_with_doctor_adapters():
    from xpubench.backends.base import Backend

    checked = [n for n in backends.names() if type(backends.get(n)).doctor_ops is not Backend.doctor_ops]
    said = helps("doctor")["--backend"]
    assert said.startswith("comma list of " + ", ".join(checked) + " (default: ")
    assert "default: all" not in helps("doctor")["--device"]


def test_the_readme_names_every_workload_the_brief_run_plans():
    """The README's `xpubench run` line (and the comment line under it) names each workload the brief run
    chooses from (plan/brief.py PRIORITY: gpt was left out) and its budget."""
    from pathlib import Path

    from xpubench.plan.request import BRIEF_BUDGET_S

    lines = (Path(__file__).resolve().parents[1] / "README.md").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.split("#")[0].strip() == "xpubench run")
    said = lines[at] + " " + " ".join(line for line in lines[at + 1:at + 3] if line.lstrip().startswith("#"))
    missing = [w for w in PRIORITY if w not in said.replace(",", " ").split()]
    assert not missing, said
    assert f"{BRIEF_BUDGET_S:g} s" in said
