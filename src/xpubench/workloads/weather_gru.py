"""Jena-climate weather GRU: sequence-to-sequence regression over eight weeks of hourly readings.

    input (1344, F) float32, F = 20 signals by default (taken from ``spec.input_shape[-1]``, so real
    CSV files with another number of columns work); target (1344, 3)
    GRU(512, all steps) -> Dense 3 -> sigmoid, at every step (the model applies the sigmoid; loss mse)

The GRU has PyTorch's semantics and parameters (gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h +
b_hn)); two bias vectors): torch ``nn.GRU`` (fused kernels), flax
``xpubench.workloads.jax_layers.GRU``. flax's own ``nn.GRUCell`` places the reset gate the same way
but has 4H biases instead of torch's 6H.

Trainable parameters (F = 20): GRU 3*512*(20 + 512) + 2*3*512 = 820,224 + dense 1,539 = 821,763.
Keras's GRU with ``reset_after=True`` (its default) has PyTorch's two bias vectors: the same count.
"""

from __future__ import annotations

from typing import Any

from xpubench.workloads.base import Workload, WorkloadSpec, jax_layers_file

SPEC = WorkloadSpec(
    name="weather_gru",
    title="Jena weather GRU (sequence regression)",
    dataset="jena_climate",
    input_shape=(1344, 20),
    input_kind="series",
    target_kind="series",
    num_outputs=3,
    loss="mse",
    metric="mse",
    optimizer="rmsprop",
    learning_rate=1e-3,
    batch_sizes=(256,),
    quick_batch_size=4,
    epochs=10,
    train_samples=1_000,
    eval_samples=100,
    target_shape=(1344, 3),
)

HIDDEN = 512


def build_torch(spec: WorkloadSpec) -> Any:
    """``torch.nn.Module``: (N, T, F) float series -> (N, T, outputs) in (0, 1)."""
    import torch
    from torch import nn

    class WeatherGRU(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(spec.input_shape[-1], HIDDEN, batch_first=True)
            self.fc = nn.Linear(HIDDEN, spec.num_outputs)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, _ = self.gru(x)
            return torch.sigmoid(self.fc(out))

    return WeatherGRU()


def build_jax(spec: WorkloadSpec) -> Any:
    """``flax.linen.Module``: ``__call__(x, train)`` on (N, T, F) float series -> (N, T, outputs)."""
    import flax.linen as nn
    import jax

    from xpubench.workloads.jax_layers import GRU

    class WeatherGRU(nn.Module):
        num_outputs: int
        unroll: int | bool = 1

        @nn.compact
        def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
            x = GRU(HIDDEN, unroll=self.unroll, name="gru_l0")(x)
            return nn.sigmoid(nn.Dense(self.num_outputs, name="fc")(x))

    return WeatherGRU(num_outputs=spec.num_outputs)


def forward_flops(spec: WorkloadSpec) -> int:
    """Forward FLOPs for one sample: GRU matmuls and the per-step dense head, 2 per multiply-add.

    A GRU step with input width F and H units computes three gates from the input and the previous
    hidden state: 2 * 3H * (F + H); the head costs 2 * H * 3 per step. Gate nonlinearities and
    elementwise updates (~10H per step, < 1% here) are not counted.
    For T = 1344, F = 20: 1344 * (1,634,304 + 3,072) = 2,200,633,344.
    """
    steps, features = spec.input_shape
    return steps * (2 * 3 * HIDDEN * (features + HIDDEN) + 2 * HIDDEN * spec.num_outputs)


def build_keras(spec: WorkloadSpec) -> Any:
    """``keras.Sequential``: GRU over every step (reset_after: PyTorch's gates and biases) -> Dense 3 ->
    sigmoid per step."""
    import keras

    L = keras.layers
    return keras.Sequential([
        keras.Input(spec.input_shape), L.GRU(HIDDEN, return_sequences=True),
        L.Dense(spec.num_outputs, activation="sigmoid"),
    ], name=spec.name)


WORKLOAD = Workload(name=SPEC.name, title=SPEC.title, kind="model", sources=(__file__, jax_layers_file()), spec=SPEC,
                    models={"torch": build_torch, "jax": build_jax, "keras": build_keras}, forward_flops=forward_flops)
