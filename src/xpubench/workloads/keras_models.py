"""The built-in workloads as Keras 3 models, written the way the seeds wrote them: ``keras.Sequential``
stacks of standard layers (the functional API for ResNet-20's residual blocks), compiled and trained with
``model.fit`` by ``xpubench.backends.keras_``.

Each builder takes the workload's spec and returns an unbuilt-free model (``keras.Input`` first, so the
weights exist at once). Same architecture, input conventions (channels-last float images in [0, 1],
int32 token ids, float32 series) and outputs (logits for classifiers, the final sigmoid for the weather
regression) as the torch and flax models in the workload modules; the loss and optimizer come from the
spec (``backends/keras_/train.py``).

Trainable parameter counts equal the native models' (``tests/test_keras_models.py``) except for the LSTM
workloads: Keras's ``LSTM`` has one bias vector per layer (4H) where PyTorch's ``nn.LSTM`` (and the flax
layer written to its layout) has two, ``b_ih`` and ``b_hh``, whose sum is the one bias that acts. The
Keras models keep Keras's own LSTM (its cuDNN path on GPUs included) and are 4H parameters smaller per
LSTM layer, with the same FLOPs: imdb_lstm 533,301 vs 533,701, shakespeare_lstm 4,460,800 vs 4,464,896.
Keras's GRU with ``reset_after=True`` (its default) has PyTorch's two bias vectors: weather_gru is equal.

``keras`` is passed in rather than imported: the Keras backend (KERAS_BACKEND) must be chosen before the
first ``import keras``, which ``backends/keras_/device.py`` does.
"""

from __future__ import annotations

from typing import Any

from xpubench.workloads import cifar10_resnet, imdb_lstm, mnist_cnn, shakespeare_lstm, weather_gru
from xpubench.workloads.base import WorkloadSpec


def mnist_cnn_model(keras: Any, spec: WorkloadSpec) -> Any:
    """mnist_cnn / fashion_cnn: two 2x2 'same' convolutions with pooling and dropout, two dense layers."""
    L, m = keras.layers, mnist_cnn
    return keras.Sequential([
        keras.Input(spec.input_shape),
        L.Conv2D(m.CONV1, m.KERNEL, padding="same", activation="relu"), L.MaxPooling2D(2), L.Dropout(m.DROP_CONV),
        L.Conv2D(m.CONV2, m.KERNEL, padding="same", activation="relu"), L.MaxPooling2D(2), L.Dropout(m.DROP_CONV),
        L.Flatten(), L.Dense(m.HIDDEN, activation="relu"), L.Dropout(m.DROP_DENSE), L.Dense(spec.num_outputs),
    ], name=spec.name)


def cifar10_resnet_model(keras: Any, spec: WorkloadSpec) -> Any:
    """ResNet-20 v1 with option-A shortcuts (functional API). Convolutions pad 'same' (a stride-2
    convolution pads bottom/right only, as Keras users write it; the native models pad 1 on every side:
    same shapes, parameters and FLOPs)."""
    L, ops, r = keras.layers, keras.ops, cifar10_resnet

    def bn():
        return L.BatchNormalization(momentum=1.0 - r.BN_MOMENTUM_TORCH, epsilon=r.BN_EPS)

    def conv(filters: int, stride: int = 1):
        return L.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)

    def shortcut(x, cin: int, cout: int, stride: int):
        extra = cout - cin
        if stride == 1 and not extra:
            return x
        return L.Lambda(lambda t: ops.pad(t[:, ::stride, ::stride, :],
                                          ((0, 0), (0, 0), (0, 0), (extra // 2, extra - extra // 2))))(x)

    inputs = keras.Input(spec.input_shape)
    x = L.Activation("relu")(bn()(conv(r.STEM)(inputs)))
    for cin, cout, stride in r._blocks():
        out = L.Activation("relu")(bn()(conv(cout, stride)(x)))
        out = bn()(conv(cout)(out))
        x = L.Activation("relu")(L.Add()([out, shortcut(x, cin, cout, stride)]))
    x = L.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, L.Dense(spec.num_outputs)(x), name=spec.name)


def imdb_lstm_model(keras: Any, spec: WorkloadSpec) -> Any:
    """Embedding -> LSTM (last state) -> Dense 1 logit."""
    L = keras.layers
    return keras.Sequential([
        keras.Input(spec.input_shape, dtype="int32"),
        L.Embedding(spec.vocab_size, imdb_lstm.EMBED), L.LSTM(imdb_lstm.HIDDEN), L.Dense(spec.num_outputs),
    ], name=spec.name)


def shakespeare_lstm_model(keras: Any, spec: WorkloadSpec) -> Any:
    """Embedding -> two LSTMs over every step -> Dense vocabulary logits per position."""
    L, s = keras.layers, shakespeare_lstm
    return keras.Sequential([
        keras.Input(spec.input_shape, dtype="int32"), L.Embedding(spec.vocab_size, s.EMBED),
        *(L.LSTM(s.HIDDEN, return_sequences=True) for _ in range(s.LAYERS)), L.Dense(spec.num_outputs),
    ], name=spec.name)


def weather_gru_model(keras: Any, spec: WorkloadSpec) -> Any:
    """GRU over every step (reset_after: PyTorch's gates and biases) -> Dense 3 -> sigmoid per step."""
    L = keras.layers
    return keras.Sequential([
        keras.Input(spec.input_shape), L.GRU(weather_gru.HIDDEN, return_sequences=True),
        L.Dense(spec.num_outputs, activation="sigmoid"),
    ], name=spec.name)


BUILDERS = {
    "mnist_cnn": mnist_cnn_model,
    "fashion_cnn": mnist_cnn_model,
    "cifar10_resnet": cifar10_resnet_model,
    "imdb_lstm": imdb_lstm_model,
    "shakespeare_lstm": shakespeare_lstm_model,
    "weather_gru": weather_gru_model,
}


def build_keras(keras: Any, workload: Any, spec: WorkloadSpec) -> Any:
    """The Keras model of a workload module: its own ``build_keras(keras, spec)`` when it has one (a user's
    model does), else the built-in one above."""
    own = getattr(workload, "build_keras", None)
    if own is not None:
        return own(keras, spec)
    return BUILDERS[spec.name](keras, spec)
