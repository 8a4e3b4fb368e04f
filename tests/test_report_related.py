"""The cases a row is read against, found once for every renderer (report/base/related.py), and the tables
that use them (report/tables/cases.py) agreeing across the terminal and the report."""

from test_report_frame import record

from xpubench.report.base import related
from xpubench.report.base.frame import results_frame
from xpubench.report.tables import cases as tables


def frame():
    return results_frame([
        record(device="cpu", step=0.1), record(device="gpu:0", step=0.004, seed=1),
        record(devices=2, step=0.11, seed=2), record(devices=4, step=0.12, seed=3),
        record(mode="infer", precision="fp32", step=0.01), record(mode="infer", precision="int8", step=0.02, seed=4),
        record(workload="imdb_lstm", batch=32, step=0.05, seed=5),
        record(workload="imdb_lstm", batch=512, status="oom")])


def row(f, **match):
    sel = f
    for k, v in match.items():
        sel = sel[sel[k] == v]
    return sel.iloc[0]


def test_each_related_case_is_found():
    f = frame()
    gpu = row(f, device="gpu:0")
    assert related.cpu_baseline(f, gpu)["entry"] == row(f, device="cpu", devices=1, mode="train",
                                                       workload="mnist_cnn")["entry"]
    int8 = row(f, precision="int8")
    assert related.fp32_sibling(f, int8)["entry"] == row(f, mode="infer", precision="fp32")["entry"]
    four = row(f, devices=4)
    assert int(related.scaling_baseline(f, four)["devices"]) == 1
    assert related.scaling_baseline(f, row(f, devices=1, device="cpu", mode="train", workload="mnist_cnn")) is None
    oom = row(f, status="oom")
    assert related.largest_batch_that_fit(f, oom) == 32


def test_tables_use_them():
    f = frame()
    status = tables.status_table(f).frame()
    assert list(status["message"]) == ["batch 32 fitted"]
    infer = tables.inference_table(f).frame()
    assert list(infer["x fp32"]) == ["-", "0.50x"]
    scaling = tables.scaling_table(f).frame()
    assert list(scaling["speedup"]) == [f"{(2 * 32 / 0.11) / (32 / 0.1):.2f}x vs N=1",
                                        f"{(4 * 32 / 0.12) / (32 / 0.1):.2f}x vs N=1"]
    speed = tables.speedup_table(f).frame()
    assert speed["speedup warm"].iloc[0] == "25.00x"
