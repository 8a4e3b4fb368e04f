"""What a training run's loop leaves, and the figures made of it after the loop (harness/training.py
``run_training``; nothing here is timed): an epoch's record (``EpochRecord``, one per epoch from its
StepTimer), the steady step samples (``steady_step_samples``), the run's metrics (``training_metrics``: step
and epoch times, throughput, the notes on a budget cut or a lone epoch) and, for an image classifier on real
data, the gallery of its mistakes (``gallery``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from xpubench.energy.windows import EnergyWindows, training_figures
from xpubench.results.metrics_train import TrainMetrics
from xpubench.results.stats import summarize


@dataclass
class EpochRecord:
    steps_run: int
    time_s: float                                          # the epoch region, ended by a sync
    step_times: list[float] = field(default_factory=list)  # synchronised steps; empty when pipelined
    complete: bool = True


def gallery(trainer, case, wrong: int = 24, right: int = 8) -> dict:
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


def steady_step_samples(records: list[EpochRecord]) -> list[float]:
    """Step samples of the epochs after the first (a cut epoch included): synchronised step times, or,
    for a pipelined epoch, its time / its steps. With a single epoch, its steps after the first one."""
    later = records[1:]
    if later:
        return [t for r in later for t in (r.step_times or [r.time_s / r.steps_run])]
    first = records[0].step_times
    return first[1:] if len(first) > 1 else first


def training_metrics(case, trainer, mode, steps, compile_s, records, eval_times, train_loss, val_loss, val_metric,
                     flops_per_sample, budget_hit, ahead: bool, energy: EnergyWindows) -> dict:
    """The figures of a training run, its energy's over the steady epochs' windows among them; ``ahead``: its
    steady steps ran one ahead (a step sample is then the time between two steps' ends: docs/methodology.md)."""
    steady_steps = steady_step_samples(records)
    s = summarize(steady_steps)
    per_step = s.median
    batch = trainer.global_batch
    complete = [r for r in records if r.complete]
    steady_epochs = [r.time_s for r in complete[1:]] if records[0].complete else []
    cut = next((r for r in records if not r.complete), None)
    epoch_s = summarize(steady_epochs).median if steady_epochs else None
    notes = []
    if budget_hit and cut is not None:
        notes.append(f"time budget reached in epoch {len(records)} after {cut.steps_run} steps "
                     "(not counted as an epoch)")
    elif budget_hit:
        notes.append(f"time budget reached after {len(records)} epochs")
    if not steady_epochs:
        notes.append("one epoch only: no steady epoch time" if len(records) == 1 and not budget_hit
                     else "no complete steady epoch: no steady epoch time")
    if s.warning:
        notes.append(s.warning)
    samples_per_s = batch / per_step
    return TrainMetrics(
        sync=mode, step_ahead=ahead or None, matmul_precision=getattr(trainer, "matmul_precision", None),
        compile_s=compile_s,
        first_step_s=records[0].step_times[0], first_epoch_s=records[0].time_s if records[0].complete else None,
        epoch_s=epoch_s, epochs_run=len(complete), steps_per_epoch=steps, budget_hit=budget_hit,
        budget_cut_steps=cut.steps_run if cut is not None else None, global_batch=batch, step_s=per_step,
        step_p90_s=s.p90, step_iqr_s=s.iqr, step_cv=s.cv, step_ci95_low_s=s.ci95_low, step_ci95_high_s=s.ci95_high,
        us_per_sample=per_step / batch * 1e6, samples_per_s=samples_per_s,
        epoch_samples_per_s=batch * steps / epoch_s if epoch_s else None, eval_s=summarize(eval_times).median,
        flops_per_sample=flops_per_sample, achieved_flops_per_s=flops_per_sample * samples_per_s,
        peak_memory_bytes=trainer.peak_memory(), final_loss=train_loss[-1], final_val_loss=val_loss[-1],
        final_metric=val_metric[-1], warning="; ".join(notes) or None,
    ).as_dict() | training_figures(energy, records, batch)
