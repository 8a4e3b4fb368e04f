"""Llama-family decoders (SmolLM, Llama 3.x) in PyTorch and JAX/flax, with a KV cache for generation and
a reader for local Hugging Face checkpoints.

- ``config``: the architecture as data (``LlamaConfig``, ``PRESETS``, ``from_hf_config``); no framework.
- ``costs``: parameters, FLOPs, bytes per decode step, memory of a case; no framework.
- ``checkpoint``: a local Hugging Face directory (config.json + *.safetensors) read and written;
  ``hf_tensors``: its tensors' names and shapes, and where each goes in the models.
- ``torch_model`` / ``flax_model``: the model in each framework, each with what generation asks of it
  (``context``, ``new_cache`` / ``new_kv``, ``generation_facts``: backends/*/generate.py's OwnCache
  generators run it); ``flax_params``: the flax model's params, random, read, quantised;
- ``workload``: the record (``-w llama``): options, presets, FLOPs, memory; ``spec``: a case's spec from
  its options;
- ``models``: the record's models, for training, for generation in a weight format, as a checkpoint folder.

Importing this package imports no framework.
"""

from xpubench.workloads.llama.config import PRESETS, LlamaConfig, from_hf_config, preset  # noqa: F401
