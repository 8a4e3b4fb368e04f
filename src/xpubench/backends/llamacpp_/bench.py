"""A llama workload case measured by llama.cpp's own ``llama-bench``: its timing, its repetitions, read
back from its JSON Lines output and recorded with the same figures as xpubench's generation loop.

The mapping (docs/workloads.md, "llama.cpp"). An xpubench generation case at depth D (``--depth``), a
prompt of P tokens and N new ones times a prefill of P tokens after D cached ones, then N - 1 decode
steps whose contexts run from D + P. llama-bench is asked exactly that, in two runs of one test each:

- ``-p P -n 0 -d D``: prompt processing of P tokens after D (its pp test): ``prefill_s`` samples;
- ``-p 0 -n N-1 -d D+P``: N - 1 single-token decode steps after D + P (its tg test): one sample per
  repetition, the repetition's time / (N - 1) tokens, as ``decode_token_s``;

both with ``-t T`` (this process's usable cores, as torch and JAX compute with), ``-r R`` repetitions
after llama-bench's own untimed warm-up run, ``-o jsonl``. llama-bench feeds random token ids and times
each repetition around ``llama_decode`` with its own clock (including its synchronisation); the depth's
tokens are decoded before each repetition, untimed. Per repetition only the total is given, so a
decode step's spread is that of the repetitions' means, not of single steps: a repetition is what a
round is to the generation loop, and ``decode_tokens_per_s`` = 1 / the median repetition's mean step.
llama-bench reports no KV cache size (``kv_cache_na`` says so); no energy is read around what it times
(harness/generation.py).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpubench.backends.engine import usable_threads
from xpubench.results.stats import named_warnings, summarize

REPETITIONS = (2, 5)        # at least (a quick run's small budget), else llama-bench's default
QUICK_BUDGET_S = 5.0        # a case budget below this (the brief default run's 2 s) asks for the fewest


def command(bench: Path, model: Path, *, prompt: int, gen: int, depth: int, threads: int, reps: int) -> list[str]:
    """The llama-bench command of one test (pp when ``gen`` is 0, tg when ``prompt`` is 0)."""
    return [str(bench), "-m", str(model), "-p", str(prompt), "-n", str(gen), "-d", str(depth),
            "-t", str(threads), "-r", str(reps), "-o", "jsonl"]


def parse_jsonl(text: str) -> list[dict[str, Any]]:
    """llama-bench's ``-o jsonl`` records (one per test); a line that is not a JSON object is a ValueError
    naming it."""
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise ValueError(f"llama-bench printed a line that is not JSON: {line[:120]!r}") from None
        if not isinstance(record, dict) or not isinstance(record.get("samples_ns"), list):
            raise ValueError(f"llama-bench record without samples_ns: {line[:120]!r}")  # noqa: TRY004 - bad input
        records.append(record)
    return records


def run_test(cmd: list[str], timeout_s: float) -> dict[str, Any]:
    """Run one llama-bench test; its one record. A failure is a RuntimeError with llama-bench's last lines."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:]) or f"exit status {proc.returncode}"
        raise RuntimeError(f"llama-bench failed (exit {proc.returncode}): {tail}")
    records = parse_jsonl(proc.stdout)
    if len(records) != 1:
        raise RuntimeError(f"llama-bench gave {len(records)} records for one test")
    return records[0]


def figures(pp: dict[str, Any], tg: dict[str, Any], prompt_len: int, new_tokens: int) -> tuple[dict, dict]:
    """(metrics, raw samples) of a pp and a tg record, named as harness/generation.py names its own."""
    prefills = [ns / 1e9 for ns in pp["samples_ns"]]
    steps = int(tg["n_gen"])
    per_token = [ns / 1e9 / steps for ns in tg["samples_ns"]]
    pre, dec = summarize(prefills), summarize(per_token)
    round_s = pre.median + dec.median * steps
    metrics = {
        "compile_s": None, "first_round_s": None, "batch": 1, "prompt_len": prompt_len, "new_tokens": new_tokens,
        "rounds": len(prefills), "ttft_s": pre.median, "ttft_p90_s": pre.p90,
        "prefill_tokens_per_s": prompt_len / pre.median,
        "decode_token_s": dec.median, "decode_token_p50_s": dec.median, "decode_token_p90_s": dec.p90,
        "decode_token_cv": dec.cv,
        "decode_token_ci95_low_s": dec.ci95_low, "decode_token_ci95_high_s": dec.ci95_high,
        "decode_tokens_per_s": 1 / dec.median,
        "tokens_per_s": new_tokens / round_s,
        "warning": named_warnings({"prefill": pre, "decode": dec}),
        "attention_kernel_prefill": attention(pp), "attention_kernel_decode": attention(tg),
        "threads": int(tg["n_threads"]), "params": int(tg["model_n_params"]),
        "kv_cache_na": "llama-bench does not report it",
        "weight_bytes": int(tg["model_size"]), "model_bytes": int(tg["model_size"]),
        "runtime_build": f"llama.cpp {tg.get('build_commit')} ({tg.get('build_number')})",
        "runtime_tests": f"pp{pp['n_prompt']} @ d{pp['n_depth']}, tg{tg['n_gen']} @ d{tg['n_depth']}; "
                         f"{tg.get('model_type')}, kv {tg.get('type_k')}/{tg.get('type_v')}, "
                         f"batch {pp.get('n_batch')}/{pp.get('n_ubatch')}",
    }
    return metrics, {"prefill_s": prefills, "decode_token_s": per_token}


def attention(record: dict[str, Any]) -> str:
    fa = record.get("flash_attn")
    said = {-1: "auto", 0: "off", 1: "on"}.get(fa, str(fa))
    return f"llama.cpp ggml, flash attention {said}, kv cache {record.get('type_k')}"


@dataclass
class LlamaBench:
    """llama-bench asked for a case's tests (the engine's ``bench`` calls ``measure``). ``facts`` are what
    the engine found out before (the GGUF, its types)."""

    bench: Path
    model: Path
    prompt_len: int
    new_tokens: int
    depth: int = 0
    threads: int = field(default_factory=usable_threads)
    facts: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)

    def repetitions(self, budget_s: float | None) -> int:
        return REPETITIONS[0] if budget_s is not None and budget_s < QUICK_BUDGET_S else REPETITIONS[1]

    def measure(self, budget_s: float | None = None) -> tuple[dict, dict]:
        reps = self.repetitions(budget_s)
        common = {"threads": self.threads, "reps": reps}
        timeout = 3600.0
        pp = run_test(command(self.bench, self.model, prompt=self.prompt_len, gen=0, depth=self.depth, **common),
                      timeout)
        tg = run_test(command(self.bench, self.model, prompt=0, gen=self.new_tokens - 1,
                              depth=self.depth + self.prompt_len, **common), timeout)
        self.records = [pp, tg]
        metrics, samples = figures(pp, tg, self.prompt_len, self.new_tokens)
        metrics.update(self.facts)
        return metrics, samples
