"""Tiny-Shakespeare byte-level language model: two stacked LSTMs predicting the next byte.

    input (100,) int32 byte ids < 256; target (100,) the next byte at every position
    Embedding(256, 512) -> LSTM(512, all steps) -> LSTM(512, all steps) -> Dense 256 per position (logits)

Standard LSTMs (gates i, f, g, o) with PyTorch's two bias vectors: torch one ``nn.LSTM(num_layers=2)``
call (fused kernels; same parameters as two stacked layers), flax two
``xpubench.workloads.jax_layers.LSTM`` layers. The loss is softmax cross-entropy averaged over every
position, the metric next-byte accuracy. Windows of 101 bytes from the 1.1M-character corpus give
~11k sequences, hence 10,000 train / 1,000 eval.

Trainable parameters: embedding 131,072 + 2 x LSTM (4*512*(512 + 512) + 2*4*512 = 2,101,248)
+ dense 131,328 = 4,464,896. Keras's LSTMs have one bias vector each (4H fewer per layer, same FLOPs:
4,460,800; see imdb_lstm).
"""

from __future__ import annotations

from typing import Any

from xpubench.workloads.base import Workload, WorkloadSpec, jax_layers_file

SPEC = WorkloadSpec(
    name="shakespeare_lstm",
    title="Shakespeare byte-level 2-layer LSTM",
    dataset="tinyshakespeare",
    input_shape=(100,),
    input_kind="tokens",
    target_kind="token_seq",
    num_outputs=256,
    loss="softmax_ce",
    metric="accuracy",
    optimizer="rmsprop",
    learning_rate=1e-3,
    batch_sizes=(1024,),
    quick_batch_size=16,
    epochs=10,
    train_samples=10_000,
    eval_samples=1_000,
    vocab_size=256,
    target_shape=(100,),
)

EMBED, HIDDEN, LAYERS = 512, 512, 2


def build_torch(spec: WorkloadSpec) -> Any:
    """``torch.nn.Module``: (N, T) int byte ids -> (N, T, vocab) logits."""
    import torch
    from torch import nn

    class CharLSTM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(spec.vocab_size, EMBED)
            self.lstm = nn.LSTM(EMBED, HIDDEN, num_layers=LAYERS, batch_first=True)
            self.fc = nn.Linear(HIDDEN, spec.num_outputs)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(self.embed(x))
            return self.fc(out)

    return CharLSTM()


def build_jax(spec: WorkloadSpec) -> Any:
    """``flax.linen.Module``: ``__call__(x, train)`` on (N, T) int byte ids -> (N, T, vocab) logits."""
    import flax.linen as nn
    import jax

    from xpubench.workloads.jax_layers import LSTM

    class CharLSTM(nn.Module):
        vocab_size: int
        num_outputs: int
        unroll: int | bool = 1

        @nn.compact
        def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
            x = nn.Embed(self.vocab_size, EMBED, name="embed")(x)
            for layer in range(LAYERS):
                x = LSTM(HIDDEN, unroll=self.unroll, name=f"lstm_l{layer}")(x)
            return nn.Dense(self.num_outputs, name="fc")(x)

    return CharLSTM(vocab_size=spec.vocab_size, num_outputs=spec.num_outputs)


def forward_flops(spec: WorkloadSpec) -> int:
    """Forward FLOPs for one sample: LSTM matmuls and the per-position dense head, 2 per multiply-add.

    Per step, an LSTM layer with input width I and H units costs 2 * 4H * (I + H) (all four gates from
    input and previous hidden state); the head costs 2 * H * V per position. Embedding lookups,
    gate nonlinearities and elementwise updates (~10H per layer-step, < 1% here) are not counted.
    For T = 100: 100 * (2 * 4,194,304 + 262,144) = 865,075,200.
    """
    (steps,) = spec.input_shape
    lstm = 2 * 4 * HIDDEN * (EMBED + HIDDEN) + (LAYERS - 1) * 2 * 4 * HIDDEN * (HIDDEN + HIDDEN)
    return steps * (lstm + 2 * HIDDEN * spec.num_outputs)


def build_keras(spec: WorkloadSpec) -> Any:
    """``keras.Sequential``: Embedding -> two LSTMs over every step -> Dense vocabulary logits per position."""
    import keras

    L = keras.layers
    return keras.Sequential([
        keras.Input(spec.input_shape, dtype="int32"), L.Embedding(spec.vocab_size, EMBED),
        *(L.LSTM(HIDDEN, return_sequences=True) for _ in range(LAYERS)), L.Dense(spec.num_outputs),
    ], name=spec.name)


WORKLOAD = Workload(name=SPEC.name, title=SPEC.title, kind="model", sources=(__file__, jax_layers_file()), spec=SPEC,
                    models={"torch": build_torch, "jax": build_jax, "keras": build_keras}, forward_flops=forward_flops)
