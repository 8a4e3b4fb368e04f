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
        m = result.metrics
        print(f"{result.case['workload']:10s} {result.case['backend']:11s} {result.case['mode']:5s} {result.status:5s} "
              f"params {m.get('model_params')}, {(m.get('flops_per_sample') or float('nan')) / 1e6:.2f} MFLOP/sample "
              f"({m.get('flops_method')}), {m.get('samples_per_s') or 0:,.0f} samples/s")
    files.append(output)
print("report:", xpubench.report(files, folder / "report.md"))
