"""User-model files whose outputs, vocabularies or FLOP counts need care in the worker
(tests/test_usermodel.py)."""

from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode


class Head(nn.Module):
    """Logits and something else, in the container ``form`` says."""

    def __init__(self, form: str):
        super().__init__()
        self.form, self.fc = form, nn.Linear(8, 3)

    def forward(self, x):
        logits = self.fc(x)
        return {"tuple": (logits, x), "dict": {"logits": logits, "features": x}, "hidden": {"hidden": x}}[self.form]


def tuple_output():
    return {"model": Head("tuple"), "input_shape": (8,), "task": "classes:3"}


def dict_output():
    return {"model": Head("dict"), "input_shape": (8,), "task": "classes:3"}


def no_logits():
    return {"model": Head("hidden"), "input_shape": (8,), "task": "classes:3"}


def ends_in_softmax():
    return {"model": nn.Sequential(nn.Linear(8, 3), nn.Softmax(dim=-1)), "input_shape": (8,), "task": "classes:3"}


class FailsUnderACounter(nn.Module):
    """Runs anywhere except under a torch dispatch mode (as keras_hub's BERT failed in FlopCounterMode)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        if _get_current_dispatch_mode() is not None:
            raise RuntimeError("this model refuses to be traced")
        return self.fc(x)


def counter_trouble():
    return {"model": FailsUnderACounter(), "input_shape": (8,), "task": "classes:3"}


class Bag(nn.Module):
    def __init__(self, ids: int = 500):
        super().__init__()
        self.embed, self.fc = nn.Embedding(ids, 16), nn.Linear(16, 2)

    def forward(self, x):
        return self.fc(self.embed(x).mean(1))


def token_bag():
    """Token ids without a vocab_size: the embedding's 500 rows are read."""
    return {"model": Bag(), "input_shape": (12,), "input_dtype": "int32", "task": "classes:2"}


class IdsAsNumbers(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 2)

    def forward(self, x):
        return self.fc(x.float())


def ids_without_vocabulary():
    return {"model": IdsAsNumbers(), "input_shape": (12,), "input_dtype": "int32", "task": "classes:2"}

