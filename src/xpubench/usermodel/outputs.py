"""What a user's model gives and needs beyond its input shape, found on the model itself in the worker:

- **the logits in its output** (``pick_logits``): the output itself when it is an array or tensor, else
  the ordinary containers, in this order: an object's ``.logits`` (a Hugging Face ``ModelOutput``:
  ``SequenceClassifierOutput``, ``CausalLMOutputWithCrossAttentions``), a dict's ``"logits"``, a tuple's
  or list's first element. ``Pick.describe`` says which, for the results (``model_output``). Any other
  output is the model's problem, and the message says what to return (``OUTPUT_FORMS``).
- **its vocabulary** (``model_vocabulary``), for token-id inputs when neither ``--vocab-size`` nor the
  returned dict gives one: a Hugging Face ``config.vocab_size``, else a ``vocab_size`` /
  ``vocabulary_size`` attribute (keras_hub backbones, flax modules), else the rows of the first embedding
  layer (``torch.nn.Embedding``, ``keras.layers.Embedding``); with where it was found.
- **a softmax at its end** (``softmax_warning``): class or token outputs that are all in [0, 1] and sum to
  1 over the last axis are probabilities, not logits. The loss takes logits, so training would sit near
  ln(N): a warning, not a refusal (the case runs, the result says why its loss is odd).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

OUTPUT_FORMS = ("return the logits as a tensor, or an object with .logits (a Hugging Face ModelOutput), a dict "
                "with 'logits' or a tuple whose first element is the logits")
VOCAB_ATTRIBUTES = ("vocab_size", "vocabulary_size")


def _is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, (Mapping, tuple, list))


@dataclass(frozen=True)
class Pick:
    """How the logits are taken from a model's output (applied to every output of the model)."""

    kind: str     # "itself" | "attribute" | "key" | "first"

    def __call__(self, output: Any) -> Any:
        if self.kind == "attribute":
            return output.logits
        if self.kind == "key":
            return output["logits"]
        if self.kind == "first":
            return output[0]
        return output

    def describe(self, output: Any) -> str:
        name = type(output).__name__
        return {"itself": f"the output ({name})", "attribute": f".logits of the output ({name})",
                "key": f"['logits'] of the output ({name})", "first": f"the first element of the output ({name})",
                }[self.kind]


def pick_logits(output: Any) -> Pick | None:
    """How to take the logits from ``output`` (see the module docstring), or None."""
    if _is_array(output):
        return Pick("itself")
    if _is_array(getattr(output, "logits", None)):
        return Pick("attribute")
    if isinstance(output, Mapping) and _is_array(output.get("logits")):
        return Pick("key")
    if isinstance(output, (tuple, list)) and output and _is_array(output[0]):
        return Pick("first")
    return None


def unusable_output(output: Any) -> str:
    """What is wrong with an output ``pick_logits`` found no logits in."""
    if isinstance(output, Mapping):
        keys = ", ".join(map(str, list(output)[:8])) or "none"
        return f"{type(output).__name__} without 'logits' (keys: {keys})"
    if isinstance(output, (tuple, list)):
        first = type(output[0]).__name__ if output else "nothing"
        return f"a {type(output).__name__} whose first element is {first}"
    return type(output).__name__


def model_vocabulary(model: Any) -> tuple[int, str] | None:
    """(the number of token ids the model takes, where that was found) or None (see the module
    docstring). Never imports a framework."""
    import sys

    config = getattr(model, "config", None)
    size = getattr(config, "vocab_size", None)
    if _whole(size):
        return size, f"the model's config.vocab_size ({type(config).__name__})"
    for name in VOCAB_ATTRIBUTES:
        size = getattr(model, name, None)
        if _whole(size):
            return size, f"the model's {name} attribute"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        for layer in model.modules():
            if isinstance(layer, torch.nn.Embedding):
                return layer.num_embeddings, f"the rows of the model's first embedding ({type(layer).__name__})"
    keras = sys.modules.get("keras")
    if keras is not None and isinstance(model, keras.Model):
        for layer in model._flatten_layers(include_self=False):
            if isinstance(layer, keras.layers.Embedding):
                return layer.input_dim, f"the rows of the model's first embedding ({type(layer).__name__})"
    return None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def softmax_warning(logits: np.ndarray, spec) -> str | None:
    """A warning when class or token outputs look like probabilities (see the module docstring)."""
    if spec.target_kind not in ("class", "token_seq") or spec.num_outputs < 2:
        return None
    out = np.asarray(logits, dtype=np.float64)
    if out.size == 0 or not np.all((out >= 0) & (out <= 1)) or not np.allclose(out.sum(-1), 1.0, atol=1e-3):
        return None
    return (f"the model's outputs are probabilities (each row sums to 1): it ends in a softmax, but the loss "
            f"takes logits, so training stalls near ln({spec.num_outputs}) = {math.log(spec.num_outputs):.2f}; "
            f"return the logits (keras.applications: classifier_activation=None)")
