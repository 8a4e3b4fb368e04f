"""User-model files that go wrong in the worker (tests/test_usermodel.py)."""

import torch
from torch import nn


def not_a_model():
    return [1, 2, 3]


def wrong_input():
    return {"model": nn.Linear(10, 4), "input_shape": (7,), "task": "classes:4"}


def wrong_output():
    return {"model": nn.Linear(10, 3), "input_shape": (10,), "task": "classes:4"}


def fine():
    torch.manual_seed(0)
    return {"model": nn.Linear(10, 4), "input_shape": (10,), "task": "classes:4"}
