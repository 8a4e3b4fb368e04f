"""Flax recurrent layers with PyTorch's ``nn.LSTM`` / ``nn.GRU`` semantics and parameter layout.

Imported only from the workloads' ``build_jax`` (it imports flax at module level).

Why not ``nn.OptimizedLSTMCell`` / ``nn.GRUCell``: flax's cells keep one bias per gate where PyTorch
(and cuDNN) keep two, ``b_ih`` and ``b_hh`` (flax LSTM: 4H biases, torch 8H; flax GRU: 4H, torch 6H).
The two biases are mathematically redundant except for the GRU's candidate gate, but they are
trainable parameters, and the benchmark asserts equal parameter counts across frameworks.

Layout, matching torch's ``weight_ih_l0`` / ``bias_ih_l0`` / ``weight_hh_l0`` / ``bias_hh_l0``
(transposed, as flax kernels are ``(in, out)``)::

    <layer>/cell/input/kernel   (I, G*H)   torch weight_ih.T    G = 4 (LSTM, gates i f g o)
    <layer>/cell/input/bias     (G*H,)     torch bias_ih              3 (GRU,  gates r z n)
    <layer>/cell/hidden/kernel  (H, G*H)   torch weight_hh.T
    <layer>/cell/hidden/bias    (G*H,)     torch bias_hh

Efficiency: each step is one fused (B, I) x (I, G*H) matmul for all input gates, one fused
(B, H) x (H, G*H) matmul for all hidden gates, then the gate elementwise ops, inside ``nn.RNN``'s
``lax.scan``. Hoisting the input projection out of the scan (one (B*T, I) x (I, G*H) matmul, as cuDNN
does) was measured on the 2-core CPU (train-step throughput) and was slower: 0.7x (IMDB, batch 64),
0.8-0.9x (weather GRU, batch 8), equal (Shakespeare, batch 32), presumably because the stacked
(T, B, G*H) gate arrays cost more memory traffic than the bigger matmul saves. Not measured on GPUs.

Initialisation follows flax's cells (lecun-normal input kernel, orthogonal recurrent kernel, zero
biases); torch uses U(-1/sqrt(H), 1/sqrt(H)) for everything. Values differ, shapes and maths do not.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

Array = jax.Array


class LSTMStep(nn.RNNCellBase):
    """One LSTM step, torch gate order i, f, g, o; gates = x W_ih + b_ih + h W_hh + b_hh.

    c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c').
    """

    features: int

    @nn.compact
    def __call__(self, carry: tuple[Array, Array], x: Array) -> tuple[tuple[Array, Array], Array]:
        c, h = carry
        gates = nn.Dense(4 * self.features, name="input")(x) + nn.Dense(
            4 * self.features, kernel_init=nn.initializers.orthogonal(), name="hidden")(h)
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = nn.sigmoid(f) * c + nn.sigmoid(i) * jnp.tanh(g)
        h = nn.sigmoid(o) * jnp.tanh(c)
        return (c, h), h

    @nn.nowrap
    def initialize_carry(self, rng: Any, input_shape: tuple[int, ...]) -> tuple[Array, Array]:
        zeros = jnp.zeros((*input_shape[:-1], self.features), jnp.float32)
        return zeros, zeros

    @property
    def num_feature_axes(self) -> int:
        return 1


class GRUStep(nn.RNNCellBase):
    """One GRU step, torch gate order r, z, n.

    r = sigmoid(x_r + h_r);  z = sigmoid(x_z + h_z);  n = tanh(x_n + r * h_n);  h' = (1 - z) n + z h,
    where x_* = x W_i* + b_i* and h_* = h W_h* + b_h* (the reset gate multiplies the hidden projection
    *including* its bias, as in torch and cuDNN).
    """

    features: int

    @nn.compact
    def __call__(self, h: Array, x: Array) -> tuple[Array, Array]:
        gates_x = nn.Dense(3 * self.features, name="input")(x)
        gates_h = nn.Dense(3 * self.features, kernel_init=nn.initializers.orthogonal(), name="hidden")(h)
        x_r, x_z, x_n = jnp.split(gates_x, 3, axis=-1)
        h_r, h_z, h_n = jnp.split(gates_h, 3, axis=-1)
        r = nn.sigmoid(x_r + h_r)
        z = nn.sigmoid(x_z + h_z)
        n = jnp.tanh(x_n + r * h_n)
        h = (1.0 - z) * n + z * h
        return h, h

    @nn.nowrap
    def initialize_carry(self, rng: Any, input_shape: tuple[int, ...]) -> Array:
        return jnp.zeros((*input_shape[:-1], self.features), jnp.float32)

    @property
    def num_feature_axes(self) -> int:
        return 1


class LSTM(nn.Module):
    """Batch-major LSTM layer, ``(B, T, I) -> (B, T, H)`` or, with ``return_sequences=False``, the
    last hidden state ``(B, H)`` (torch's ``h_n[-1]``). Zero initial state, like torch's default."""

    features: int
    return_sequences: bool = True
    unroll: int | bool = 1   # lax.scan unroll; True unrolls fully (tests use it for XLA cost analysis)

    @nn.compact
    def __call__(self, x: Array) -> Array:
        zeros = jnp.zeros((*x.shape[:-2], self.features), x.dtype)
        rnn = nn.RNN(LSTMStep(self.features, name="cell"), unroll=self.unroll, return_carry=True)
        (_, h), ys = rnn(x, initial_carry=(zeros, zeros))
        return ys if self.return_sequences else h


class GRU(nn.Module):
    """Batch-major GRU layer, ``(B, T, I) -> (B, T, H)`` (or the last state with
    ``return_sequences=False``). Zero initial state, like torch's default."""

    features: int
    return_sequences: bool = True
    unroll: int | bool = 1

    @nn.compact
    def __call__(self, x: Array) -> Array:
        zeros = jnp.zeros((*x.shape[:-2], self.features), x.dtype)
        rnn = nn.RNN(GRUStep(self.features, name="cell"), unroll=self.unroll, return_carry=True)
        h, ys = rnn(x, initial_carry=zeros)
        return ys if self.return_sequences else h
