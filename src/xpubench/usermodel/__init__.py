"""Your own model: ``FILE.py:FUNCTION`` (or ``module:function``) where FUNCTION() returns a
torch.nn.Module, a flax module (linen or nnx) or a Keras 3 model, or a dict with ``model``,
``input_shape``, ``input_dtype`` and ``task``; benchmarked by the same harness as the built-in workloads.

- ``reference.py``: what the parent checks before anything runs, without importing the user's file
  (file, syntax, function defined at module level, task / shape / dtype strings): ``UserError``.
- ``spec.py``: the task -> synthetic data and loss (a WorkloadSpec).
- ``load.py``: in the worker, import the file, call the function, detect the framework (never
  importing one the model does not use), check one forward pass, register the model as a workload.
- ``adapters.py``: one adapter per framework (builder, forward pass, parameters, FLOPs).
- ``outputs.py``: the logits in a model's output (HF ModelOutput, dict, tuple), its vocabulary, a
  softmax at its end.
- ``flops.py``, ``torch_flops.py``: FLOPs counted, not analytic (torch FlopCounterMode with formulas for
  the kernels it misses, XLA cost analysis); n/a with the reason where a count is known to be short.
- ``notebook.py``: a function defined in a notebook, written to a module file a worker can import.
"""
