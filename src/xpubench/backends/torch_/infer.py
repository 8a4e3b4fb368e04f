"""PyTorch inference on one device (the measurement itself is ``harness/inference.py``).

Precisions: ``fp32`` the trained model; ``bf16`` a bfloat16 copy (weights, activations and float
inputs in bf16, outputs cast to fp32 for scoring); ``fp16`` likewise in float16; ``tf32`` the fp32 model
with TF32 matmuls allowed; ``int8`` (``quant.py``, CPU only): static int8 for models with convolutions
(calibrated on the first training inputs), dynamic int8 for the others.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from xpubench.backends.torch_ import quant
from xpubench.backends.torch_.device import DTYPES, PeakMemory, placement, set_precision_mode, sync
from xpubench.harness.inference import NotApplicable, batch_count, check_int8_share, train_untimed
from xpubench.harness.memory import PeakMemoryFrom
from xpubench.harness.session import TrainedSession


def state_arrays(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """A float model's state_dict as {name: numpy array} (copies on the host)."""
    out = {}
    for name, t in model.state_dict().items():
        if not isinstance(t, torch.Tensor) or t.is_quantized or t.dtype not in (
                torch.float32, torch.float64, torch.int64, torch.int32, torch.bool):
            raise ValueError(f"{name}: only fp32 models are saved (got {getattr(t, 'dtype', type(t))})")
        out[name] = t.detach().cpu().numpy().copy()
    return out


def load_state_arrays(model: torch.nn.Module, arrays: dict[str, np.ndarray]) -> None:
    """Load {name: array} into ``model`` (strict: every name must match, shapes too)."""
    device = next(model.parameters()).device
    model.load_state_dict({k: torch.from_numpy(np.array(v)).to(device) for k, v in arrays.items()},
                          strict=True)


class TorchPredictor(PeakMemoryFrom):
    """The evaluation inputs padded to whole batches, on the device before any clock starts."""

    def __init__(self, model: torch.nn.Module, x: torch.Tensor, batch: int, device: torch.device,
                 dtype: torch.dtype | None = None):
        self.model, self.batch, self.device, self.n = model.eval(), batch, device, len(x)
        rows = batch_count(self.n, batch) * batch
        if rows > self.n:
            x = torch.cat([x, torch.zeros((rows - self.n, *x.shape[1:]), dtype=x.dtype, device=x.device)])
        if dtype is not None and x.is_floating_point():
            x = x.to(dtype)
        self.x = x
        self.memory = PeakMemory(device)
        sync(device)

    def compile(self):
        return None  # eager

    @torch.inference_mode()
    def predict(self, i: int):
        return self.model(self.x[i * self.batch:(i + 1) * self.batch])

    def sync(self, handle) -> None:
        sync(self.device)

    def host(self, handle) -> np.ndarray:
        return handle.float().cpu().numpy()

    def model_bytes(self) -> int:
        return quant.model_bytes(self.model)

    def placement(self) -> str:
        """Where a prediction's output lives (one untimed call)."""
        return placement(self.predict(0))


class TorchSession(TrainedSession):
    def make_trainer(self, case):
        from xpubench.backends.torch_.train import TorchTrainer

        return TorchTrainer(case)

    def host(self, array) -> np.ndarray:
        return array.cpu().numpy()

    def framework(self) -> str:
        return f"torch {torch.__version__}"

    def training_data(self) -> tuple[np.ndarray, ...]:
        return self.trainer.x.cpu().numpy(), self.trainer.y.cpu().numpy()

    def code_modules(self) -> tuple:
        from xpubench.backends.torch_ import train

        return (train,)

    def precheck(self, precision: str) -> None:
        if precision == "int8":
            if self.trainer.device.type != "cpu":
                raise NotApplicable(f"PyTorch's int8 kernels (fbgemm/x86) run on the CPU only, "
                                    f"not on {self.trainer.device}")
            quant.check_engine(self.trainer.model)
            int8, fp32, share = quant.quantizable(self.trainer.model)
            check_int8_share({"int8": int8, "fp32": fp32, "int8_param_fraction": share}, self.case.workload)
        elif precision not in DTYPES:
            raise NotApplicable(f"no inference path for precision {precision}")

    def train(self) -> dict[str, np.ndarray]:
        train_untimed(self.trainer, self.trainer.case)
        return state_arrays(self.trainer.model)

    def load(self, arrays: dict[str, np.ndarray]) -> None:
        load_state_arrays(self.trainer.model, arrays)

    def predictor(self, precision: str):
        t = self.trainer
        model = t.model.eval()
        set_precision_mode(precision)
        if precision == "int8":
            qmodel, report = quant.quantize(model, t.device, calibration=t.x, batch=t.batch)
            return TorchPredictor(qmodel, t.x_eval, t.batch, t.device), report
        if precision in ("bf16", "fp16"):
            dtype = DTYPES[precision]
            return TorchPredictor(copy.deepcopy(model).to(dtype), t.x_eval, t.batch, t.device, dtype), {}
        return TorchPredictor(model, t.x_eval, t.batch, t.device), {}  # fp32, tf32
