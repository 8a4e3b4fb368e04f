"""Example user model for `xpubench run -b keras --model docs/examples/keras_models.py:text_cnn` (Keras 3,
on the Keras backend chosen with -b keras:jax / keras:torch)."""

import keras
from keras import layers


def text_cnn():
    """Token ids (200 per sample, vocabulary 5,000) -> embedding -> 1-D convolutions -> binary logit."""
    model = keras.Sequential([
        keras.Input((200,), dtype="int32"),
        layers.Embedding(5000, 64),
        layers.Conv1D(64, 5, activation="relu"), layers.MaxPooling1D(2),
        layers.Conv1D(64, 5, activation="relu"), layers.GlobalMaxPooling1D(),
        layers.Dense(32, activation="relu"), layers.Dense(1),
    ], name="text_cnn")
    return {"model": model, "input_shape": (200,), "input_dtype": "int32", "task": "binary", "vocab_size": 5000}
