"""One adapter per framework around a user's model, in the worker (load.py): the builder the backend's
trainer and inference session call (``builder``, registered under the model family ``family``), one
forward pass for the checks, the parameter count and the FLOP count.

Every adapter: ``forward(x)`` -> the model's raw output for a numpy batch (eval mode, no gradients);
``use(pick)`` makes every later output the logits (outputs.Pick); ``to_numpy(logits)``; ``params()``;
``flops()`` -> (forward FLOPs of one sample or None, how). The FLOPs of a torch model are counted on the
case's device, as the model runs there (the attention kernel differs between CPU and GPU).
"""

from __future__ import annotations

import inspect

import numpy as np

from xpubench.errors import UserError
from xpubench.usermodel import flops
from xpubench.usermodel.outputs import Pick


def _one_sample(spec) -> np.ndarray:
    from xpubench.data import synthetic

    return synthetic(spec, 1, 0).x_train


class TorchAdapter:
    family = "torch"

    def __init__(self, model, spec, case):
        self.model, self.spec, self.case = model, spec, case

    def builder(self, spec):
        return self.model

    def forward(self, x: np.ndarray):
        import torch

        with _evaluating(self.model), torch.no_grad():
            return self.model(torch.from_numpy(x))

    def use(self, pick: Pick, output) -> None:
        """Wrap the model so that it returns the logits (the trainers and sessions call it as a module)."""
        import torch

        if pick.kind == "itself":
            return

        class Logits(torch.nn.Module):
            """The user's model (``inner``), its output reduced to the logits."""

            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return pick(self.inner(x))

        self.model = Logits(self.model)

    @staticmethod
    def to_numpy(logits) -> np.ndarray:
        return logits.detach().float().cpu().numpy()

    def params(self) -> int:
        return int(sum(p.numel() for p in self.model.parameters() if p.requires_grad))

    def flops(self):
        import torch

        from xpubench.backends.torch_.device import torch_device

        device = torch_device(self.case.device)
        self.model.to(device)
        x1 = torch.from_numpy(_one_sample(self.spec)).to(device)
        with _evaluating(self.model):
            return flops.torch_flops(lambda: self.model(x1), self.model)


class _evaluating:
    """A torch module in eval mode for the duration, its own mode back afterwards."""

    def __init__(self, module):
        self.module, self.training = module, module.training

    def __enter__(self):
        self.module.eval()

    def __exit__(self, *exc):
        self.module.train(self.training)


class FlaxAdapter:
    """A linen module, wrapped so that it takes the trainers' ``train`` flag: passed on as ``train`` or
    as ``deterministic=not train`` when its ``__call__`` has that parameter, else not at all; and so that
    it returns the logits of its output (outputs.pick_logits, decided on the output's structure)."""

    family = "jax"

    def __init__(self, model, spec, case):
        import flax.linen as nn
        import jax

        from xpubench.usermodel.outputs import pick_logits

        parameters = inspect.signature(type(model).__call__).parameters
        flag = "train" if "train" in parameters else "deterministic" if "deterministic" in parameters else None

        class YourModel(nn.Module):
            inner: nn.Module
            logits_only: bool = True

            @nn.compact
            def __call__(self, x, train: bool = False):
                if flag == "train":
                    out = self.inner(x, train=train)
                elif flag == "deterministic":
                    out = self.inner(x, deterministic=not train)
                else:
                    out = self.inner(x)
                pick = pick_logits(out) if self.logits_only else None
                return pick(out) if pick else out

        self.wrapper, self.raw = YourModel(inner=model), YourModel(inner=model, logits_only=False)
        self.spec, self.key, self.variables = spec, jax.random.key(case.seed), None

    def builder(self, spec):
        return self.wrapper

    def _init(self, x):
        import jax

        if self.variables is None:
            params_key, dropout_key = jax.random.split(self.key)
            init = jax.jit(lambda rngs, x: self.wrapper.init(rngs, x, train=False))   # one program, not op by op
            self.variables = init({"params": params_key, "dropout": dropout_key}, x)
        return self.variables

    def forward(self, x: np.ndarray):
        return self.raw.apply(self._init(x), x, train=False)

    def use(self, pick: Pick, output) -> None:
        """Nothing to do: the wrapper takes the logits itself."""

    @staticmethod
    def to_numpy(logits) -> np.ndarray:
        return np.asarray(logits, dtype=np.float32)

    def params(self) -> int:
        import jax

        return int(sum(np.size(a) for a in jax.tree.leaves(self.variables["params"])))

    def flops(self):
        x1 = _one_sample(self.spec)
        return flops.xla_flops(lambda v, x: self.wrapper.apply(v, x, train=False), self._init(x1), x1)


class KerasAdapter:
    family = "keras"

    def __init__(self, model, spec, case):
        from xpubench.backends.keras_.device import KerasDevice, import_keras, keras_backend_of

        self.keras = import_keras(keras_backend_of(case))
        self.device = KerasDevice(self.keras, self.keras.backend.backend(), case.device)
        self.model, self.spec = model, spec

    def builder(self, spec):
        return self.model

    def forward(self, x: np.ndarray):
        with self.device.scope():
            return self.model(x, training=False)

    def use(self, pick: Pick, output) -> None:
        """Keras's fit and predict take the model's output as it is: it must be the logits."""
        if pick.kind != "itself":
            raise UserError(f"Keras's fit takes a model's output as it is, and this model returns "
                            f"{type(output).__name__}, not a tensor: build one whose only output is the logits "
                            f"(for a functional model: keras.Model(model.inputs, the logits output))")

    def to_numpy(self, logits) -> np.ndarray:
        return np.asarray(self.keras.ops.convert_to_numpy(logits), dtype=np.float32)

    def params(self) -> int:
        return int(sum(np.prod(v.shape) for v in self.model.trainable_weights))

    def flops(self):
        with self.device.scope():
            return flops.keras_flops(self.keras, self.model, _one_sample(self.spec))


ADAPTERS = {"torch": TorchAdapter, "flax": FlaxAdapter, "keras": KerasAdapter}
