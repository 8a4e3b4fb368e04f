"""Fashion-MNIST CNN: the ``mnist_cnn`` network unchanged, on Fashion-MNIST, trained for 15 epochs.

Same architecture, models, parameter count (412,778) and FLOPs (4,420,608 per sample forward) as
``mnist_cnn``; see that module for the details.
"""

from __future__ import annotations

import dataclasses

from xpubench.workloads import mnist_cnn
from xpubench.workloads.base import WorkloadSpec

SPEC: WorkloadSpec = dataclasses.replace(
    mnist_cnn.SPEC,
    name="fashion_cnn",
    title="Fashion-MNIST CNN (2 conv + 2 dense)",
    dataset="fashion_mnist",
    epochs=15,
)
WORKLOAD = dataclasses.replace(mnist_cnn.WORKLOAD, name=SPEC.name, title=SPEC.title, sources=(__file__, *mnist_cnn.WORKLOAD.sources), spec=SPEC)
