"""MNIST CNN: the seed's small two-convolution classifier (also used by ``fashion_cnn``).

    input (28, 28, 1) in [0, 1]
    Conv2D 64, kernel 2x2, 'same', ReLU -> MaxPool 2 -> Dropout 0.3
    Conv2D 32, kernel 2x2, 'same', ReLU -> MaxPool 2 -> Dropout 0.3
    Flatten (H, W, C order in both frameworks) -> Dense 256 ReLU -> Dropout 0.5 -> Dense 10 (logits)

'same' with an even kernel pads one pixel on the bottom/right only (TF/XLA ``padding="SAME"``:
before = (k - 1) // 2, after = the rest). The torch module pads explicitly with ``F.pad`` and runs an
unpadded convolution: the same function as torch's ``padding="same"`` (which makes the same padded
copy internally and warns about it), and it keeps channels_last. The torch
module receives NHWC input and permutes it to NCHW (a free view with channels_last strides); before
flattening it permutes back to NHWC (again free for channels_last activations), so ``fc1`` sees the
same (H, W, C) feature order as flax's ``Dense``. The Keras model is the seeds' ``keras.Sequential`` of
the same layers (Keras's 'same' pads the same way).

Trainable parameters (28x28x1, 10 classes): 320 + 8,224 + 401,664 + 2,570 = 412,778.
"""

from __future__ import annotations

from typing import Any

from xpubench.workloads.base import Workload, WorkloadSpec

SPEC = WorkloadSpec(
    name="mnist_cnn",
    title="MNIST CNN (2 conv + 2 dense)",
    dataset="mnist",
    input_shape=(28, 28, 1),
    input_kind="image",
    target_kind="class",
    num_outputs=10,
    loss="softmax_ce",
    metric="accuracy",
    optimizer="adam",
    learning_rate=1e-3,
    batch_sizes=(256, 512, 1024),
    quick_batch_size=256,
    epochs=10,
    train_samples=60_000,
    eval_samples=10_000,
)

CONV1, CONV2, HIDDEN, KERNEL = 64, 32, 256, 2
DROP_CONV, DROP_DENSE = 0.3, 0.5
# 'same' padding for a stride-1 kernel, as F.pad's (left, right, top, bottom): (k - 1) // 2 before
SAME_PAD = ((KERNEL - 1) // 2, KERNEL // 2, (KERNEL - 1) // 2, KERNEL // 2)


def _flat_features(spec: WorkloadSpec) -> int:
    """Features after the second pool: (H // 4) * (W // 4) * 32 (two floor-halving 2x2 pools)."""
    height, width, _ = spec.input_shape
    return (height // 2 // 2) * (width // 2 // 2) * CONV2


def build_torch(spec: WorkloadSpec) -> Any:
    """The CNN as a ``torch.nn.Module`` taking NHWC float input, returning (N, classes) logits."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class CNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            channels = spec.input_shape[-1]
            self.conv1 = nn.Conv2d(channels, CONV1, KERNEL)
            self.conv2 = nn.Conv2d(CONV1, CONV2, KERNEL)
            self.drop_conv = nn.Dropout(DROP_CONV)
            self.fc1 = nn.Linear(_flat_features(spec), HIDDEN)
            self.drop_dense = nn.Dropout(DROP_DENSE)
            self.fc2 = nn.Linear(HIDDEN, spec.num_outputs)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x.permute(0, 3, 1, 2)  # NHWC -> NCHW view (channels_last strides)
            x = self.drop_conv(F.max_pool2d(F.relu(self.conv1(F.pad(x, SAME_PAD))), 2))
            x = self.drop_conv(F.max_pool2d(F.relu(self.conv2(F.pad(x, SAME_PAD))), 2))
            x = x.permute(0, 2, 3, 1).flatten(1)  # (H, W, C) order, as flax flattens
            x = self.drop_dense(F.relu(self.fc1(x)))
            return self.fc2(x)

    return CNN()


def max_pool_2x2(x: Any) -> Any:
    """2x2 max pooling with stride 2, 'valid' (odd trailing rows/columns dropped): exactly
    ``flax.linen.max_pool(x, (2, 2), strides=(2, 2))``, written as a reshape and a max over the two
    window axes. Same values and, ties aside (a tie sends the gradient to every maximum instead of
    the first; after a ReLU, tied windows are zeros whose gradient the ReLU stops), the same gradient.
    Why: flax's max_pool is an XLA reduce_window whose gradient, select_and_scatter, is slow on the
    CPU: on the 2-core VM the whole mnist_cnn train step (batch 256) ran 2.1x faster with this form.
    """
    n, h, w, c = x.shape
    x = x[:, : h // 2 * 2, : w // 2 * 2]
    return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def build_jax(spec: WorkloadSpec) -> Any:
    """The CNN as a ``flax.linen.Module``: ``__call__(x, train)`` on NHWC input -> logits."""
    import flax.linen as nn
    import jax

    class CNN(nn.Module):
        num_outputs: int

        @nn.compact
        def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
            x = nn.relu(nn.Conv(CONV1, (KERNEL, KERNEL), padding="SAME", name="conv1")(x))
            x = nn.Dropout(DROP_CONV, deterministic=not train)(max_pool_2x2(x))
            x = nn.relu(nn.Conv(CONV2, (KERNEL, KERNEL), padding="SAME", name="conv2")(x))
            x = nn.Dropout(DROP_CONV, deterministic=not train)(max_pool_2x2(x))
            x = x.reshape(x.shape[0], -1)
            x = nn.relu(nn.Dense(HIDDEN, name="fc1")(x))
            x = nn.Dropout(DROP_DENSE, deterministic=not train)(x)
            return nn.Dense(self.num_outputs, name="fc2")(x)

    return CNN(num_outputs=spec.num_outputs)


def forward_flops(spec: WorkloadSpec) -> int:
    """Forward FLOPs for one sample: convolutions and dense layers, 2 FLOPs per multiply-add.

    A stride-1 'same' k x k convolution from C_in to C_out channels on an H x W map costs
    2 * H * W * k^2 * C_in * C_out; a dense layer n -> m costs 2 * n * m. Bias adds, ReLU, pooling
    and dropout (O(activations), < 3% here) are not counted. For 28x28x1 and 10 classes:
    conv1 401,408 + conv2 3,211,264 + fc1 802,816 + fc2 5,120 = 4,420,608.
    """
    height, width, channels = spec.input_shape
    conv1 = 2 * height * width * KERNEL * KERNEL * channels * CONV1
    conv2 = 2 * (height // 2) * (width // 2) * KERNEL * KERNEL * CONV1 * CONV2
    dense = 2 * (_flat_features(spec) * HIDDEN + HIDDEN * spec.num_outputs)
    return conv1 + conv2 + dense


def build_keras(spec: WorkloadSpec) -> Any:
    """The CNN as the seeds wrote it: a ``keras.Sequential`` of two 2x2 'same' convolutions with pooling
    and dropout, then two dense layers; NHWC input -> logits."""
    import keras

    L = keras.layers
    return keras.Sequential([
        keras.Input(spec.input_shape),
        L.Conv2D(CONV1, KERNEL, padding="same", activation="relu"), L.MaxPooling2D(2), L.Dropout(DROP_CONV),
        L.Conv2D(CONV2, KERNEL, padding="same", activation="relu"), L.MaxPooling2D(2), L.Dropout(DROP_CONV),
        L.Flatten(), L.Dense(HIDDEN, activation="relu"), L.Dropout(DROP_DENSE), L.Dense(spec.num_outputs),
    ], name=spec.name)


WORKLOAD = Workload(name=SPEC.name, title=SPEC.title, kind="model", sources=(__file__,), spec=SPEC,
                    models={"torch": build_torch, "jax": build_jax, "keras": build_keras}, forward_flops=forward_flops)
