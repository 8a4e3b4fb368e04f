"""What the harness adds to a timed training step (issue 53, item 9), pinned by the order of what runs, not by
timing: on a CPU a trainer that dispatches ahead (JAX) runs its steady epochs one step ahead, so the device never
waits for the host's clock reads and launches between steps; the loss is read after an epoch, never inside it;
a torch step dispatches the ops a hand-written step does (no label cast). Fake device and clock for the
harness's rules; the real torch and JAX trainers for their side of it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from quick_compile import unoptimised_jax
from test_stats_timing import FakeClock, FakeDevice, train_case

from xpubench.harness.training import run_training
from xpubench.workloads import with_identity

TINY_GPT = {"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 32}


class QueuedDevice(FakeDevice):
    """FakeDevice whose sync waits for one step alone (as JAX's ``block_until_ready`` on a step's loss does),
    logging every launch, wait and loss read in order."""

    dispatches_ahead = True

    def __init__(self, *args):
        super().__init__(*args)
        self.ends, self.trace = {}, []

    def step(self, i):
        handle = super().step(i)
        self.ends[handle] = self.free_at
        self.trace.append(("step", handle))
        return handle

    def sync(self, handle):
        self.syncs.append((self.epoch, handle))
        self.trace.append(("sync", handle))
        self.clock.now = max(self.clock.now, self.ends[handle])

    def loss_value(self, handle):
        self.trace.append(("loss", handle))
        return super().loss_value(handle)


def _epoch(trace, handles):
    return [event for event in trace if event[1] in handles and event[0] != "loss"]


def _one_ahead(handles):
    first, *rest = handles
    out = [("step", first)]
    for previous, handle in zip(handles, rest):
        out += [("step", handle), ("sync", previous)]
    return out + [("sync", handles[-1])]


def _synchronised(handles):
    return [event for h in handles for event in (("step", h), ("sync", h))]


def test_steady_steps_run_one_ahead_on_a_cpu_when_the_trainer_dispatches_ahead():
    clock = FakeClock()
    dev = QueuedDevice(clock, 0.001, 0.004)   # a launch costs the host 1 ms, a step the device 4 ms
    out = run_training(dev, train_case(options={"sync": "step"}), 100.0, clock=clock)
    # the first epoch: each step waited for alone before the next is launched (first_step_s: one step)
    assert _epoch(dev.trace, range(1, 6)) == _synchronised([1, 2, 3, 4, 5])
    # later epochs: step k+1 is queued before the host waits for step k
    assert _epoch(dev.trace, range(6, 11)) == _one_ahead([6, 7, 8, 9, 10])
    assert _epoch(dev.trace, range(11, 16)) == _one_ahead([11, 12, 13, 14, 15])
    m = out.metrics
    assert m["sync"] == "step" and m["step_ahead"] is True and m["first_step_s"] == pytest.approx(0.005)
    assert m["first_epoch_s"] == pytest.approx(5 * 0.005)
    # one launch, then the device's steps back to back, as a pipelined epoch; still one sample per step, each
    # from the end of the step before it (the first: from the epoch's start, its launch included)
    assert m["epoch_s"] == pytest.approx(0.001 + 5 * 0.004)
    assert out.samples["step_s"] == pytest.approx([0.005, 0.004, 0.004, 0.004, 0.004] * 2)
    assert m["step_s"] == pytest.approx(0.004)


def test_losses_are_read_after_their_epoch_never_inside_it():
    clock = FakeClock()
    dev = QueuedDevice(clock, 0.001, 0.004)
    run_training(dev, train_case(options={"sync": "step"}), 100.0, clock=clock)
    for first in (1, 6, 11):
        handles = range(first, first + 5)
        at = [i for i, (kind, h) in enumerate(dev.trace) if h in handles]
        reads = [i for i in at if dev.trace[i][0] == "loss"]
        assert len(reads) == 5 and min(reads) > max(i for i in at if dev.trace[i][0] != "loss")


@pytest.mark.parametrize("kw", [{"device": "gpu:0"}, {}])
def test_each_step_is_waited_for_alone_on_an_accelerator_or_without_dispatching_ahead(kw):
    """step mode on an accelerator keeps its meaning, every step synchronised (torch can only wait for the whole
    device there); so does a trainer that does not dispatch ahead (torch on a CPU: a step returns when done)."""
    clock = FakeClock()
    dev = QueuedDevice(clock, 0.001, 0.004)
    if not kw:
        dev.dispatches_ahead = False
    out = run_training(dev, train_case(options={"sync": "step"}, **kw), 100.0, clock=clock)
    assert _epoch(dev.trace, range(6, 16)) == _synchronised(list(range(6, 16)))
    assert out.metrics["step_s"] == pytest.approx(0.005) and out.metrics["epoch_s"] == pytest.approx(0.025)
    assert "step_ahead" not in out.metrics   # the variant is labelled only where it ran


def test_a_budget_cut_measures_every_step_it_launched_when_running_ahead():
    clock = FakeClock()
    dev = QueuedDevice(clock, 0.0, 1.0, 10)
    # epoch 1: 10 s (+1 s evaluation); the budget runs out 3 steps into epoch 2, as a synchronised epoch's does
    out = run_training(dev, train_case(epochs=5, time_budget_s=12.5, options={"sync": "step"}), 1.0, clock=clock)
    m = out.metrics
    assert m["step_ahead"] is True and dev.steps_run == 13 and m["budget_hit"]
    assert m["budget_cut_steps"] == 3 and m["epochs_run"] == 1
    assert out.samples["step_s"] == pytest.approx([1.0, 1.0, 1.0])
    assert _epoch(dev.trace, range(11, 14)) == _one_ahead([11, 12, 13])


def test_compare_names_a_run_ahead_side():
    """A step-mode result run one step ahead against one waited for step by step (JAX on a CPU before issue 53):
    compare lists the difference, as it does a different --sync."""
    import report_runs as runs

    from xpubench.report.compare import compare_files

    base = Path(__file__).parent / "data" / "runs" / "default-zen3.jsonl"   # recorded: one training case in step mode

    def ahead(record):
        if record.get("metrics", {}).get("sync") == "step":
            record["metrics"]["step_ahead"] = True
        return record

    [comparison] = compare_files(base, runs.rewritten(base, "ahead.jsonl", ahead))
    [line] = [c for c in comparison.cases if c.startswith("steps run one ahead")]
    assert "None (A) vs True (B)" in line


def test_the_allocators_settings_are_recorded_and_shown(monkeypatch):
    """glibc's trim and mmap thresholds decide how much of a CPU step is page faults (with trimming off, the
    mnist_cnn torch step's CPU time halved on the 2-core VM): a result records them, and a preloaded
    allocator, as it records the thread counts."""
    from xpubench.backends.fingerprint import fingerprint
    from xpubench.report.tables.environment import summarize_fingerprint

    settings = {"MALLOC_TRIM_THRESHOLD_": "4294967296", "MALLOC_MMAP_THRESHOLD_": "33554432",
                "MALLOC_TOP_PAD_": "268435456", "MALLOC_ARENA_MAX": "2",
                "GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1", "LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    fp = fingerprint({})
    assert {k: fp["env"][k] for k in settings} == settings
    assert {k: v for k, v in summarize_fingerprint(fp).items() if k in settings} == settings


class Ops:
    """The aten ops dispatched inside the block, counted (torch's dispatch mode: below autograd, so a
    backward pass's ops are in it too)."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        ops = self.ops = Counter()

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                ops[str(func)] += 1
                return func(*args, **(kwargs or {}))

        self.mode = Mode()

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)


@pytest.mark.parametrize("workload, options", [("mnist_cnn", {}),
                                               pytest.param("gpt", TINY_GPT, marks=pytest.mark.slow)])  # ~5 s
def test_a_torch_step_dispatches_the_ops_of_a_hand_written_step(workload, options):
    """The harness's torch step against benchmarks/*_overhead.py's loop on the same model and optimizer: the
    same aten ops, plus the detach of the loss it keeps for after the epoch; no label cast (labels are int64
    before any clock) and no copy."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from xpubench.backends.torch_.train import TorchTrainer
    from xpubench.case import Case

    case = with_identity(Case(workload=workload, backend="torch", device="cpu", mode="train", batch_size=4,
                              train_samples=8, eval_samples=4, epochs=1, steps=2, options=options))
    trainer = TorchTrainer(case)
    trainer.start_epoch(0)
    trainer.step(0)   # the optimizer's state exists before either is counted
    rows, labels = trainer.batch_slice(1), trainer.y.long()   # the hand loop casts its labels once, untimed
    with Ops() as harness:
        trainer.step(1)
    with Ops() as hand:
        x, y = trainer.x[rows], labels[rows]
        trainer.opt.zero_grad(set_to_none=True)
        logits = trainer.model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        trainer.opt.step()
    assert harness.ops - hand.ops == Counter({"aten.detach.default": 1}) and not hand.ops - harness.ops
    assert trainer.y.dtype == torch.int64


@pytest.mark.slow   # compiles a one-layer gpt's train step (~2 s of CPU)
def test_the_jax_trainer_runs_its_steady_steps_one_ahead_on_a_cpu():
    pytest.importorskip("jax")
    from xpubench.backends.jax_.train import JaxTrainer
    from xpubench.case import Case

    case = with_identity(Case(workload="gpt", backend="jax", device="cpu", mode="train", batch_size=2,
                              train_samples=8, eval_samples=2, epochs=2, steps=4, options=TINY_GPT))
    with unoptimised_jax():
        trainer = JaxTrainer(case)
        trace, handles = [], []
        step, sync, loss_value = trainer.step, trainer.sync, trainer.loss_value

        def logged_step(i):
            handles.append(step(i))
            trace.append(("step", len(handles)))
            return handles[-1]

        def index(handle):
            return next(n for n, h in enumerate(handles, 1) if h is handle)

        trainer.step = logged_step
        trainer.sync = lambda handle: trace.append(("sync", index(handle))) or sync(handle)
        trainer.loss_value = lambda handle: trace.append(("loss", index(handle))) or loss_value(handle)
        out = run_training(trainer, case, 1.0)
    assert out.metrics["sync"] == "step" and len(out.samples["step_s"]) == 4
    assert [e for e in trace if e[1] <= 4 and e[0] != "loss"] == _synchronised([1, 2, 3, 4])
    steady = [e for e in trace if e[1] > 4]
    assert [e for e in steady if e[0] != "loss"] == _one_ahead([5, 6, 7, 8])
    assert [e[0] for e in steady[-4:]] == ["loss"] * 4   # read after the epoch's last wait
