"""A plain eager PyTorch training loop (SGD, no compile) behind the harness's Trainer protocol
(xpubench/harness/training.py): the harness times it like any framework's. Its SGD step is written out
(``p -= lr * grad``): torch.optim's ``step`` imports torch._dynamo on its first call (~1.7 s of CPU in each
worker), which a loop this plain does not need."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from xpubench.harness.setup import training_setup
from xpubench.workloads import get_workload


class PlainTrainer:
    def __init__(self, case, backend):
        setup = training_setup(case)
        self.spec, self.flops_per_sample = setup.spec, setup.flops_per_sample
        self.global_batch, self.steps_per_epoch = setup.global_batch, setup.steps_per_epoch
        torch.manual_seed(case.seed)
        self.model = backend.build(get_workload(case.workload), self.spec, case.backend)
        self.params, self.learning_rate = list(self.model.parameters()), setup.learning_rate
        self.x, self.y = torch.from_numpy(setup.x_train), torch.from_numpy(setup.y_train).long()
        self.x_eval, self.y_eval = torch.from_numpy(setup.x_eval), torch.from_numpy(setup.y_eval).long()

    def compile(self) -> None:
        return None                             # eager: nothing compiled

    def start_epoch(self, epoch: int) -> None:
        self.model.train()

    def step(self, i: int) -> torch.Tensor:
        b = slice(i * self.global_batch, (i + 1) * self.global_batch)
        for p in self.params:
            p.grad = None
        loss = F.cross_entropy(self.model(self.x[b]), self.y[b])
        loss.backward()
        with torch.no_grad():
            for p in self.params:
                p.add_(p.grad, alpha=-self.learning_rate)
        return loss.detach()

    def sync(self, handle) -> None:
        return None                             # CPU eager ops finish before they return

    def loss_value(self, handle) -> float:
        return float(handle)

    def evaluate(self) -> tuple[float, float]:
        self.model.eval()
        with torch.no_grad():
            logits = self.model(self.x_eval)
        return float(F.cross_entropy(logits, self.y_eval)), float((logits.argmax(1) == self.y_eval).float().mean())

    def placement(self) -> str:
        return "cpu"

    def peak_memory(self) -> None:
        return None                             # no counter: n/a

    def predict_eval(self):
        with torch.no_grad():
            probs = torch.softmax(self.model(self.x_eval), 1).numpy()
        return self.x_eval.numpy(), self.y_eval.numpy(), np.asarray(probs)
