"""Time to target, on recorded per-epoch curves (no training): the loop's stop rule and clock on a fake
device and clock (harness/target.py in harness/training.py), the arithmetic (results/target_stats.py:
time to target, MLPerf's trimmed mean, bootstrap intervals), "not reached" as a status, one seed per
worker process (launch/runner.py), the plan's checks (plan/target.py) and the reports (report/tables/target.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import this_machine
from test_stats_timing import FakeClock, FakeDevice, train_case

from xpubench import cli
from xpubench.errors import UserError
from xpubench.harness.target import process_case
from xpubench.harness.training import run_training
from xpubench.launch import runner
from xpubench.plan import PlanRequest, build_cases
from xpubench.plan.request import worker_processes
from xpubench.results.fold import aggregate
from xpubench.results.schema import Run
from xpubench.results.target_stats import EvalPoint, fold, interval, ratio, run_figures, trimmed_mean
from xpubench.results.targets import Target, parse
from xpubench.workloads import mnist_cnn

# Validation accuracy after each epoch of one real run, recorded on the 2-core AMD EPYC VM: mnist_cnn, torch,
# fp32, batch 256, 8,000 training / 2,000 held-out images of the shared MNIST test split (epoch 21 s, eval 1.5 s)
RECORDED = [0.8605, 0.9085, 0.9345, 0.9465, 0.9565, 0.9565, 0.961, 0.9655, 0.9645, 0.967, 0.972, 0.976, 0.9755,
            0.977, 0.976]
ACCURACY = Target("accuracy", 0.975)


class RecordedCurve(FakeDevice):
    """A fake device whose evaluations return a recorded curve: 1 s per step, ``eval_s`` per evaluation,
    ``compile_s`` of compilation before the clock starts."""

    spec = mnist_cnn.SPEC

    def __init__(self, clock, curve, *, steps_per_epoch=5, eval_s=1.5, compile_s=7.0):
        super().__init__(clock, 0.0, 1.0, steps_per_epoch)
        self.curve, self.eval_s, self.compile_s = list(curve), eval_s, compile_s
        self.evaluations, self.epochs_started, self.indices = 0, [], []

    def compile(self):
        self.clock.now += self.compile_s
        return self.compile_s

    def start_epoch(self, epoch):
        super().start_epoch(epoch)
        self.epochs_started.append(epoch)

    def step(self, i):
        self.indices.append(i)
        return super().step(i)

    def predict_eval(self):   # the gallery of real data: no images here
        return np.zeros((0, 28, 28, 1)), np.zeros(0, dtype=int), np.zeros((0, 10))

    def evaluate(self):
        self.clock.now += self.eval_s
        accuracy = self.curve[self.evaluations]
        self.evaluations += 1
        return 1.0 - accuracy, accuracy     # (validation loss, accuracy)


def to_target(target: str, curve=RECORDED, epochs: int = 15, **kw):
    clock = FakeClock()
    trainer = RecordedCurve(clock, curve, **{k: v for k, v in kw.items() if k != "options"})
    case = train_case(epochs=epochs, data="real", options={"target": target, "sync": "step", **kw.get("options", {})})
    return run_training(trainer, case, 1.0, clock=clock), trainer


def test_the_clock_stops_at_the_evaluation_that_reaches_the_target():
    out, trainer = to_target("accuracy>=0.975")
    m = out.metrics
    # epoch 12 is the first at 0.976: 12 epochs of 5 one-second steps, 12 evaluations of 1.5 s on the clock
    assert m["target_reached"] is True and m["epochs_to_target"] == 12 and m["epochs_run"] == 12
    assert m["time_to_target_s"] == pytest.approx(12 * 5 + 12 * 1.5)
    assert m["time_to_target_no_eval_s"] == pytest.approx(12 * 5)
    assert m["steps_to_target"] == 60 and m["samples_to_target"] == 600 and m["target_evaluations"] == 12
    assert m["compile_s"] == 7.0 and trainer.evaluations == 12   # compile off the clock; no 13th epoch
    assert m["target"] == "accuracy>=0.975" and m["target_source"] == "--target" and m["seed"] == 0
    assert m["learning_rate"] == 1e-3 and m["lr_scaling"].startswith("none")
    assert out.series["target_value"] == RECORDED[:12]
    assert out.series["target_wall_s"] == pytest.approx([6.5 * (e + 1) for e in range(12)])
    assert out.message == ""


def test_a_target_the_epochs_cannot_reach_ends_not_reached_with_the_best_value():
    out, _ = to_target("accuracy>=0.99", epochs=10)
    m = out.metrics
    assert m["target_reached"] is False and m["time_to_target_s"] is None and m["epochs_to_target"] is None
    assert m["target_best"] == 0.967 and m["target_best_epoch"] == 10 and m["epochs_run"] == 10
    assert "target accuracy>=0.99 not reached in 10 epochs (best 0.967 at epoch 10)" == out.message


def test_a_validation_loss_target_is_reached_going_down():
    out, _ = to_target("val_loss=0.04")   # the fake's loss is 1 - accuracy: 0.039 after epoch 7
    assert out.metrics["epochs_to_target"] == 7 and out.metrics["target"] == "val_loss<=0.04"


def test_evaluation_every_n_steps_cuts_epochs_into_rounds_in_the_same_batch_order():
    out, trainer = to_target("accuracy>=0.93", options={"eval_every": 2})   # 3 rounds an epoch: 2, 2, 1 steps
    m = out.metrics
    assert m["epochs_to_target"] == pytest.approx(1.0) and m["steps_to_target"] == 5   # the 3rd evaluation
    assert trainer.indices == [0, 1, 2, 3, 4] and trainer.epochs_started == [0]
    assert out.series["target_epoch"] == pytest.approx([0.4, 0.8, 1.0])
    assert m["eval_every_steps"] == 2 and m["epoch_s"] is None and m["epochs_run"] == 1


def test_keras_skips_a_target_case_that_evaluates_inside_an_epoch():
    """Keras's fit runs whole epochs: its record says so before any trainer is built (the case is skipped
    with the reason); a target case without --eval-every, and the other backends, run."""
    from xpubench import backends
    from xpubench.case import Case

    def case(backend, **options):
        return Case(workload="mnist_cnn", backend=backend, device="cpu", mode="train", data="real", batch_size=256,
                    options={"target": "accuracy>=0.975", **options})

    assert "evaluates after every epoch only" in backends.get("keras").unsupported(case("keras:jax", eval_every=2))
    assert backends.get("keras").unsupported(case("keras:jax")) is None
    assert backends.get("torch").unsupported(case("torch", eval_every=2)) is None


def test_run_figures_of_a_recorded_curve():
    points = [EvalPoint(31 * (e + 1), 22.4 * (e + 1), 1.5, v) for e, v in enumerate(RECORDED)]
    got = run_figures(points, ACCURACY, steps_per_epoch=31, global_batch=256)
    assert got["time_to_target_s"] == pytest.approx(22.4 * 12) and got["samples_to_target"] == 31 * 12 * 256
    assert got["time_to_target_no_eval_s"] == pytest.approx(22.4 * 12 - 1.5 * 12)
    nan_curve = [EvalPoint(1, 1.0, 0.1, None), EvalPoint(2, 2.0, 0.1, 0.5)]
    missed = run_figures(nan_curve, ACCURACY, steps_per_epoch=1, global_batch=1)
    assert missed["target_reached"] is False and missed["target_best"] == 0.5 and missed["target_best_epoch"] == 2


def test_trimmed_mean_drops_the_fastest_and_slowest_and_counts_one_miss_as_the_slowest():
    assert trimmed_mean([10.0, 12.0, 11.0, 30.0, 9.0]) == pytest.approx(11.0)
    assert trimmed_mean([10.0, 12.0, 11.0, None, 9.0]) == pytest.approx(11.0)   # the miss is dropped
    assert trimmed_mean([10.0, None, 11.0, None, 9.0]) is None                  # two misses: no result
    assert trimmed_mean([10.0, 14.0]) == pytest.approx(12.0) and trimmed_mean([10.0, None]) is None
    assert trimmed_mean([]) is None


def test_bootstrap_interval_is_seeded_holds_the_mean_and_needs_three_seeds():
    times = [30.1, 28.4, 35.0, 29.9, 31.2]
    low, high = interval(times)
    assert low <= trimmed_mean(times) <= high and (low, high) == interval(times)
    assert interval([30.0, 31.0]) == (None, None)
    low, high = interval([30.1, 28.4, None, 29.9, 31.2])   # resamples with two misses: unbounded above
    assert low is not None and high is None


def test_the_ratio_of_two_setups_is_called_only_outside_its_interval():
    fast, slow = [20.0, 21.0, 19.5, 20.4, 22.0], [30.0, 31.5, 29.0, 30.2, 33.0]
    est = ratio(fast, slow)
    assert est.significant and est.ratio == pytest.approx(30.566 / 20.466, rel=1e-3) and est.low > 1
    same = ratio(fast, [20.5, 19.0, 22.5, 20.0, 21.0])
    assert not same.significant and same.note
    assert ratio(fast, [None, None, 30.0]) is None


def seed_run(process: int, time_s, *, target="accuracy>=0.975", best=0.98, **metrics) -> Run:
    m = {"target": target, "target_reached": time_s is not None, "time_to_target_s": time_s,
         "time_to_target_no_eval_s": None if time_s is None else time_s - 10, "target_best": best,
         "epochs_to_target": None if time_s is None else 6.0, "seed": process, "samples_per_s": 1000.0,
         "step_s": 0.25, **metrics}
    case = {"workload": "mnist_cnn", "backend": metrics.pop("backend", "torch"), "device": "cpu", "mode": "train",
            "precision": "fp32", "batch_size": 256, "data": "real", "run_id": "r", "options": {"target": target}}
    case["key"] = f"mnist_cnn/{case['backend']}/cpu/train/fp32/b256/real/to:{target}"
    case["run_id"] = case["key"]
    return Run(case=case, status="ok", metrics=m, samples={"step_s": [0.25, 0.26, 0.24]},
               series={"target_wall_s": [10.0, 20.0], "target_value": [0.97, best]}, process=process, processes=5)


def test_a_case_folds_its_seeds_into_the_trimmed_mean_and_says_when_it_falls_short():
    result = aggregate([seed_run(i, t) for i, t in enumerate([78.0, 70.5, None, 90.0, 81.0])])
    m = result.metrics
    assert m["time_to_target_s"] == pytest.approx((78 + 81 + 90) / 3) and m["seeds"] == 5 and m["seeds_reached"] == 4
    assert m["target_reached"] is True and m["time_to_target_min_s"] == 70.5 and m["time_to_target_max_s"] == 90.0
    assert result.status == "ok" and result.message == ""
    short = aggregate([seed_run(i, t, best=0.97) for i, t in enumerate([78.0, None, None, 90.0, 81.0])])
    assert short.metrics["target_reached"] is False and short.metrics["time_to_target_s"] is None
    assert "not reached (by 3 of 5 seeds; best 0.97)" in short.message
    assert fold([{"time_to_target_s": None, "target_best": 0.9}], ACCURACY)["target_best"] == 0.9


def test_each_worker_process_of_a_target_case_trains_with_its_own_seed(monkeypatch):
    seen = []

    def fake_run_one(case, *, timeout_s, memory_limit_bytes=None, workdir=None, process=0, environment=None):
        seen.append((case.options.get("target"), case.seed))
        return {"status": "ok", "metrics": {}, "placement": "cpu"}, 0.1

    monkeypatch.setattr(runner, "run_one", fake_run_one)
    target = train_case(seed=3, data="real", options={"target": "accuracy>=0.975"})
    plain = train_case(seed=3)
    runs = runner.run_cases([target, plain], None, fingerprint={}, processes=3)
    assert [s for t, s in seen if t] == [3, 4, 5] and [s for t, s in seen if not t] == [3, 3, 3]
    assert {r.case["seed"] for r in runs} == {3} and len({r.case["run_id"] for r in runs}) == 2
    assert process_case(target, 0) is target


ENV = {"backends": {"torch": {"installed": True, "devices": [{"id": "cpu"}]}}}


def plan(**kw):
    return build_cases(PlanRequest(workloads=["mnist_cnn"], backends=["torch"], devices=["cpu"], **kw), ENV)


def test_the_plan_makes_target_cases_at_one_batch_size_with_the_default_cap(tmp_path):
    cases = plan(target="accuracy=0.975", data="real", data_dir=str(tmp_path))
    assert len(cases) == 1 and cases[0].batch_size == 256 and cases[0].epochs == 20
    assert cases[0].key.endswith("/to:accuracy>=0.975") and cases[0].options["target"] == "accuracy>=0.975"
    both = plan(modes=["train", "time-to-target"], data="real", data_dir=str(tmp_path), batch_sizes=[64], epochs=4)
    assert [c.options.get("target") for c in both] == [None, "default"] and {c.epochs for c in both} == {4}
    assert worker_processes(cases) == 5 and worker_processes(plan()) == 3   # 5 seeds with a target
    assert worker_processes(cases, 2) == 2                                  # unless --processes says


@pytest.mark.parametrize(("kw", "message"), [
    ({"target": "accuracy=0.975"}, "needs real data"),
    ({"target": "accuracy=97.5", "data": "real"}, "accuracy is a fraction"),
    ({"target": "f1=0.9", "data": "real"}, "METRIC one of accuracy, mse, val_loss"),
    ({"target": "mse=0.1", "data": "real"}, "mnist_cnn's validation metric is accuracy"),
    ({"target": "accuracy=0.9", "data": "real", "modes": ["infer"]}, "--target applies to training"),
    ({"eval_every": 10}, "give --target"),
])
def test_the_plan_refuses_a_target_it_cannot_train_to(kw, message, tmp_path):
    with pytest.raises(UserError, match=message):
        plan(**({"data_dir": str(tmp_path)} if kw.get("data") else {}), **kw)


def test_a_workload_without_a_default_target_asks_for_one(tmp_path):
    with pytest.raises(UserError, match="weather_gru has no default target"):
        build_cases(PlanRequest(workloads=["weather_gru"], backends=["torch"], devices=["cpu"],
                                modes=["time-to-target"], data="real", data_dir=str(tmp_path)), ENV)


def test_target_with_synthetic_data_exits_2_with_one_line(capsys):
    code = cli.main(["run", "-w", "mnist_cnn", "-b", "torch", "--target", "accuracy=0.975", "--data", "synthetic"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "needs real data" in err and "Traceback" not in err


def test_targets_read_their_own_spelling():
    assert parse(str(parse("loss=1.6"))) == Target("val_loss", 1.6) and not ACCURACY.reached(math.nan)


@pytest.mark.slow
def test_real_training_to_an_unreachable_target_ends_not_reached_with_each_seed_recorded(mnist_dir, tmp_path,
                                                                                         one_thread_workers):
    """Two worker processes really train the MNIST CNN (512 images, 2 epochs) toward 99.9%: both end
    "not reached" with their best value, each with its own seed and curve; the case has no time."""
    from xpubench import api

    (result,) = api.run(workloads=["mnist_cnn"], backends=["torch"], devices=["cpu"], target="accuracy=0.999",
                        data="real", data_dir=str(mnist_dir), train_samples=512, eval_samples=256, epochs=2,
                        batch_sizes=[64], processes=2, output=tmp_path / "r.jsonl", timeout_s=300,
                        environment=this_machine())   # detected once per test run
    assert result.status == "ok" and [r.status for r in result.runs] == ["ok", "ok"]
    seeds = [r.metrics for r in result.runs]
    assert [m["seed"] for m in seeds] == [0, 1] and all(m["target_reached"] is False for m in seeds)
    assert all(0 < m["target_best"] < 0.999 and m["epochs_run"] == 2 for m in seeds)
    assert all(f"best {m['target_best']:.4g}" in r.message for m, r in zip(seeds, result.runs))
    assert [len(r.series["target_wall_s"]) for r in result.runs] == [2, 2]
    assert result.runs[0].series["target_value"] != result.runs[1].series["target_value"]   # two seeds
    m = result.metrics
    assert m["target_reached"] is False and m["time_to_target_s"] is None and m["seeds"] == 2
    assert m["seeds_reached"] == 0 and "not reached (by 0 of 2 seeds" in result.message
    assert m["init_s"] > 0 and m["learning_rate"] == 1e-3
