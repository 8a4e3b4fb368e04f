"""``xpubench.bench(model, ...)``: your model measured from a notebook or a script, the results as the
DataFrame ``xpubench.load`` returns.

    import xpubench
    df = xpubench.bench("my_models.py:small_cnn", modes=["train", "infer"], quick=True)

    def mlp():                       # defined in a notebook cell
        import torch
        return {"model": torch.nn.Sequential(...), "input_shape": (64,), "task": "classes:4"}
    df = xpubench.bench(mlp, quick=True)

A Llama-family checkpoint of your own, a local Hugging Face directory (config.json + *.safetensors), is
measured as the llama workload with ``--weights`` (prompt processing and generation by default; docs/workloads.md)::

    df = xpubench.bench("~/models/SmolLM-135M", backends=["torch"], precisions=["bf16"])

Otherwise ``model`` is ``"FILE.py:FUNCTION"``, ``"module:function"`` or a function. Every case runs in worker
processes of its own, as with ``xpubench.run``, so a function is never pickled: ``usermodel.notebook.isolate``
writes a module that rebuilds it from its source and what it uses from the notebook (imports, other
notebook functions and classes, constants). A function that can't be rebuilt that way (it uses an
array or a model object made in the notebook, or closes over a local) is refused with a line naming
what and why; xpubench does not run it in the notebook's own process, where a crash, hang or
out-of-memory would end the session instead of becoming the case's result, no timeout could stop it
and the timings would share the process with everything the notebook has loaded. Move what it uses
inside the function, or the function into a ``.py`` file.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from xpubench import api
from xpubench.errors import UserError
from xpubench.usermodel.notebook import NotIsolatable, isolate


def bench(model, /, *, input_shape=None, input_dtype: str | None = None, task: str | None = None,
          vocab_size: int | None = None, **run_options: Any):
    """Plan and run ``model`` (see the module docstring) with ``xpubench.run``'s keywords (``modes``,
    ``backends``, ``precisions``, ``batch_sizes``, ``quick``, ``output``, ``processes``, ...); returns the
    results file's DataFrame, one row per case, its ``attrs["results_file"]`` the file. Without ``output``
    the file (and its plan) go to a new temporary folder, printed, not the working directory, and removed
    when this Python process ends."""
    if run_options.get("resume") is not None:
        raise UserError("bench plans a new run: to resume one, use xpubench.run(resume=FILE)")
    for name in ("model", "request"):
        if name in run_options:
            raise UserError(f"bench takes the model as its first argument: drop {name}=")
    output = _output(run_options.pop("output", None))
    checkpoint = checkpoint_dir(model)
    if checkpoint is not None:   # the llama workload on these weights (workloads/llama/checkpoint.py checks them)
        given = [k for k, v in {"input_shape": input_shape, "input_dtype": input_dtype, "task": task,
                                "vocab_size": vocab_size}.items() if v is not None]
        if given:
            raise UserError(f"{checkpoint} is a checkpoint: its config.json describes the model; "
                            f"drop {', '.join(given)}")
        options = {**(run_options.pop("options", None) or {}), "weights": checkpoint}
        api.run(workloads=["llama"], options=options, output=output, **run_options)
        return _frame(output)
    reference = model_reference(model)
    fields = {"input_shape": _shape_text(input_shape), "input_dtype": input_dtype, "task": task,
              "vocab_size": vocab_size}
    api.run(model=reference, output=output, **{k: v for k, v in fields.items() if v is not None}, **run_options)
    return _frame(output)


def _output(given) -> Path:
    """``output=`` as given, else a new results file in a temporary folder of its own (a notebook's
    working directory gets neither the results nor the plan beside them), said where it is. That folder
    lasts as long as this Python process (the notebook's kernel): the frame's ``attrs["results_file"]``
    can be reported from until then, and nothing is left in the temp folder after it."""
    if given:
        return Path(given)
    folder = tempfile.mkdtemp(prefix="xpubench-bench-")
    atexit.register(_remove, folder, os.getpid())
    output = api.default_output(Path(folder))
    print(f"xpubench.bench: results in {output} (a temporary folder, removed when this Python process ends; "
          "output=PATH keeps them)", flush=True)
    return output


def _remove(folder: str, owner: int) -> None:
    """At exit: the temporary folder, by the process that made it (never by a child forked from it)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def _frame(output: Path):
    """The results file's DataFrame; ``frame.attrs["results_file"]`` says where the file is."""
    frame = api.load([output])
    frame.attrs["results_file"] = str(output)
    return frame


def checkpoint_dir(model) -> str | None:
    """``model`` as a checkpoint directory (a path to a directory), or None (a model reference)."""
    if isinstance(model, (str, os.PathLike)) and Path(model).expanduser().is_dir():
        return str(Path(model).expanduser())
    return None


def model_reference(model) -> str:
    """``"FILE.py:FUNCTION"`` for a reference string or a function that can be rebuilt in a worker."""
    if isinstance(model, str):
        return model
    if not callable(model):
        raise UserError(f"bench's model is 'FILE.py:FUNCTION', 'module:function' or a function, got "
                        f"{type(model).__name__}")
    try:
        return isolate(model)
    except NotIsolatable as exc:
        raise UserError(f"{getattr(model, '__name__', model)} can't be rebuilt in a worker process ({exc}); "
                        "move what it uses inside the function, or put it in a .py file and pass "
                        "'FILE.py:FUNCTION'") from None


def _shape_text(shape) -> str | None:
    """(28, 28, 1) -> "28,28,1", as --input-shape takes it."""
    if shape is None or isinstance(shape, str):
        return shape
    if isinstance(shape, int):
        return str(shape)
    return ",".join(str(d) for d in shape)
