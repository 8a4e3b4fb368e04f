"""Your own model: ``FILE.py:FUNCTION`` (or ``module:function``) where FUNCTION() returns a
torch.nn.Module, a flax module (linen or nnx) or a Keras 3 model, or a dict with ``model``,
``input_shape``, ``input_dtype`` and ``task``; benchmarked by the same harness as the built-in workloads.

- ``reference.py``: what the parent checks before anything runs, without importing the user's file
  (file, syntax, function defined at module level, task / shape / dtype strings): ``UserError``.
- ``spec.py``: the task -> synthetic data and loss (a WorkloadSpec).
- ``load.py``: in the worker, import the file, call the function, detect the framework (never
  importing one the model does not use), check one forward pass, register the model as a workload.
- ``flops.py``: FLOPs measured, not analytic (torch FlopCounterMode, XLA cost analysis).
- ``notebook.py``: a function defined in a notebook, written to a module file a worker can import.
"""
