"""The training measurement, the same for every framework.

Timed regions (see docs/methodology.md):
- ``compile_s``: ahead-of-time compilation of the train step, where the framework has one (jax.jit
  lower+compile). torch.compile compiles inside the first step instead, so there it is in first_step_s.
- ``step``: one optimizer step on a batch already on the device, from the call until the device has
  finished it (the trainer's sync). The loss value is read after the clock stops.
- ``epoch``: all steps of one epoch back to back (each synchronised), nothing else: no evaluation, no
  data loading (the data set sits on the device before the clock starts).
- ``eval``: the validation pass after each epoch, timed apart and never part of epoch time.
The first epoch (compile, allocator and cache warm-up) is reported apart; steady figures are medians
over the later epochs.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np

from xpubench.harness.outcome import Outcome
from xpubench.harness.stats import summarize


class Trainer(Protocol):
    steps_per_epoch: int
    global_batch: int

    def compile(self) -> float | None: ...            # seconds of AOT compile, or None
    def start_epoch(self, epoch: int) -> None: ...     # e.g. a new batch order; not timed
    def step(self, i: int) -> Any: ...                 # one optimizer step on batch i
    def sync(self, handle: Any) -> None: ...           # wait until the step's device work is done
    def loss_value(self, handle: Any) -> float: ...
    def evaluate(self) -> tuple[float, float]: ...     # (validation loss, validation metric)
    def placement(self) -> str: ...
    def peak_memory(self) -> int | None: ...
    def predict_eval(self) -> tuple[Any, Any, Any]: ...  # (x_eval, y_eval, class probabilities), numpy


def run_training(trainer: Trainer, case, flops_per_sample: float, clock=time.perf_counter) -> Outcome:
    epochs = case.epochs or 1
    steps = min(case.steps or trainer.steps_per_epoch, trainer.steps_per_epoch)
    if steps < 1:
        raise ValueError(f"the training set holds less than one global batch ({trainer.global_batch})")
    compile_s = trainer.compile()
    epoch_times, step_times, eval_times = [], [], []
    train_loss, val_loss, val_metric = [], [], []
    budget_hit = False
    begin = clock()
    for epoch in range(epochs):
        trainer.start_epoch(epoch)
        losses, this_epoch = [], []
        epoch_start = clock()
        for i in range(steps):
            t0 = clock()
            handle = trainer.step(i)
            trainer.sync(handle)
            this_epoch.append(clock() - t0)
            losses.append(handle)
        epoch_times.append(clock() - epoch_start)
        step_times.append(this_epoch)
        train_loss.append(sum(trainer.loss_value(h) for h in losses) / len(losses))
        t0 = clock()
        vl, vm = trainer.evaluate()
        eval_times.append(clock() - t0)
        val_loss.append(vl)
        val_metric.append(vm)
        if case.time_budget_s and clock() - begin > case.time_budget_s and epoch >= 1 and epoch < epochs - 1:
            budget_hit = True
            break
    return Outcome(
        metrics=_metrics(case, trainer, compile_s, epoch_times, step_times, eval_times, train_loss,
                         val_loss, val_metric, flops_per_sample, budget_hit),
        samples={"step_s": [t for e in _steady(step_times) for t in e], "epoch_s": epoch_times,
                 "first_epoch_step_s": step_times[0], "eval_s": eval_times},
        series={"train_loss": train_loss, "val_loss": val_loss, "val_metric": val_metric},
        placement=trainer.placement(),
        artifacts=_gallery(trainer, case),
    )


def _gallery(trainer: Trainer, case, wrong: int = 24, right: int = 8) -> dict:
    """For image classifiers on real data: the misclassified test images (most confident mistakes
    first), then a few correct ones, as uint8 pixels, for the report's gallery. Not timed."""
    spec = getattr(trainer, "spec", None)
    if case.data != "real" or spec is None or spec.input_kind != "image" or spec.target_kind != "class":
        return {}
    x, y, probs = trainer.predict_eval()
    pred, conf = probs.argmax(-1), probs.max(-1)
    idx = np.arange(len(y))
    bad = idx[pred != y][np.argsort(-conf[pred != y], kind="stable")][:wrong]
    good = idx[pred == y][:right]
    pixels = np.clip(np.asarray(x) * 255 + 0.5, 0, 255).astype(np.uint8)
    return {"gallery": [
        {"index": int(i), "label": int(y[i]), "pred": int(pred[i]), "confidence": round(float(conf[i]), 4),
         "correct": bool(pred[i] == y[i]), "image": pixels[i].squeeze(-1).tolist() if pixels.shape[-1] == 1
         else pixels[i].tolist()}
        for i in [*bad, *good]]}


def _steady(step_times: list[list[float]]) -> list[list[float]]:
    """Steps after the first epoch; with a single epoch, its steps after the first one."""
    if len(step_times) > 1:
        return step_times[1:]
    return [step_times[0][1:]] if len(step_times[0]) > 1 else [step_times[0]]


def _metrics(case, trainer, compile_s, epoch_times, step_times, eval_times, train_loss, val_loss,
             val_metric, flops_per_sample, budget_hit) -> dict:
    steady_steps = [t for e in _steady(step_times) for t in e]
    s = summarize(steady_steps)
    per_step = s.median
    batch = trainer.global_batch
    steady_epochs = epoch_times[1:]
    warning = s.warning
    if not steady_epochs:
        warning = "one epoch only: no steady epoch time" + (f"; {warning}" if warning else "")
    if budget_hit:
        warning = f"time budget reached after {len(epoch_times)} epochs" + (f"; {warning}" if warning else "")
    samples_per_s = batch / per_step
    return {
        "compile_s": compile_s,
        "first_step_s": step_times[0][0],
        "first_epoch_s": epoch_times[0],
        "epoch_s": summarize(steady_epochs).median if steady_epochs else None,
        "epochs_run": len(epoch_times),
        "steps_per_epoch": len(step_times[0]),
        "global_batch": batch,
        "step_s": per_step,
        "step_p90_s": s.p90,
        "step_iqr_s": s.iqr,
        "step_cv": s.cv,
        "step_ci95_low_s": s.ci95_low,
        "step_ci95_high_s": s.ci95_high,
        "us_per_sample": per_step / batch * 1e6,
        "samples_per_s": samples_per_s,
        "epoch_samples_per_s": (batch * len(step_times[0]) / summarize(steady_epochs).median
                                if steady_epochs else None),
        "eval_s": summarize(eval_times).median,
        "flops_per_sample": flops_per_sample,
        "achieved_flops_per_s": flops_per_sample * samples_per_s,
        "peak_memory_bytes": trainer.peak_memory(),
        "final_loss": train_loss[-1],
        "final_val_loss": val_loss[-1],
        "final_metric": val_metric[-1],
        "warning": warning,
    }
