"""The three example models (a torch CNN, a flax MLP, a Keras text CNN on keras:jax and keras:torch)
trained and run for inference on this machine, in one report:

    python docs/examples/your_models_report.py [FOLDER]      # about 5 min on 2 CPU cores

Each model's FLOPs are measured (torch FlopCounterMode, XLA cost analysis); every result names the
model (model_params, model_sha256, flops_method)."""

import sys
import tempfile
from pathlib import Path

import xpubench
from xpubench.plan import PlanRequest

EXAMPLES = Path(__file__).resolve().parent
MODELS = {"torch": "torch_models.py:small_cnn", "flax": "flax_models.py:mlp", "keras": "keras_models.py:text_cnn"}

folder = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="xpubench-models-"))
folder.mkdir(parents=True, exist_ok=True)
files = []
for name, model in MODELS.items():
    output = folder / f"{name}.jsonl"
    for result in xpubench.run(PlanRequest(model=str(EXAMPLES / model), modes=["train", "infer"], quick=True),
                               output=output, processes=1):
        c, m = result.case, result.metrics   # typed: a Case, and its mode's figures (None where not measured)
        flops = f"{m.flops_per_sample / 1e6:.2f}" if m.flops_per_sample is not None else "n/a"
        rate = f"{m.samples_per_s:,.0f}" if m.samples_per_s is not None else "n/a"
        print(f"{c.workload:10s} {c.backend:11s} {c.mode:5s} {result.status:5s} params {m.model_params}, "
              f"{flops} MFLOP/sample ({m.flops_method}), {rate} samples/s")
    files.append(output)
print("report:", xpubench.report(files, folder / "report.md"))
