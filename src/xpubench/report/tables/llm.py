"""Language models at real sizes (llama) in the terminal, the report and the closing answer, every runtime
(the frameworks and the engines: backends/engine.py) side by side:

- the summary under the run's summary (``runtime_table``): a row per runtime x format, each model and its
  lengths together, with pp and tg tokens/s and tg's share of its bandwidth bound for every runtime, the
  fastest tg of each format marked;
- the pp/tg table that reads like llama-bench's (``format_tables``: model, size, params, backend and its
  decode step, format, threads, one row per test: ``pp512``, ``tg128``, ``tg128 @ d4096``, tokens/s ± sd
  over the rounds; beside it an engine's own figure of the same calls where it reports one: OpenVINO GenAI's
  perf metrics), with the shares against the chip (a tg row: the decode rate of its bandwidth bound; a
  pp row: pp MFU), the energy per token, the compile time each process paid (on the tg row), the dollars
  per 1M tokens (where a price was given) and the KV cache (its tokens/s-against-batch chart:
  report/charts/generation.py);
- the cells the answer's line per model and test reads (report/sentences/language_models.py: the verdict and
  every runtime's share of the bandwidth bound in one sentence).

A generation result belongs here when it carries the bytes read per generated token (workloads'
``generation_counts``; analysis/generation.py derives the shares)."""

from __future__ import annotations

import re

import pandas as pd

from xpubench import backends
from xpubench.backends.fingerprint import busy_note
from xpubench.legible.units import fmt_bytes, fmt_rate
from xpubench.report.base.cells import fmt, fmt_seconds, noisy
from xpubench.report.base.frame import backend_label, many_sources, measured_at, measured_at_column, num, ok_rows
from xpubench.report.base.table import ALWAYS, LOW, Column, Table
from xpubench.report.tables.costs import usd
from xpubench.report.tables.user_cost import compile_text

FORMATS = ("fp32", "bf16", "fp16", "int8", "int4")
TESTS = (("pp", "prompt_len", "prefill_tokens_per_s"), ("tg", "new_tokens", "decode_tokens_per_s"))
PRICED = {"pp": "usd_per_1m_prompt_tokens", "tg": "usd_per_1m_tokens"}   # analysis/cost.py


def llm_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The ok generation rows that carry a language model's counts, in a stable order."""
    rows = ok_rows(frame, "generate")
    if rows.empty or "decode_bytes_per_token" not in rows:
        return rows.iloc[:0].assign(model=None)
    rows = rows[rows["decode_bytes_per_token"].notna()]
    named = rows["architecture"] if "architecture" in rows else pd.Series(None, index=rows.index, dtype=object)
    rows = rows.assign(model=named.fillna(rows["workload"]))
    if "depth" not in rows:
        rows = rows.assign(depth=None)
    rows = rows.assign(at=measured_at_column(rows))   # the batch a generation is measured at (results/modes.py)
    return rows.sort_values(["workload", "model", "backend", "device", "precision", "at", "depth"],
                            na_position="first")


def bound_reason(row) -> str:
    """Why a row has no share of its bandwidth bound, in a few words (analysis/generation.py's note whole
    is in the result)."""
    note = str(num(row, "bandwidth_bound_note") or "")
    if note.startswith("unreliable bound"):
        return "above 100%: the bandwidth read low (a busy machine?) or the bytes per token are undercounted"
    return "no bandwidth known: run `xpubench ceilings`" if note else "not computed"


def bound_cell(row) -> str:
    """The decode rate's share of its bandwidth bound; "n/a" with the reason's first words where none."""
    share = num(row, "pct_of_bandwidth_bound")
    if share is not None:
        return f"{share:.0%}"
    note = str(num(row, "bandwidth_bound_note") or "")
    return "n/a (>100%: bound unreliable)" if note.startswith("unreliable bound") else "n/a"


def _pct(row, name: str) -> str:
    value = num(row, name)
    return "n/a" if value is None else f"{value:.1%}" + (" (est.)" if num(row, "peak_is_estimate") else "")


def lengths_text(row) -> str:
    """A generation's lengths and depth, llama-bench's way: "pp512/tg128", "pp512/tg128 @ d4096"."""
    depth = num(row, "depth")
    return (f"pp{fmt(num(row, 'prompt_len'), '.0f')}/tg{fmt(num(row, 'new_tokens'), '.0f')}"
            + (f" @ d{depth:.0f}" if depth else ""))


def test_name(row, kind: str) -> str:
    """llama-bench's test name: pp512, tg128, tg128 @ d4096 (llama-bench's own spelling of a depth)."""
    length = fmt(num(row, "prompt_len" if kind == "pp" else "new_tokens"), ".0f")
    depth = num(row, "depth")
    return f"{kind}{length}" + (f" @ d{depth:.0f}" if depth else "")


def model_name(row) -> str:
    """A language model as llama-bench names it: "smollm-135m 4/30 layers" (a preset cut to fewer layers)."""
    name = str(num(row, "architecture") or row["workload"])
    cut = re.fullmatch(r"(\S+) \(n_layers (\d+)\)", name)
    if cut:
        from xpubench.workloads.llama.config import PRESETS

        total = PRESETS[cut[1]].n_layers if cut[1] in PRESETS else None
        return f"{cut[1]} {cut[2]}/{total} layers" if total else f"{cut[1]} {cut[2]} layers"
    return name


def kv_cell(row) -> str:
    """The KV cache's bytes as allocated; n/a with the reason the record gives (llama-bench does not report it)."""
    size = num(row, "kv_cache_bytes")
    reason = num(row, "kv_cache_na")
    return fmt_bytes(size) if size is not None else f"n/a ({reason})" if reason else "n/a"


BUSY_LOAD = 1.5   # a process that started at a 1-min load average this many times the usable cores: others competed


def busy(row) -> bool:
    """Whether the machine was busy when the row was measured: the run's busy-machine note (other processes
    held a quarter of the CPU or more before it started: backends/fingerprint.py ``busy_note``), or a worker
    process that started at a 1-min load average above ``BUSY_LOAD`` x the usable cores."""
    share, load, cores = (num(row, k) for k in ("cpu_busy_at_start", "load_at_start", "usable_cores"))
    return (share is not None and busy_note(share) is not None) or bool(load and cores and load > BUSY_LOAD * cores)


def _how_busy(rows: pd.DataFrame) -> str:
    """How busy the machine was for ``rows``, at its worst, in the words of what made them ``busy``."""
    share, load = (pd.to_numeric(rows[k], errors="coerce").max() for k in ("cpu_busy_at_start", "load_at_start"))
    cores = num(rows.iloc[0], "usable_cores")
    said = []
    if pd.notna(share) and busy_note(share):
        said.append(f"other processes held up to {share:.0%} of the CPU when a run started")
    if cores and load > BUSY_LOAD * cores:
        said.append(f"a worker started at a 1-min load average of up to {load:.1f} on {cores:.0f} cores")
    return "; ".join(said)


def load_notes(rows: pd.DataFrame) -> list[str]:
    """A line per backend whose figures fall further than others' on a busy machine (its record's
    ``under_load``: llama.cpp's and torch's spinning threads) with rows measured on a busy machine
    (``busy``): which rows, how busy, and why their figures are low and wide."""
    lines = []
    for backend, part in rows.groupby("backend", sort=True) if not rows.empty else []:
        why = backends.record(str(backend)).under_load
        part = part[[busy(r) for _, r in part.iterrows()]] if why else part.iloc[:0]
        if not part.empty:
            which = ", ".join(dict.fromkeys(f"{model_name(r)} {r['precision']}" for _, r in part.iterrows()))
            lines.append(f"{backend} ({which}): measured on a busy machine ({_how_busy(part)}). {why}")
    return lines


def params_cell(row) -> str:
    """llama-bench's params: 134.52 M, 1.24 B."""
    n = num(row, "params")
    if n is None:
        return "n/a"
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.2f} M"


def joules_cell(row) -> str:
    """J/token of the row's test (net of idle power where it was read); n/a with the reason's first words."""
    kind = row["test_kind"]
    value = num(row, f"{kind}_net_joules_per_token")
    value = num(row, f"{kind}_joules_per_token") if value is None else value
    if value is not None:
        return f"{value:.3g}"
    reason = str(num(row, "energy_na") or "").removeprefix("n/a: ").split(":")[0].strip()   # its first clause
    return f"n/a ({reason[:48]})" if reason else "n/a"


def rate_cell(row) -> str:
    return rate_text(row, row["test_rate"])


def rate_text(row, metric: str) -> str:
    """A tokens/s figure ± its sd over the rounds (llama-bench's ±), marked when noisy."""
    sd = num(row, metric + "_sd")
    return noisy(row, fmt_rate(num(row, metric)) + (f" ± {fmt_rate(sd)}" if sd is not None else ""))


def own_rate_cell(row) -> str:
    """The engine's own figure of the same calls (OpenVINO GenAI's perf metrics): pp = the prompt over its TTFT,
    tg = 1 / its TPOT; empty for a runtime that reports none (no column where no row has one)."""
    if row["test_kind"] == "tg":
        return fmt_rate(num(row, "engine_decode_tokens_per_s")) if num(row, "engine_decode_tokens_per_s") else ""
    ttft, prompt = num(row, "engine_ttft_s"), num(row, "prompt_len")
    return fmt_rate(prompt / ttft) if ttft and prompt else ""


def test_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Each result twice, as its pp row then its tg row (llama-bench's layout)."""
    parts = [rows.assign(test_kind=kind, test_rate=rate, test_order=i) for i, (kind, _, rate) in
             enumerate(TESTS)]
    both = pd.concat(parts)
    return both.iloc[[i for pair in zip(range(len(rows)), range(len(rows), 2 * len(rows))) for i in pair]]


def _columns(rows: pd.DataFrame) -> list[Column]:
    cols = [Column("file", lambda r: str(r["source"]), priority=LOW, text=True)] if many_sources(rows) else []
    return cols + [
        Column("model", model_name, text=True),
        Column("size", lambda r: fmt_bytes(num(r, "model_bytes") or num(r, "weight_bytes")), priority=1),
        Column("params", params_cell, priority=1),
        Column("backend", backend_label, text=True),
        Column("format", lambda r: str(r["precision"]), text=True, priority=ALWAYS),
        Column("device", lambda r: str(r["device"]), text=True, priority=2),
        Column("threads", lambda r: fmt(num(r, "threads"), ".0f"), priority=2),
        Column("batch", lambda r: fmt(measured_at(r), ".0f"), priority=2),
        Column("test", lambda r: test_name(r, r["test_kind"]), text=True, priority=ALWAYS),
        Column("t/s", rate_cell, priority=ALWAYS),
        *([Column("engine's own t/s", own_rate_cell, priority=2)]
          if "engine_decode_tokens_per_s" in rows and rows["engine_decode_tokens_per_s"].notna().any() else []),
        Column("of bw bound", lambda r: bound_cell(r) if r["test_kind"] == "tg" else "", priority=ALWAYS),
        Column("pp MFU", lambda r: _pct(r, "prefill_mfu") if r["test_kind"] == "pp" else "", priority=2),
        Column("J/token", joules_cell, priority=2),
        Column("compile", lambda r: compile_text(r) if r["test_kind"] == "tg" else "", priority=2),
        *([Column("$ per 1M tok", lambda r: usd(num(r, PRICED[r["test_kind"]])), priority=2)]
          if "usd_per_hour" in rows and rows["usd_per_hour"].notna().any() else []),   # --price-per-hour given
        Column("TTFT / per token p50", lambda r: fmt_seconds(num(r, "ttft_s" if r["test_kind"] == "pp" else
                                                                    "decode_token_p50_s")), priority=LOW),
        Column("KV cache", kv_cell, priority=LOW),
    ]


def format_tables(frame: pd.DataFrame) -> list[Table]:
    """The pp/tg table, one for every runtime and weight format (fp32, bf16, fp16, int8, int4; tf32 with
    fp32's weights apart): a row per runtime x format x test, the formats in that order; [] without rows."""
    rows = _ranked(frame)
    if rows.empty:
        return []
    return [Table("Prompt processing (pp) and generation (tg), tokens/s, per runtime and weight format",
                  _columns(rows), test_rows(rows), note="\n".join(load_notes(rows)))]


def _runtime(row, devices: int, sources: bool) -> str:
    """A runtime as the summary names it: the backend with its variant, its device where there are several,
    its results file first where there are several (a fleet's machines)."""
    return (f"{row['source']}: " if sources else "") + backend_label(row) + (f" {row['device']}" if devices > 1 else "")


def _ranked(frame: pd.DataFrame) -> pd.DataFrame:
    """The language-model rows ordered model by model (like with like: ``alike``), format by format
    (``FORMATS`` first), batch by batch, the fastest tg first; ``fastest`` marks each such group's best where
    more than one runtime ran it."""
    rows = llm_rows(frame)
    if rows.empty:
        return rows.assign(fastest=False, _tg=None, _format=None, _batch=None)
    order = {p: i for i, p in enumerate(FORMATS)}
    rows = rows.assign(_tg=pd.to_numeric(rows["decode_tokens_per_s"]), _format=rows["precision"].map(
        lambda p: (order.get(p, len(order)), p)), _batch=rows["at"])
    rows = rows.sort_values(["model", "alike", "_format", "_batch", "_tg"], ascending=[True, True, True, True, False])
    group = rows.groupby(["model", "alike", "precision", "_batch"], sort=False)
    first, many = group.cumcount() == 0, group["backend"].transform("size") > 1
    return rows.assign(fastest=first & many)


def runtime_table(frame: pd.DataFrame) -> Table:
    """The summary of language models (printed under the run's summary): a row per runtime x format, each
    model and its lengths together, with pp and tg tokens/s (± sd over the rounds) and tg's share of its
    bandwidth bound for every runtime; the fastest tg of each format marked."""
    rows = _ranked(frame)
    devices = rows["device"].nunique() if not rows.empty else 1
    sources = many_sources(rows) if not rows.empty else False
    heads = ~rows.duplicated(["model", "alike"]) if not rows.empty else rows.index.to_series()

    def head(r, text: str) -> str:
        return text if heads.get(r.name, False) else ""

    cols = [
        Column("model", lambda r: head(r, model_name(r)), text=True, priority=ALWAYS),
        Column("test", lambda r: head(r, lengths_text(r)), text=True, priority=ALWAYS),
        Column("format", lambda r: str(r["precision"]) + (f" b{r['_batch']:.0f}" if r["_batch"] > 1 else ""),
               text=True, priority=ALWAYS),
        Column("runtime", lambda r: _runtime(r, devices, sources), text=True, priority=ALWAYS),
        Column("pp t/s", lambda r: rate_text(r, "prefill_tokens_per_s"), priority=ALWAYS),
        Column("tg t/s", lambda r: rate_text(r, "decode_tokens_per_s"), priority=ALWAYS),
        Column("of bw bound", bound_cell, priority=ALWAYS),
        Column("fastest", lambda r: "fastest" if r["fastest"] else "", text=True, priority=1),
    ]
    where = f" on {rows['device'].iloc[0]}" if devices == 1 and not rows.empty else ""
    legend = ("pp, tg: tokens/s ± sd over the rounds (pp: the prompt over the median prefill; tg: 1 / the median "
              "round's mean decode step); of bw bound: tg against the decode rate the memory bandwidth allows (the "
              "weights and KV cache read once per token); fastest: the best tg of its format")
    note = "\n".join([legend, *load_notes(rows)])   # llama.cpp's and torch's figures under load
    return Table(f"Language models{where}: a row per runtime and format", cols, rows, note=note, compact=True)
