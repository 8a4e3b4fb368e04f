"""CIFAR-10 ResNet-20 v1 (He et al. 2016, "Deep Residual Learning for Image Recognition", sec. 4.2).

    input (32, 32, 3) in [0, 1]
    conv 3x3, 16 -> BN -> ReLU                                            32x32
    stage 1: 3 basic blocks, 16 filters                                   32x32
    stage 2: 3 basic blocks, 32 filters, the first with stride 2          16x16
    stage 3: 3 basic blocks, 64 filters, the first with stride 2           8x8
    global average pool -> Dense 10 (logits)

A basic block is conv3x3 -> BN -> ReLU -> conv3x3 -> BN, plus the shortcut, then ReLU (n = 3, so
6n + 2 = 20 weighted layers). Convolutions have no bias (each is followed by batch norm) and pad 1
pixel on every side in both frameworks (torch ``padding=1``, flax ``padding=1``; flax's "SAME" would pad
a stride-2 convolution bottom/right only).

Shortcut: **option A** of the paper, the one it uses on CIFAR-10 ("identity shortcuts in all cases"):
where the shape changes, the input is subsampled with stride 2 (``x[:, ::2, ::2]``) and its channels
are zero-padded (C/2 zeros: half before, half after, as in common reference implementations). It has
no parameters, so the model has the paper's ~0.27M: 269,722 trainable (convolutions 268,336, batch
norm scale/shift 736, dense 650); batch-norm running statistics are buffers, not counted.

Batch norm: momentum 0.1 in torch's convention = 0.9 in flax's (running = 0.9 running + 0.1 batch),
epsilon 1e-5; flax keeps running statistics in the ``"batch_stats"`` collection. (torch updates the
running variance with the unbiased batch variance, flax with the biased one; N/(N-1) with
N = batch x H x W >= 4,096 here.)

Keras: the functional API with the same layers; its convolutions pad 'same' (a stride-2 convolution
pads bottom/right only, as Keras users write it; the torch and flax models pad 1 on every side: same
shapes, parameters and FLOPs).

Optimizer: the paper trains with SGD + momentum and a step schedule; this workload uses Adam 1e-3,
like the other workloads, since the spec has no schedule.
"""

from __future__ import annotations

from typing import Any

from xpubench.workloads.base import Workload, WorkloadSpec

SPEC = WorkloadSpec(
    name="cifar10_resnet",
    title="CIFAR-10 ResNet-20 v1",
    dataset="cifar10",
    input_shape=(32, 32, 3),
    input_kind="image",
    target_kind="class",
    num_outputs=10,
    loss="softmax_ce",
    metric="accuracy",
    optimizer="adam",
    learning_rate=1e-3,
    batch_sizes=(1024,),
    quick_batch_size=64,
    epochs=10,
    train_samples=50_000,
    eval_samples=10_000,
)

STEM = 16
STAGES = (16, 32, 64)      # filters per stage
BLOCKS_PER_STAGE = 3       # n = 3 -> ResNet-20
BN_MOMENTUM_TORCH, BN_EPS = 0.1, 1e-5


def _blocks() -> list[tuple[int, int, int]]:
    """(in_channels, out_channels, stride) for the nine basic blocks."""
    blocks, cin = [], STEM
    for stage, cout in enumerate(STAGES):
        for i in range(BLOCKS_PER_STAGE):
            blocks.append((cin, cout, 2 if stage > 0 and i == 0 else 1))
            cin = cout
    return blocks


def build_torch(spec: WorkloadSpec) -> Any:
    """ResNet-20 as a ``torch.nn.Module`` taking NHWC float input, returning (N, classes) logits."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def bn(channels: int) -> nn.BatchNorm2d:
        return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM_TORCH)

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = bn(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
            self.bn2 = bn(cout)
            self.stride, self.extra = stride, cout - cin

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            shortcut = x
            if self.stride != 1 or self.extra:  # option A: subsample, zero-pad the channels
                shortcut = x[:, :, ::self.stride, ::self.stride]
                shortcut = F.pad(shortcut, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))
            return F.relu(out + shortcut)

    class ResNet20(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(spec.input_shape[-1], STEM, 3, padding=1, bias=False)
            self.bn1 = bn(STEM)
            self.blocks = nn.Sequential(*(BasicBlock(*b) for b in _blocks()))
            self.fc = nn.Linear(STAGES[-1], spec.num_outputs)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x.permute(0, 3, 1, 2)  # NHWC -> NCHW view (channels_last strides)
            x = self.blocks(F.relu(self.bn1(self.conv1(x))))
            return self.fc(x.mean(dim=(2, 3)))

    return ResNet20()


def build_jax(spec: WorkloadSpec) -> Any:
    """ResNet-20 as a ``flax.linen.Module``: ``__call__(x, train)`` on NHWC input -> logits."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    def bn(train: bool, name: str) -> nn.BatchNorm:
        return nn.BatchNorm(use_running_average=not train, momentum=1.0 - BN_MOMENTUM_TORCH,
                            epsilon=BN_EPS, name=name)

    class BasicBlock(nn.Module):
        cin: int
        cout: int
        stride: int

        @nn.compact
        def __call__(self, x: jax.Array, train: bool) -> jax.Array:
            s = self.stride
            out = nn.Conv(self.cout, (3, 3), (s, s), padding=1, use_bias=False, name="conv1")(x)
            out = nn.relu(bn(train, "bn1")(out))
            out = nn.Conv(self.cout, (3, 3), padding=1, use_bias=False, name="conv2")(out)
            out = bn(train, "bn2")(out)
            shortcut = x
            extra = self.cout - self.cin
            if s != 1 or extra:  # option A: subsample, zero-pad the channels
                shortcut = jnp.pad(x[:, ::s, ::s, :], ((0, 0), (0, 0), (0, 0), (extra // 2, extra - extra // 2)))
            return nn.relu(out + shortcut)

    class ResNet20(nn.Module):
        num_outputs: int

        @nn.compact
        def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
            x = nn.Conv(STEM, (3, 3), padding=1, use_bias=False, name="conv1")(x)
            x = nn.relu(bn(train, "bn1")(x))
            for i, (cin, cout, stride) in enumerate(_blocks()):
                x = BasicBlock(cin, cout, stride, name=f"blocks_{i}")(x, train)
            return nn.Dense(self.num_outputs, name="fc")(jnp.mean(x, axis=(1, 2)))

    return ResNet20(num_outputs=spec.num_outputs)


def forward_flops(spec: WorkloadSpec) -> int:
    """Forward FLOPs for one sample: convolutions and the dense layer, 2 FLOPs per multiply-add.

    A k x k convolution producing an H_out x W_out x C_out map from C_in channels costs
    2 * H_out * W_out * k^2 * C_in * C_out; the dense layer 64 -> 10 costs 2 * 64 * 10. Batch norm,
    ReLU, the residual adds and the average pool (O(activations), ~1% here) are not counted.
    For 32x32x3: stem 884,736 + stage 1 28,311,552 + stage 2 25,952,256 + stage 3 25,952,256
    + dense 1,280 = 81,102,080 (40.6M multiply-adds, the usual "41M MACs" of ResNet-20).
    """
    height, width, channels = spec.input_shape
    total = 2 * height * width * 9 * channels * STEM
    for cin, cout, stride in _blocks():
        height, width = -(-height // stride), -(-width // stride)  # ceil: pad 1, kernel 3
        total += 2 * height * width * 9 * (cin * cout + cout * cout)
    return total + 2 * STAGES[-1] * spec.num_outputs


def build_keras(spec: WorkloadSpec) -> Any:
    """ResNet-20 v1 with option-A shortcuts as a functional ``keras.Model``: NHWC input -> logits."""
    import keras

    L, ops = keras.layers, keras.ops

    def bn():
        return L.BatchNormalization(momentum=1.0 - BN_MOMENTUM_TORCH, epsilon=BN_EPS)

    def conv(filters: int, stride: int = 1):
        return L.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)

    def shortcut(x, cin: int, cout: int, stride: int):
        extra = cout - cin
        if stride == 1 and not extra:
            return x
        return L.Lambda(lambda t: ops.pad(t[:, ::stride, ::stride, :],
                                          ((0, 0), (0, 0), (0, 0), (extra // 2, extra - extra // 2))))(x)

    inputs = keras.Input(spec.input_shape)
    x = L.Activation("relu")(bn()(conv(STEM)(inputs)))
    for cin, cout, stride in _blocks():
        out = L.Activation("relu")(bn()(conv(cout, stride)(x)))
        out = bn()(conv(cout)(out))
        x = L.Activation("relu")(L.Add()([out, shortcut(x, cin, cout, stride)]))
    x = L.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, L.Dense(spec.num_outputs)(x), name=spec.name)


WORKLOAD = Workload(name=SPEC.name, title=SPEC.title, kind="model", sources=(__file__,), spec=SPEC,
                    models={"torch": build_torch, "jax": build_jax, "keras": build_keras}, forward_flops=forward_flops)
