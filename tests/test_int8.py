"""int8 inference: the quantizers, model sizes, and accuracy within 1 point of fp32 on real movie-review
polarity data after the same training, in both frameworks."""

from __future__ import annotations

import dataclasses
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_dataset
from quick_compile import QUICK_XLA_OPTIONS, quick_xla_one_test  # noqa: F401  (the fixture, used by name)

from xpubench.case import Case
from xpubench.harness.inference import NotApplicable, check_int8_share
from xpubench.results.store import load_file
from xpubench.workloads import get_workload

POLARITY = shared_dataset("rt-polarity")


def _tokens(spec, n, seed=0):
    return np.random.default_rng(seed).integers(0, spec.vocab_size, (n, *spec.input_shape)).astype(np.int32)


def _quick(fn, *args):
    """``jax.jit(fn)(*args)``, compiled with XLA's backend optimisation level 0 (tests/quick_compile.py):
    the same program and numbers, 4-5x less CPU to compile, for checks of what int8 computes, not how fast."""
    import jax

    return jax.jit(fn).lower(*args).compile(QUICK_XLA_OPTIONS)(*args)


def test_torch_dynamic_quantization() -> None:
    torch = pytest.importorskip("torch")
    from xpubench.backends.torch_ import quant

    wl = get_workload("imdb_lstm")
    spec = dataclasses.replace(wl.spec, input_shape=(30,))
    torch.manual_seed(0)
    model = wl.models["torch"](spec).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the deprecation notices are silenced, nothing else is
        qmodel, report = quant.quantize(model, torch.device("cpu"))
    assert report["int8"] == ["embed", "lstm", "fc"] and report["fp32"] == []
    assert report["int8_param_fraction"] > 0.99
    fp32_bytes, int8_bytes = quant.model_bytes(model), quant.model_bytes(qmodel)
    assert fp32_bytes == 533_701 * 4
    assert 0.25 < int8_bytes / fp32_bytes < 0.35   # int8 values + per-row/per-channel scales
    x = torch.from_numpy(_tokens(spec, 16))
    with torch.no_grad():
        diff = (model(x) - qmodel(x)).abs().max().item()
    assert diff < 0.02
    cnn = get_workload("mnist_cnn").models["torch"](get_workload("mnist_cnn").spec)
    int8, fp32, share = quant.quantizable(cnn)   # static scheme: convolutions too
    assert int8 == ["conv1", "conv2", "fc1", "fc2"] and fp32 == [] and share > 0.99


def test_torch_int8_refused_off_cpu() -> None:
    torch = pytest.importorskip("torch")
    from xpubench.backends.torch_ import quant

    with pytest.raises(NotApplicable, match="CPU only"):
        quant.quantize(torch.nn.Linear(2, 2), torch.device("meta"))
    if "qnnpack" in torch.backends.quantized.supported_engines:   # static int8 is x86-only here
        engine = torch.backends.quantized.engine
        torch.backends.quantized.engine = "qnnpack"
        try:
            with pytest.raises(NotApplicable, match="x86 quantized engine"):
                quant.check_engine(torch.nn.Conv2d(1, 1, 1))
            quant.check_engine(torch.nn.Linear(2, 2))     # dynamic int8 runs on qnnpack too
        finally:
            torch.backends.quantized.engine = engine


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["mnist_cnn", "cifar10_resnet"])
def test_torch_static_int8_convolutions(workload) -> None:
    """Models with convolutions: FX static int8, every conv and linear quantized, batch norm folded,
    calibrated on the inputs given (the caller passes training inputs)."""
    torch = pytest.importorskip("torch")
    from torch.ao.nn import quantized as nnq

    from xpubench.backends.torch_ import quant

    wl = get_workload(workload)
    torch.manual_seed(0)
    model = wl.models["torch"](wl.spec).eval().to(memory_format=torch.channels_last)  # as trained
    x = torch.rand(320, *wl.spec.input_shape, generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="calibration"):
        quant.quantize(model, torch.device("cpu"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the deprecation notices are silenced, nothing else is
        qmodel, report = quant.quantize(model, torch.device("cpu"), calibration=x[:256], batch=64)
    assert report["calibration_samples"] == 256 and "quantize_fx static" in report["method"]
    convs = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]
    linears = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    assert report["int8"] == convs + linears and report["fp32"] == [] and report["int8_param_fraction"] > 0.99
    # the converted graph holds int8 conv/linear modules (ConvReLU2d is a quantized Conv2d) and no float
    # conv, linear or batch norm (folded into the convolutions)
    assert [n for n, m in qmodel.named_modules() if isinstance(m, nnq.Conv2d)] == convs
    assert [n for n, m in qmodel.named_modules() if isinstance(m, nnq.Linear)] == linears
    assert not any(isinstance(m, (torch.nn.Conv2d, torch.nn.Linear, torch.nn.BatchNorm2d))
                   for m in qmodel.modules())
    assert qmodel.get_submodule(convs[-1]).weight().dtype == torch.qint8
    assert "quantize_per_tensor" in qmodel.code    # the input is quantized once, the graph runs int8
    ratio = quant.model_bytes(qmodel) / quant.model_bytes(model)
    assert 0.24 < ratio < 0.28, ratio               # int8 weights + fp32 biases and scales
    with torch.inference_mode():
        ref, out = model(x[256:]), qmodel(x[256:])   # inputs the calibration did not see
    assert out.dtype == torch.float32 and out.shape == ref.shape
    rel = ((out - ref).norm() / ref.norm()).item()
    assert rel < 0.05, rel                          # measured 1.6% (mnist_cnn), 2.1% (resnet)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_cifar10_resnet_int8_case_runs(backend, tmp_path) -> None:
    """The inference case end to end (it used to be recorded as skipped: int8 covered 0.2%): 2 training
    steps on synthetic data, so only the structure and the size mean anything. Batches of 8, not 32
    (nothing asserted depends on it): the inference measurement's fixed minimum of calls (first call, 2
    warm-up, 5 latency calls, a pass, and the fp32 reference) each predict one batch or more (the JAX case
    took 71 s at batch 32 under load, 24-27 s at batch 8; compiling it unoptimised, as quick_xla_one_test, made no
    difference: 42.6 CPU s for the test alone either way)."""
    pytest.importorskip(backend)
    from xpubench.launch.dispatch import run_case

    out = run_case(Case(workload="cifar10_resnet", backend=backend, device="cpu", mode="infer", precision="int8",
                        batch_size=8, epochs=1, steps=2, train_samples=64, eval_samples=40, time_budget_s=0.3,
                        options={"weights_dir": str(tmp_path)}))
    assert out.status == "ok", out.message
    m = out.metrics
    assert m["predictions"] == 40 and m["samples_per_s"] > 0
    assert "blocks_8" in m["int8_layers"].replace(".", "_") and m["int8_param_fraction"] > 0.99
    assert 0.25 < m["size_ratio"] < 0.27, m["size_ratio"]
    assert abs(m["accuracy_delta"]) <= 0.1          # 40 samples, untrained: a loose sanity bound


MNIST = shared_dataset("mnist")


@pytest.mark.slow
@pytest.mark.skipif(not MNIST.is_dir(), reason="../shared/datasets/mnist is not beside the checkout")
def test_torch_int8_mnist_cnn_agrees_with_fp32(tmp_path, request) -> None:
    """The inference session's own path on real MNIST (8,000 training / 2,000 test images of the shared
    test split): one epoch of fp32 training, int8 calibrated on the training images, then fp32 and int8
    predict the 2,000 test images."""
    torch = pytest.importorskip("torch")
    from torch.ao.nn import quantized as nnq

    from xpubench.backends.torch_.infer import TorchSession
    from xpubench.harness.inference import predict_all, score

    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # shared 2-core machines: see the polarity test below
    request.addfinalizer(lambda: torch.set_num_threads(threads))
    case = Case(workload="mnist_cnn", backend="torch", device="cpu", mode="infer", precision="int8",
                batch_size=256, epochs=1, data="real", data_dir=str(MNIST))
    session = TorchSession(case)
    session.precheck("int8")
    session.train()
    fp32, _ = session.predictor("fp32")
    int8, report = session.predictor("int8")
    assert sum(isinstance(m, nnq.Conv2d) for m in int8.model.modules()) == 2
    assert report["calibration_samples"] == 1024
    assert int8.model_bytes() < 0.3 * fp32.model_bytes()
    ref, out = predict_all(fp32), predict_all(int8)
    assert len(out) == 2000
    agree = float((ref.argmax(1) == out.argmax(1)).mean())
    assert agree >= 0.97, agree                 # measured 99.05%
    (_, acc32), (_, acc8) = score(session.spec, ref, session.y_eval), score(session.spec, out, session.y_eval)
    assert acc32 > 0.8, acc32                   # one epoch on 8,000 images: 86.05% measured
    assert abs(acc8 - acc32) <= 0.01, (acc8, acc32)


@pytest.mark.usefixtures("quick_xla_one_test")
@pytest.mark.slow
def test_jax_quantize_rows_and_apply() -> None:
    jax = pytest.importorskip("jax")
    from xpubench.backends.jax_ import quant

    w = np.random.default_rng(1).normal(size=(32, 8)).astype(np.float32)
    q, s = quant.quantize_rows(w, axis=0)
    assert q.dtype == np.int8 and s.shape == (8,) and np.abs(q).max() == 127
    assert np.all(np.abs(q * s - w) <= s / 2 + 1e-7)
    wl = get_workload("imdb_lstm")
    spec = dataclasses.replace(wl.spec, input_shape=(30,))
    model = wl.models["jax"](spec)
    x = _tokens(spec, 16)
    params = _quick(model.init, jax.random.key(0), x[:1])["params"]
    qparams, report = quant.quantize_params(params)
    assert sorted(report["int8"]) == ["embed", "fc", "lstm_l0/cell/hidden", "lstm_l0/cell/input"]
    assert qparams["lstm_l0"]["cell"]["input"]["kernel"].dtype == np.int8
    fp32_bytes = sum(a.nbytes for a in jax.tree.leaves(params))
    int8_bytes = sum(a.nbytes for a in jax.tree.leaves(qparams))
    assert fp32_bytes == 533_701 * 4 and 0.25 < int8_bytes / fp32_bytes < 0.32
    ref = _quick(model.apply, {"params": params}, x)
    for mode in quant.MODES:
        out = _quick(quant.int8_apply(model, mode), qparams, {}, x)
        assert float(np.abs(np.asarray(out) - np.asarray(ref)).max()) < 0.02, mode


@pytest.mark.usefixtures("quick_xla_one_test")
@pytest.mark.slow
@pytest.mark.parametrize("workload", ["mnist_cnn", "cifar10_resnet"])
def test_jax_int8_convolutions(workload) -> None:
    """flax convolutions: int8 kernels with one scale per output channel, run as an int8 x int8 -> int32
    lax.conv_general_dilated (dynamic) or dequantized to fp32 (weight_only); batch norm stays fp32."""
    jax = pytest.importorskip("jax")
    from xpubench.backends.jax_ import quant

    wl = get_workload(workload)
    model = wl.models["jax"](wl.spec)
    x = np.random.default_rng(2).random((16, *wl.spec.input_shape), dtype=np.float32)
    variables = _quick(model.init, jax.random.key(0), x[:1])
    params, extra = variables["params"], {k: v for k, v in variables.items() if k != "params"}
    qparams, report = quant.quantize_params(params)
    assert "conv1" in report["int8"] and report["int8_param_fraction"] > 0.99
    assert all("bn" in layer for layer in report["fp32"])          # resnet's batch norm, nothing else
    conv = qparams["conv1"]
    assert conv["kernel"].dtype == np.int8 and conv["kernel_scale"].shape == (conv["kernel"].shape[-1],)
    ratio = sum(a.nbytes for a in jax.tree.leaves(qparams)) / sum(a.nbytes for a in jax.tree.leaves(params))
    assert 0.25 < ratio < 0.26, ratio                              # int8 + fp32 scales, biases and BN
    apply = quant.int8_apply(model, "dynamic")
    jaxpr = str(jax.make_jaxpr(apply)(qparams, extra, x))
    assert "conv_general_dilated" in jaxpr and "preferred_element_type=int32" in jaxpr
    ref = np.asarray(_quick(model.apply, variables, x))
    for mode in quant.MODES:
        out = np.asarray(_quick(quant.int8_apply(model, mode), qparams, extra, x))
        rel = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
        assert rel < 0.03, (mode, rel)                             # measured 0.4-0.9%


@pytest.mark.usefixtures("quick_xla_one_test")
@pytest.mark.slow
def test_jax_int8_refuses_layers_without_an_int8_version() -> None:
    """A kernel quantized by quantize_params but read by a layer with no int8 version must not run as fp32."""
    jax = pytest.importorskip("jax")
    import flax.linen as nn

    from xpubench.backends.jax_ import quant

    model = nn.ConvTranspose(4, (3, 3))
    x = np.ones((2, 8, 8, 3), np.float32)
    qparams, report = quant.quantize_params(_quick(model.init, jax.random.key(0), x)["params"])
    assert report["int8"] == [""]
    with pytest.raises(NotImplementedError, match="no int8 version"):
        quant.int8_apply(model)(qparams, {}, x)


def test_int8_share_rule() -> None:
    pytest.importorskip("jax")
    from xpubench.backends.jax_ import quant

    # a layer int8 does not cover (a norm's scale) holding most of the parameters: recorded as skipped
    params = {"norm": {"scale": np.ones(4096, np.float32)}, "fc": {"kernel": np.ones((16, 2)), "bias": np.zeros(2)}}
    _, report = quant.quantize_params(params)
    assert report["int8"] == ["fc"] and report["fp32"] == ["norm"]
    with pytest.raises(NotApplicable, match="int8 covers only 0.8%"):
        check_int8_share(report, "some_model")


# epochs to a non-trivial fp32 accuracy (measured: torch at Adam's 1e-3 66% after 5, 69% after 6; flax 71%
# after 2, 73% after 3 -- flax's LSTM initialisation learns faster here). JAX trains 2: 71.20% fp32, int8
# +0.00 pt in this test (deterministic at its seed 0), 6 points above its limit; a third epoch cost ~1/3 of
# its CPU. Torch trains 3 epochs at learning rate 3e-3: 68.57% fp32, int8 -0.05 pt (3.6 points above its
# limit, as 6 epochs at 1e-3 were: 68.81%, -0.14 pt), 18.9 CPU s instead of 36.6 (at 2e-3: 66.79%, 21.0 s;
# at batch 32 and 1e-3: 64.63% after 3 epochs, 66.79% after 4 for 26.5 s)
EPOCHS = {"torch": 3, "jax": 2}
LEARNING_RATE = {"torch": 3e-3, "jax": 1e-3}   # Adam's; 1e-3 is the workload's own


def _polarity_case(backend: str, precision: str, tmp: Path) -> Case:
    return Case(workload="imdb_lstm", backend=backend, device="cpu", mode="infer", precision=precision,
                batch_size=64, epochs=EPOCHS[backend], data="real", data_dir=str(POLARITY), time_budget_s=0.5,
                options={"weights_dir": str(tmp)})


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_int8_accuracy_on_real_polarity_data(backend, tmp_path, monkeypatch, request) -> None:
    """rt-polarity (10,662 sentences, 8,530 train / 2,132 test): fp32 training, then fp32 and int8 on the
    same test sentences.

    Sequence length 52, not the workload's 250: the longest rt-polarity sentence is 52 tokens as loaded
    (51 words + the start token; median 20), so at 250 every sentence carries at least 198 tokens of
    leading padding -- the same sentences and the same information, ~5x the LSTM steps, most of them on
    padding, and ~5x the test's time (torch trains 127 s at 250 on one thread).
    It keeps this test to tens of seconds. The CLI's default 250 meets "int8 within 1 point" as well,
    measured once with 6 / 3 epochs (torch / JAX), batch 64: torch fp32 68.86% -> int8 68.81%
    (-0.05 pt), JAX 73.17% -> 73.22% (+0.05 pt); docs/inference.md has those and the CLI's own run."""
    pytest.importorskip(backend)
    if not POLARITY.is_dir():
        pytest.skip(f"no {POLARITY}")
    from xpubench.launch.dispatch import run_case
    from xpubench.workloads import imdb_lstm

    # 52 = longest sentence + start token: no sentence is cut, only padding is dropped (docstring). The
    # trainers read the spec from the workload's record (get_workload reads the module's WORKLOAD); the
    # learning rate is the backend's (LEARNING_RATE): the fewest epochs to a clear margin over 65%
    short = dataclasses.replace(imdb_lstm.SPEC, input_shape=(52,), learning_rate=LEARNING_RATE[backend])
    monkeypatch.setattr(imdb_lstm, "WORKLOAD", dataclasses.replace(imdb_lstm.WORKLOAD, spec=short))
    if backend == "torch":
        # one thread: 2 OpenMP threads on 2 cores shared with other jobs stall 2-10x; the accuracies
        # do not depend on it (the LSTM's trained weights are bit-identical with 1 and 2 threads)
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        request.addfinalizer(lambda: torch.set_num_threads(threads))
    out = run_case(_polarity_case(backend, "int8", tmp_path))
    assert out.status == "ok", out.message
    m = out.metrics
    assert m["forward_flops_per_sample"] == imdb_lstm.forward_flops(short)   # trained and run at length 52
    assert m["eval_samples"] == m["predictions"] == 2132
    assert m["fp32_accuracy"] > 0.65, m["fp32_accuracy"]      # the training learned something
    assert abs(m["accuracy_delta"]) <= 0.01, m["accuracy_delta"]
    assert m["size_ratio"] < 0.35


def _bytes(size: str) -> float:
    """'653.2 KiB (31%)' -> bytes, as the inference table prints a model size."""
    value, unit = size.split()[:2]
    return float(value) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[unit]


@pytest.mark.slow
def test_cli_inference_table_fp32_bf16_int8(tmp_path, one_thread_workers, detected_once, monkeypatch, capsys) -> None:
    """`xpubench run -w imdb_lstm --precision fp32,bf16,int8` end to end on the smallest settings (2 training
    steps of batch 16, 16 synthetic test samples: one batch, for the LSTM's 250 steps are slow on a CPU,
    bf16 most of all, and inference runs its minimum number of calls whatever the budget): the printed
    summary has one row per precision; the inference table of its results file has each with the model
    size, samples/s and accuracy side by side, and int8 is the smallest. The command runs in this process
    (``cli.main``, the machine detected once: ``detected_once``); each case runs in its own worker process,
    one thread each (``one_thread_workers``): two OpenMP threads spinning on 2 shared cores cost ~20 s more
    CPU here."""
    pytest.importorskip("torch")
    from xpubench import cli

    monkeypatch.setenv("COLUMNS", "220")
    monkeypatch.setenv("XPUBENCH_WEIGHTS_DIR", str(tmp_path / "w"))
    out = tmp_path / "r.jsonl"
    code = cli.main(["run", "--processes", "1", "-w", "imdb_lstm", "-b", "torch", "--precision", "fp32,bf16,int8",
                     "--mode", "infer", "--epochs", "1", "--steps", "2", "--batch-size", "16", "--train-samples", "32",
                     "--eval-samples", "16", "--time-budget", "0.2", "--no-progress", "-o", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    stdout = printed.out
    part = stdout.split("Summary on cpu")[1].split("\n± half")[0].splitlines()
    table = part[next(i for i, line in enumerate(part) if line.startswith("──")) + 1:]   # the summary's rows
    rows = [line.split() for line in table if "infer" in line]
    assert table[0].split()[:2] == ["imdb_lstm", "samples/s"] and len(rows) == 3, stdout
    assert sorted(word for line in rows for word in line if word in ("fp32", "bf16", "int8")) == \
        ["bf16", "fp32", "int8"], stdout
    from xpubench.report.base.frame import results_frame
    from xpubench.report.tables.cases import inference_table

    table = inference_table(results_frame(load_file(out))).frame()  # the table --verbose and the report show
    rows = {row["dtype"]: row for row in table.to_dict("records")}
    assert set(rows) == {"fp32", "bf16", "int8"}, table
    for row in rows.values():
        assert float(row["samples/s"].replace(",", "")) > 0
        assert 0 <= float(row["accuracy"]) <= 1
    assert _bytes(rows["int8"]["model size"]) < 0.4 * _bytes(rows["fp32"]["model size"])
    assert _bytes(rows["bf16"]["model size"]) == pytest.approx(_bytes(rows["fp32"]["model size"]) / 2, rel=0.01)
    assert re.fullmatch(r"[+-]\d\.\d{4}", rows["int8"]["Δ vs fp32"]) and rows["fp32"]["Δ vs fp32"] == "-"
    assert rows["int8"]["x fp32"].endswith("x") and rows["fp32"]["x fp32"] == "-"
    results = {r.case.precision: r for r in load_file(out).results}
    assert results["int8"].metrics["model_bytes"] < results["fp32"].metrics["model_bytes"]
    assert len({r.metrics["weights_sha256"] for r in results.values()}) == 1   # the same trained weights
