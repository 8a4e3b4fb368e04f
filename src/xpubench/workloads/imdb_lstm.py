"""IMDB sentiment LSTM: the seed's embedding + single LSTM binary classifier.

    input (250,) int32 token ids < 15,000
    Embedding(15,000, 32) -> LSTM(100), last hidden state -> Dense 1 (logit; sigmoid in the loss)

The LSTM is the standard one (gates i, f, g, o; c' = f c + i g; h' = o tanh(c')) with PyTorch's two
bias vectors ``b_ih`` and ``b_hh``: torch ``nn.LSTM`` (fused kernels), flax
``xpubench.workloads.jax_layers.LSTM`` (``nn.RNN`` scan over a cell with the same parameter layout).

Trainable parameters: embedding 480,000 + LSTM 4*100*(32 + 100) + 2*4*100 = 53,600 + dense 101
= 533,701.

Keras: Embedding -> ``keras.layers.LSTM`` -> Dense. Keras's LSTM has one bias vector (4H) where torch's
(and the flax layer written to its layout) has two whose sum is the one that acts: 533,301 parameters,
the same FLOPs; Keras keeps its own LSTM (its cuDNN path on GPUs included).
"""

from __future__ import annotations

from typing import Any

from xpubench.workloads.base import Workload, WorkloadSpec, jax_layers_file

SPEC = WorkloadSpec(
    name="imdb_lstm",
    title="IMDB sentiment LSTM",
    dataset="imdb",
    input_shape=(250,),
    input_kind="tokens",
    target_kind="binary",
    num_outputs=1,
    loss="sigmoid_bce",
    metric="accuracy",
    optimizer="adam",
    learning_rate=1e-3,
    batch_sizes=(64,),
    quick_batch_size=64,
    epochs=5,
    train_samples=25_000,
    eval_samples=25_000,
    vocab_size=15_000,
    target_shape=(),
)

EMBED, HIDDEN = 32, 100


def build_torch(spec: WorkloadSpec) -> Any:
    """``torch.nn.Module``: (N, T) int token ids -> (N, 1) logits."""
    import torch
    from torch import nn

    class LSTMClassifier(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(spec.vocab_size, EMBED)
            self.lstm = nn.LSTM(EMBED, HIDDEN, batch_first=True)
            self.fc = nn.Linear(HIDDEN, spec.num_outputs)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            _, (h, _) = self.lstm(self.embed(x))
            return self.fc(h[-1])

    return LSTMClassifier()


def build_jax(spec: WorkloadSpec) -> Any:
    """``flax.linen.Module``: ``__call__(x, train)`` on (N, T) int token ids -> (N, 1) logits."""
    import flax.linen as nn
    import jax

    from xpubench.workloads.jax_layers import LSTM

    class LSTMClassifier(nn.Module):
        vocab_size: int
        num_outputs: int
        unroll: int | bool = 1

        @nn.compact
        def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
            x = nn.Embed(self.vocab_size, EMBED, name="embed")(x)
            h = LSTM(HIDDEN, return_sequences=False, unroll=self.unroll, name="lstm_l0")(x)
            return nn.Dense(self.num_outputs, name="fc")(h)

    return LSTMClassifier(vocab_size=spec.vocab_size, num_outputs=spec.num_outputs)


def forward_flops(spec: WorkloadSpec) -> int:
    """Forward FLOPs for one sample: the LSTM's matmuls and the dense head, 2 FLOPs per multiply-add.

    An LSTM step with input width I and H units computes the four gates from the input and the
    previous hidden state: 2 * 4H * (I + H) FLOPs; over T steps, T times that. The embedding is a
    lookup (0 FLOPs); the gate nonlinearities and elementwise updates (~10H per step, ~2% here) are
    not counted. Dense H -> 1: 2H. For T = 250: 250 * 2 * 400 * 132 + 200 = 26,400,200.
    """
    (steps,) = spec.input_shape
    return steps * 2 * 4 * HIDDEN * (EMBED + HIDDEN) + 2 * HIDDEN * spec.num_outputs


def build_keras(spec: WorkloadSpec) -> Any:
    """``keras.Sequential``: Embedding -> LSTM (last state) -> Dense 1 logit."""
    import keras

    L = keras.layers
    return keras.Sequential([
        keras.Input(spec.input_shape, dtype="int32"),
        L.Embedding(spec.vocab_size, EMBED), L.LSTM(HIDDEN), L.Dense(spec.num_outputs),
    ], name=spec.name)


WORKLOAD = Workload(name=SPEC.name, title=SPEC.title, kind="model", sources=(__file__, jax_layers_file()), spec=SPEC,
                    models={"torch": build_torch, "jax": build_jax, "keras": build_keras}, forward_flops=forward_flops)
