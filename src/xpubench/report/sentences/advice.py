""""Which device for what": plain sentences written from the measurements, and only from them.

Every comparison goes through results/ratio.py ratio_estimate (bootstrap interval over the raw samples, a 5%
minimum change): a difference that is not significant is said to be within noise, never ranked.
A *setup* is one file x backend (and the variant it ran: torch's eager decode) x device x precision x device
count; setups are compared only within one workload and its key options (``alike``: a brief 4-layer llama
never against the full model).
"""

from __future__ import annotations

import math

import pandas as pd

from xpubench.devices.device import is_cpu
from xpubench.report.base.cells import fmt_seconds
from xpubench.report.base.frame import (
    ResultSet,
    column,
    many_sources,
    num,
    ok_rows,
    setting,
)
from xpubench.report.sentences.language_models import model_lines, model_rows
from xpubench.report.tables.headline import SETUP, better, figure_text, headline_rate, setup_name, speedup
from xpubench.report.tables.user_cost import compiled_apart_s
from xpubench.results.modes import MODES
from xpubench.results.ratio import RatioEstimate


def _within(est: RatioEstimate | None) -> str:
    if est is None:
        return "no raw samples to test the difference"
    return f"95% CI {est.low:.2f}-{est.high:.2f}x" + ("" if est.significant else ", within noise")


def _ranked(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with their headline figure (``rate``), best first (results/modes.py's direction)."""
    rows = rows.assign(rate=[headline_rate(r) for _, r in rows.iterrows()]).dropna(subset=["rate"])
    return rows.sort_values("rate", ascending=not (rows.empty or better(rows.iloc[0])), kind="mergesort")


def _rate(row) -> str:
    return figure_text(row, row["rate"])


def _rate_of(row) -> str:
    return figure_text(row, headline_rate(row))


def fastest(data: ResultSet) -> list[str]:
    """The fastest setup per workload of every mode measured at a batch size (training, inference,
    generation), and per precision of a mode measured at a size (matmul): the modes whose headline is
    derived from a time (results/modes.py ``rates``), so that the samples' interval tests it; a language
    model's generation: its own line (language_models.py), with its share of the bandwidth bound."""
    frame, lines = data.frame, []
    tested = [m for m in MODES.values() if any(m.rate(f.metric) for f in m.headline)]
    batched = [m for m in tested if m.size == "batch_size"]
    spoken = model_rows(frame).index
    for mode in batched:
        rows = _ranked(ok_rows(frame, mode.name))
        multi = many_sources(rows)   # over the mode's rows: a language model's, said apart, count too
        rows = rows[~rows.index.isin(spoken)]
        for (workload, _), sub in rows.groupby(["workload", "alike"], sort=True):
            best = sub.drop_duplicates(SETUP)   # each setup at its best batch size, best setup first
            top = best.iloc[0]
            said = f" ({top['options_text']})" if top.get("options_text") else ""   # "(4/30 layers, pp64, tg16)"
            text = (f"{workload} {mode.label}{said}: fastest is {setup_name(top, multi)} at batch "
                    f"{int(top['batch_size'])}, {_rate(top)}")
            if len(best) == 1:
                lines.append(text + " (the only setup measured).")
                continue
            second = best.iloc[1]
            est = speedup(data, top, second)
            ratio = top["rate"] / second["rate"] if better(top) else second["rate"] / top["rate"]
            verdict = (f"{ratio:.2f}x the next, {setup_name(second, multi)} ({_rate(second)} at batch "
                       f"{int(second['batch_size'])}; {_within(est)})")
            if est is not None and not est.significant:
                verdict = (f"but {setup_name(second, multi)} ({_rate(second)}) is within noise of it "
                           f"({est.note}): no clear winner")
            lines.append(f"{text}; {verdict}.")
    lines += [line + "." for line in model_lines(data)]
    for mode in (m for m in tested if m not in batched):
        rows = _ranked(ok_rows(frame, mode.name))   # a figure n/a: not ranked
        multi = many_sources(rows)
        for precision, sub in rows.groupby("precision", sort=True):
            top, figure = sub.iloc[0], mode.headline_figure(sub.iloc[0])
            lines.append(f"{mode.label} {precision}: highest {figure.before} rate {_rate(top)} on "
                         f"{setup_name(top, multi)} at {setting(top)}"
                         + (f" ({sub['device'].nunique()} devices compared)." if sub["device"].nunique() > 1 else "."))
    return lines


def crossovers(data: ResultSet) -> list[str]:
    """Where one setup overtakes another as the batch size grows (training throughput)."""
    rows = ok_rows(data.frame, "train")
    multi, lines, pairs = many_sources(rows), [], 0
    for workload, sub in (rows.groupby("workload") if not rows.empty else []):
        setups = [g.set_index("batch_size") for _, g in sub.groupby(SETUP, dropna=False)]
        for i, a in enumerate(setups):
            for b in setups[i + 1:]:
                common = sorted(set(a.index.dropna()) & set(b.index.dropna()))
                if len(common) < 2:
                    continue
                pairs += 1
                faster = [column(a.loc[[n]], "samples_per_s").iloc[0] > column(b.loc[[n]], "samples_per_s").iloc[0]
                          for n in common]
                for k in range(1, len(common)):
                    if faster[k] == faster[k - 1]:
                        continue
                    winner, loser = (a, b) if faster[k] else (b, a)
                    w_row, l_row = winner.loc[common[k]], loser.loc[common[k]]
                    est = speedup(data, w_row, l_row)
                    lines.append(f"{workload}: {setup_name(w_row, multi)} overtakes {setup_name(l_row, multi)} "
                                 f"between batch {common[k - 1]} and {common[k]} ({w_row['samples_per_s']:,.0f} vs "
                                 f"{l_row['samples_per_s']:,.0f} samples/s at {common[k]}; {_within(est)}).")
    if pairs and not lines:
        lines.append("No setup overtakes another within the batch sizes measured: the order is the same at every "
                     "common batch size.")
    return lines


def _startup(row) -> tuple[float, float] | None:
    """(time before steady state, steady time per step or call) of a case; a generation's: its compile and
    the time per generated token of its decode rate."""
    if row["mode"] == "generate":
        rate = num(row, "decode_tokens_per_s")
        compiled = compiled_apart_s(row)
        return (compiled, 1 / rate) if rate and compiled is not None else None
    if row["mode"] == "matmul":
        cold, warm = row.get("cold_s"), row.get("warm_s")
        return (cold - warm, warm) if pd.notna(cold) and pd.notna(warm) else None
    step, first = row.get("step_s"), row.get("first_step_s")
    if pd.isna(step) or pd.isna(first):
        return None
    compile_s = row.get("compile_s")
    return (float(first) - float(step) + (0.0 if pd.isna(compile_s) else float(compile_s)), float(step))


def break_even(data: ResultSet) -> list[str]:
    """Where the fastest setup's compile/start-up time outweighs its speed for a short run: for each case
    (workload, batch size or N, precision; a generation's model and lengths too), the fastest steady setup
    against every setup that starts faster, and each backend's fastest against its own other variants (a
    compiled decode against the eager one), when the steady difference is significant and the break-even
    is at least 2 steps (a generation: tokens)."""
    rows = ok_rows(data.frame)
    rows = rows[rows["mode"].isin(["train", "matmul", "generate"])] if not rows.empty else rows
    lines = []
    keys = ["workload", "mode", "batch_size", "size", "precision",
            *(k for k in GENERATION_KEYS if k in rows)]
    for _, group in (rows.groupby(keys, dropna=False) if not rows.empty else []):
        group = group[[(_startup(r) is not None) for _, r in group.iterrows()]]
        if len(group) < 2:
            continue
        multi = many_sources(group)
        steady = {i: _startup(group.loc[i]) for i in group.index}
        fastest = min(group.index, key=lambda i: steady[i][1])
        own = {b: min(part.index, key=lambda i: steady[i][1]) for b, part in group.groupby("backend")}
        pairs = dict.fromkeys([(fastest, i) for i in group.index]
                              + [(own[b], i) for b, part in group.groupby("backend") for i in part.index])
        for f, s in pairs:
            fast, slow = group.loc[f], group.loc[s]
            (ov_f, t_f), (ov_s, t_s) = steady[f], steady[s]
            if not (t_f < t_s and ov_f > ov_s):
                continue
            est = speedup(data, fast, slow)
            n = math.ceil((ov_f - ov_s) / (t_s - t_f))
            if est is None or not est.significant or n < 2:
                continue
            unit = {"train": "step", "generate": "token"}.get(fast["mode"], "product")
            what = f"N={int(fast['size'])}" if fast["mode"] == "matmul" else f"batch {int(fast['batch_size'])}"
            extra = ""
            if fast["mode"] == "train" and pd.notna(fast.get("global_batch")):
                extra = f" (~{n * int(fast['global_batch']):,} samples)"
            start = "compile" if fast["mode"] == "generate" else f"compile and first {unit}"
            lines.append(f"{fast['workload']} {fast['precision']} {what}: {setup_name(fast, multi)} runs "
                         f"{est.ratio:.2f}x faster per {unit} than {setup_name(slow, multi)} ({fmt_seconds(t_f)} "
                         f"against {fmt_seconds(t_s)}) but needs {fmt_seconds(ov_f - ov_s)} more to start ({start}); "
                         f"it wins only after {n:,} {unit}s{extra}.")
    return lines


GENERATION_KEYS = ("architecture", "prompt_len", "new_tokens", "depth")   # a generation's model and lengths


def _metric_direction(row) -> tuple[str, int]:
    from xpubench.report.charts.training import metric_name

    name = str(row.get("metric_name") or metric_name(str(row["workload"])))
    return name, (-1 if name in ("mse", "loss", "mae") else 1)


def precision_tradeoffs(data: ResultSet) -> list[str]:
    """Faster precisions (bf16, fp16, int8...) against fp32 of the same case: speed and quality."""
    rows = ok_rows(data.frame)
    rows = rows[rows["mode"].isin(["train", "infer"])] if not rows.empty else rows
    multi, lines = many_sources(rows), []
    keys = ["source", "workload", "backend", "device", "mode", "batch_size", "devices"]
    for _, group in (rows.groupby(keys, dropna=False) if not rows.empty else []):
        base = group[group["precision"] == "fp32"]
        if base.empty:
            continue
        ref = base.iloc[0]
        for _, other in group[group["precision"] != "fp32"].iterrows():
            name, sign = _metric_direction(other)
            q_key = name if other["mode"] == "infer" and pd.notna(other.get(name)) else "final_metric"
            q_new, q_ref = other.get(q_key), ref.get(q_key)
            est = speedup(data, other, ref)
            figures = f"{_rate_of(other)} against {_rate_of(ref)}"
            speed = "n/a" if est is None else f"{est.ratio:.2f}x the fp32 speed ({figures}; {_within(est)})"
            who = (f"{other['workload']} {other['mode']} on {setup_name(other, multi)}: {other['precision']} ran at "
                   f"{speed}")
            if pd.isna(q_new) or pd.isna(q_ref):
                lines.append(who + f"; {name} not recorded for both.")
                continue
            drop = (q_ref - q_new) * sign
            n = other.get("eval_samples") if pd.notna(other.get("eval_samples")) else None
            noise = _binomial_noise(q_ref, q_new, n) if name == "accuracy" else None
            quality = f"{name} {q_new:.4f} vs {q_ref:.4f} in fp32"
            if drop <= 0 or (noise is not None and drop <= noise):
                tail = " (no loss beyond sampling noise)" if drop > 0 else " (no loss)"
                lines.append(f"{who}; {quality}{tail}.")
            else:
                faster = est is not None and est.significant and est.ratio > 1
                lines.append(f"{who}; {quality}: {'the faster precision ' if faster else ''}lost {drop:.4f} of {name}"
                             + ("" if noise is not None else " (sampling noise unknown)") + ".")
    return lines


def _binomial_noise(p1: float, p2: float, n) -> float | None:
    """Two standard errors of the difference of two accuracies measured on n samples each."""
    if not n:
        return None
    return 2 * math.sqrt((p1 * (1 - p1) + p2 * (1 - p2)) / float(n))


def noise_note(data: ResultSet) -> list[str]:
    rows = ok_rows(data.frame)
    if rows.empty or "noisy" not in rows:
        return []
    noisy = int(rows["noisy"].fillna(False).astype(bool).sum())
    if not noisy:
        return ["No figure was flagged noisy."]
    return [(f"{noisy} of {len(rows)} cases have noisy figures (marked !): a re-run may reorder setups whose "
             "difference is small.")]


def time_and_cost(data: ResultSet) -> list[str]:
    """With prices: per workload and mode, the setups ranked by time and by cost (each at its fastest
    batch size), and where the two rankings differ (cost.rank_time_and_cost)."""
    from xpubench.analysis.cost import rank_time_and_cost

    lines = []
    for mode in (m for m in MODES.values() if m.cost is not None):
        name, unit = mode.cost.metric, mode.cost.after
        rows = ok_rows(data.frame, mode.name)
        if rows.empty or name not in rows or column(rows, name).dropna().empty:
            continue
        multi = many_sources(rows)
        for workload, sub in rows.groupby("workload"):
            sub = sub.assign(sps=column(sub, "samples_per_s"))
            sub = sub[sub["sps"].notna()]
            if sub.empty:
                continue
            best = sub.loc[sub.groupby(SETUP, dropna=False)["sps"].idxmax()]
            options = {setup_name(r, multi): (1e6 / r["sps"], None if pd.isna(r.get(name)) else float(r[name]))
                       for _, r in best.iterrows()}
            ranking = rank_time_and_cost(options)
            what = f"{workload} {mode.label}"
            priced = ", ".join(f"{k} ${options[k][1]:.4g}" for k in ranking.by_cost)
            timed = ", ".join(f"{k} {fmt_seconds(options[k][0])}" for k in ranking.by_time)
            text = (f"{what}, per {unit}: by time {timed}; by cost {priced or 'n/a'}"
                    + (f" (no price: {', '.join(ranking.unpriced)})" if ranking.unpriced else ""))
            if len(ranking.by_cost) < 2:
                lines.append(text + ".")
            elif ranking.same_order:
                lines.append(text + ": the fastest is also the cheapest.")
            else:
                lines.append(text + ": the rankings differ: " + "; ".join(ranking.differences) + ".")
    return lines


def advice(data: ResultSet) -> list[str]:
    """All the sentences, in reading order; an empty list when nothing finished ok."""
    if ok_rows(data.frame).empty:
        return []
    lines = fastest(data) + time_and_cost(data) + crossovers(data) + break_even(data) + precision_tradeoffs(data)
    if all(map(is_cpu, ok_rows(data.frame)["device"])):
        lines.append("Only CPUs are in these files: there is no accelerator to recommend against the CPU.")
    return lines + noise_note(data)
