# %% [markdown]
# # xpubench from a notebook
#
# Cells in the `# %%` format (Jupyter, VS Code, or `python docs/examples/notebook.py`; about 30 s on
# 2 CPU cores). It measures two small sweeps, loads them as a DataFrame, compares them and writes a
# report. See docs/reports.md for what each figure and the compare statistic mean.

# %%
import tempfile
from pathlib import Path

import xpubench

folder = Path(tempfile.mkdtemp(prefix="xpubench-notebook-"))

# %% Measure: every case runs in its own worker process; results are also appended to the file.
first = xpubench.run(workloads=["matmul"], backends=["numpy", "torch"], precisions=["fp32"],
                     sizes=[512, 1024], time_budget_s=1.0, output=folder / "first.jsonl")
second = xpubench.run(workloads=["matmul"], backends=["numpy", "torch"], precisions=["fp32"],
                      sizes=[512, 1024], time_budget_s=1.0, output=folder / "second.jsonl")
print([(r.key, r.status) for r in first])

# %% Load: one row per case, flat columns (source = file stem, case fields, every metric).
df = xpubench.load([folder / "first.jsonl", folder / "second.jsonl"])
df["warm_GFLOP_s"] = df["warm_flops_per_s"] / 1e9
print(df[["source", "backend", "device", "size", "warm_GFLOP_s", "noisy"]].to_string(index=False))
print(df.pivot_table(index=["backend", "size"], columns="source", values="warm_GFLOP_s").round(1))

# %% Compare: ratio of median times with a 95% bootstrap interval; "not significant" when it is not.
# The two sweeps are identical: on a quiet machine the verdicts are "not significant"; other processes
# competing for the cores between the two runs show up as real slowdowns (the samples are real).
for comparison in xpubench.compare(folder / "first.jsonl", folder / "second.jsonl"):
    for warning in comparison.warnings:
        print("warning:", warning)
    for row in comparison.rows:
        print(f"{row.key:40s} B/A {row.ratio:.3f} [{row.ci_low:.3f}, {row.ci_high:.3f}]  {row.verdict}")

# %% Report: one self-contained HTML page (or "report.md" for Markdown with PNG charts beside it).
page = xpubench.report([folder / "first.jsonl", folder / "second.jsonl"], folder / "report.html")
print("open", page)
