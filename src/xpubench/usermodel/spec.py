"""What a user's model is fed and trained on: input shape, input dtype and task, parsed from the
strings a user writes (``--input-shape 28,28,1 --input-dtype float32 --task classes:10``, or the same
values under those keys in the dict FUNCTION() returns), and the WorkloadSpec they make.

Tasks (the synthetic targets and the loss; models return logits, the loss applies softmax/sigmoid):

| task | targets (per sample) | model output (per sample) | loss | metric |
|---|---|---|---|---|
| ``classes:N`` | int class in [0, N) | (N,) logits | softmax cross-entropy | accuracy |
| ``binary`` | 0.0 or 1.0 | (1,) or () logit | sigmoid cross-entropy | accuracy |
| ``regression:N`` | N floats in [0, 1) | (N,) | mean squared error | mse |
| ``tokens:V`` | next token ids, shape of the input | (T, V) logits | softmax cross-entropy | accuracy |

Inputs: float32 gets values in [0, 1) (images, when the shape has 3 axes: uint8 / 255); integer
int32 gets token ids in [0, vocab): the vocabulary is V for ``tokens:V``, else ``vocab_size``
(``--vocab-size``, the returned dict, or read from the model in the worker: load.py). Training: Adam,
learning rate 1e-3 (``learning_rate`` overrides), batch 32, 2,048 synthetic training samples and 512
evaluation samples unless the case says otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xpubench.errors import UserError
from xpubench.workloads.base import WorkloadSpec

FLOAT_DTYPES = ("float32",)    # 16-bit runs are --precision bf16 / fp16: the inputs stay float32
INT_DTYPES = ("int32",)
TASK_FORMS = "classes:N, binary, regression:N or tokens:VOCAB"
# a user's model's run lengths unless the case says otherwise: its spec's, and what the planner reads of a
# model it never imports (plan/usermodel.py)
RUN_LENGTHS = {"batch_sizes": (32,), "quick_batch_size": 32, "epochs": 1, "train_samples": 2048, "eval_samples": 512}


@dataclass(frozen=True)
class ModelInput:
    input_shape: tuple[int, ...]     # one sample, without the batch axis
    input_dtype: str                 # "float32", "int32", ...
    task: str                        # as written: "classes:10"
    vocab_size: int | None = None    # integer inputs only
    learning_rate: float = 1e-3


def parse_shape(text) -> tuple[int, ...]:
    """"28,28,1" (or a list/tuple of ints) -> (28, 28, 1); every axis a whole number above 0."""
    parts = text.split(",") if isinstance(text, str) else list(text) if isinstance(text, (list, tuple)) else None
    try:
        shape = tuple(int(str(p).strip()) for p in parts)
    except (TypeError, ValueError):
        shape = ()
    if not shape or any(d < 1 for d in shape) or any(isinstance(p, (bool, float)) for p in parts):
        raise UserError(f"input shape must be whole numbers above 0 separated by commas (one sample, no batch "
                        f"axis), e.g. 28,28,1; got {text!r}")
    return shape


def parse_dtype(text) -> str:
    if text not in FLOAT_DTYPES + INT_DTYPES:
        raise UserError(f"unknown input dtype {text!r}; choose from: {', '.join(FLOAT_DTYPES + INT_DTYPES)}")
    return text


def parse_vocab_size(value) -> int:
    """The number of distinct token ids: a whole number above 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"vocab_size must be a whole number above 0, got {value!r}")
    return value


def parse_task(text) -> tuple[str, int | None]:
    """"classes:10" -> ("classes", 10); "binary" -> ("binary", None)."""
    match = re.fullmatch(r"(classes|regression|tokens):([0-9]+)|(binary)", str(text).strip())
    if not match:
        raise UserError(f"unknown task {text!r}; give one of {TASK_FORMS}")
    if match.group(3):
        return "binary", None
    kind, n = match.group(1), int(match.group(2))
    if n < 1 or (kind == "classes" and n < 2):
        raise UserError(f"task {text!r}: {'at least 2 classes' if kind == 'classes' else 'N must be above 0'}")
    return kind, n


def model_input(values: dict) -> ModelInput:
    """A checked ModelInput from {input_shape, input_dtype, task[, vocab_size, learning_rate]}."""
    missing = [k for k in ("input_shape", "task") if values.get(k) in (None, "")]
    if missing:
        raise UserError(f"say what the model takes: {' and '.join(missing).replace('_', ' ')} missing (options "
                        f"--input-shape 28,28,1 --task classes:10, or keys of the dict the function returns)")
    shape, dtype = parse_shape(values["input_shape"]), parse_dtype(values.get("input_dtype") or "float32")
    kind, n = parse_task(values["task"])
    vocab = values.get("vocab_size")
    if vocab is not None:
        parse_vocab_size(vocab)
    if kind == "tokens":
        if dtype not in INT_DTYPES:
            raise UserError(f"task {values['task']} takes token ids: give an integer --input-dtype (int32)")
        if len(shape) != 1:
            raise UserError(f"task {values['task']} takes one sequence of tokens per sample: input shape (T,), "
                            f"got {shape}")
        vocab = vocab or n
    elif dtype in INT_DTYPES and vocab is None:
        raise UserError(f"integer inputs are token ids: give --vocab-size N (the number of distinct ids; or "
                        f"vocab_size in the dict the function returns) for task {values['task']}; the model has "
                        f"no config.vocab_size, vocab_size attribute or embedding layer to read it from")
    rate = values.get("learning_rate", 1e-3)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
        raise UserError(f"learning_rate must be a number above 0, got {rate!r}")
    return ModelInput(shape, dtype, str(values["task"]).strip(), vocab, float(rate))


def workload_spec(name: str, given: ModelInput) -> WorkloadSpec:
    """The spec that selects the synthetic data and the loss for a user's model."""
    kind, n = parse_task(given.task)
    integer = given.input_dtype in INT_DTYPES
    input_kind = "tokens" if integer else "image" if len(given.input_shape) == 3 else "series"
    target_kind, outputs, loss, metric, target_shape = {
        "classes": ("class", n, "softmax_ce", "accuracy", ()),
        "binary": ("binary", 1, "sigmoid_bce", "accuracy", ()),
        "regression": ("series", n, "mse", "mse", (n,)),
        "tokens": ("token_seq", n, "softmax_ce", "accuracy", given.input_shape),
    }[kind]
    return WorkloadSpec(
        name=name, title=f"your model {name}", dataset="synthetic", input_shape=given.input_shape,
        input_kind=input_kind, target_kind=target_kind, num_outputs=outputs, loss=loss, metric=metric,
        optimizer="adam", learning_rate=given.learning_rate, **RUN_LENGTHS,
        vocab_size=given.vocab_size if integer else None, target_shape=target_shape)


def expected_output(spec: WorkloadSpec, batch: int) -> list[tuple[int, ...]]:
    """The output shapes the task accepts for ``batch`` samples."""
    if spec.target_kind == "binary":
        return [(batch,), (batch, 1)]
    if spec.target_kind == "token_seq":
        return [(batch, *spec.input_shape, spec.num_outputs)]
    return [(batch, spec.num_outputs)]
