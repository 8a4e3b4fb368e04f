"""The record every workload is: what it computes, on what data, for how long, and with which models.

A workload module (``xpubench/workloads/<name>.py``) defines ``WORKLOAD = Workload(...)`` and is listed
once in ``xpubench.workloads.REGISTRY``. The record declares everything the rest of xpubench reads of
a workload (it is frozen, with slots: an undeclared attribute can be neither read nor set): its default
``spec`` (a WorkloadSpec) or ``configure(options)``, ``models`` ({model family: builder(spec)}: "torch"
-> ``torch.nn.Module``, "jax" -> ``flax.linen.Module``, "keras" -> ``keras.Model``), ``forward_flops``,
the modes it runs, its own option rows, key options and, for token and generative models, tokens per
sample and the generation hooks. Framework imports live inside the builders so that
``import xpubench.workloads`` never imports a framework; the Keras builders run only after
``backends/keras_`` chose Keras's backend and imported keras.

A backend runs a workload only where the workload has a model for the backend's family
(``backends.supports``): the planner plans no other (workload, backend) pair.

Conventions shared by the builders:
- inputs are channels-last for images (N, H, W, C) float32 in [0, 1]; tokens are int32 ids (N, T);
  series are float32 (N, T, F). The torch module permutes images to NCHW itself (a free view that
  has channels_last strides) so every framework sees the same array.
- classification models return logits (softmax / sigmoid live in the loss); regression models
  return their final activation (e.g. sigmoid) and use ``loss="mse"``.
- jax modules take ``__call__(x, train: bool)``; dropout draws from the ``"dropout"`` rng; batch
  norm keeps running statistics in the ``"batch_stats"`` collection.
- FLOPs count a multiply-add as 2 FLOPs; training FLOPs per sample are taken as 3x forward
  (forward + backward w.r.t. activations and weights, Kaplan et al. 2020, section 2.1).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from xpubench.case import Options as CaseOptions
from xpubench.errors import UserError
from xpubench.results.targets import Target


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    title: str
    dataset: str                      # key of xpubench.data.DATASETS ("mnist", "cifar10", ...)
    input_shape: tuple[int, ...]      # one sample, e.g. (28, 28, 1), (250,), (1344, 20)
    input_kind: str                   # "image" | "tokens" | "series"
    target_kind: str                  # "class" | "binary" | "token_seq" | "series"
    num_outputs: int                  # classes, 1 for binary, vocabulary, or regression signals
    loss: str                         # "softmax_ce" | "sigmoid_bce" | "mse"
    metric: str                       # "accuracy" | "mse"
    optimizer: str                    # "adam" | "rmsprop"
    learning_rate: float
    batch_sizes: tuple[int, ...]      # the seeds' defaults
    quick_batch_size: int             # the brief default run (`xpubench run` with no arguments)
    epochs: int
    train_samples: int
    eval_samples: int
    vocab_size: int | None = None     # token inputs only
    target_shape: tuple[int, ...] = field(default=())  # one sample's target; () for a scalar label
    depth: int = 0                    # generation: tokens in the KV cache before each timed prefill and decode

    @property
    def train_flops_factor(self) -> int:
        """Training FLOPs per sample = 3 x forward FLOPs (see module docstring)."""
        return 3


@dataclass(frozen=True)
class Weights:
    """A model's weights as an engine loads them: a Hugging Face checkpoint folder (config.json and
    ``*.safetensors``), checked by the workload that hands it over (its ``checkpoint`` hook); an engine
    (backends/engine.py) converts and loads it."""

    folder: Path
    config: Mapping[str, Any]   # config.json as the workload read it (the architecture)
    digest: str                 # what identifies the tensors: the key of what an engine converts them to
    name: str                   # the model's name in messages ("smollm-135m (2/30 layers)", a checkpoint's)
    seed: int | None = None     # random weights: the seed they were drawn from (None: a checkpoint's own)
    int4_group: int = 32        # weights per scale the case's int4 asks for (the workload's option)


KINDS = ("model", "transformer", "matmul", "selftest", "user")


@dataclass(frozen=True)
class DefaultTarget:
    """A workload's default quality target (``--mode time-to-target``): on its whole training split (the
    dataset a user downloads) and on a smaller part (the real data this project keeps in
    ../shared/datasets), where one is established; None where none is (the plan then asks for --target)."""

    full: Target | None
    part: Target | None
    max_epochs: int         # the default epoch cap of a time-to-target case (--epochs replaces it)
    source: str             # where the values come from (docs/methodology.md lists them)

    def for_data(self, full: bool) -> Target | None:
        """The target on the whole training split (``full``) or on a part of it."""
        return self.full if full else self.part


@dataclass(frozen=True)
class WorkloadOption:
    """One option of a workload's own: a key of a case's options that the workload reads
    (``PlanRequest.options[key]``). plan/options.py turns every registered workload's rows into
    ``xpubench run`` options (flag, TOML key, notebook keyword) and plan.validation.validate checks their values."""

    key: str                          # the key in a case's options
    help: str
    flag: str = ""                    # its command-line flag ("--preset"); "": a key of [run.options] only
    name: str = ""                    # its TOML key / argparse dest when not ``key`` (selftest's "selftest")
    choices: tuple[str, ...] = ()     # the values it takes; () : see ``least``
    least: int | None = None          # a whole number of at least this (None: any value ``check_options`` takes)
    is_list: bool = False             # several values: comma-separated on the command line, a TOML array
    selects: bool = False             # giving it asks for this workload (-w defaults to it); it is this
    #                                   workload's alone: other workloads' cases do not carry it
    hidden: bool = False              # not offered in --help (the selftest's --selftest: an isolation check)
    backend_option: bool = False      # a choice of one backend's loop (llama's --decode: PyTorch's decode
    #                                   step): only the cases of a backend whose record ``honours`` it carry it

    @property
    def option_name(self) -> str:
        return self.name or self.key

    def check(self, value: Any) -> None:
        """Refuse a value outside ``choices`` or, with ``least``, anything but a whole number of at least
        ``least`` (UserError naming the flag, else the key)."""
        said = self.flag or self.key
        for v in value if self.is_list and isinstance(value, list) else [value]:
            if self.choices and v not in self.choices:
                raise UserError(f"{said} must be one of {', '.join(self.choices)}, got {v!r}")
            if self.least is not None and (isinstance(v, bool) or not isinstance(v, int) or v < self.least):
                raise UserError(f"{said} must be a whole number of at least {self.least}, got {v!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """One workload, declared (see the module docstring). Fields a workload does not need keep their
    defaults: no models (matmul, selftest), no options, both modes."""

    name: str
    title: str
    kind: str                                     # KINDS: "model", "transformer", "matmul", "selftest", "user"
    sources: tuple[str, ...]                      # the files of its code (weights.code_digest hashes them)
    spec: Any = None                              # the default WorkloadSpec (None: no model)
    configure: Callable[[Mapping[str, Any]], Any] | None = None   # case options -> spec (gpt's presets)
    models: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)   # model family -> builder(spec)
    # family -> its own optimizer (gpt's AdamW)
    optimizers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    forward_flops: Callable[[Any], float] | None = None          # analytic forward FLOPs of ONE sample
    tokens_per_sample: Callable[[Any], int] | None = None        # token models: tokens/s = samples/s x this
    modes: tuple[str, ...] = ("train", "infer")                  # the modes it runs (``--mode``)
    default_modes: tuple[str, ...] = ("train",)                  # the modes planned when none is asked for
    default_precisions: tuple[str, ...] = ()      # planned when none is asked for (() : the device's model
    #                                               defaults); the CPU's slow half dtypes are left out
    quick_options: Mapping[str, Any] = field(default_factory=dict)   # options its cases get in the brief
    #   default run, unless given, or the request chose the model itself (one of its ``selects`` options)
    generates: bool = False                       # its "infer" is the generation loop (case mode "generate")
    served: bool = False                          # an engine's server can load its model (--mode serve: a
    #                                               named shape, a checkpoint folder or a GGUF; plan/serve.py)
    generation_lengths: Callable[[Any, Mapping[str, Any]], tuple[int, int]] | None = None  # (prompt, new)
    decode_flops_per_token: Callable[[Any, float], float] | None = None   # (spec, context) -> FLOPs
    generation_batch_sizes: tuple[int, ...] = ()  # a generation run's batch sweep (one case each)
    generation_models: Mapping[str, Callable[..., Any]] = field(default_factory=dict)  # family ->
    #   build(spec, precision, device, seed): a generation model that owns its weight formats and KV cache
    #   layout (backends/torch_/generate.py OwnCacheGenerator, backends/jax_/generate.py); none: the
    #   family's ``models`` builder, cast to the precision, with gpt's cache layout
    generation_counts: Callable[..., dict] | None = None   # (spec, batch, prompt_len, new_tokens, precision)
    #   -> analytic counts a generation result carries (prefill FLOPs, bytes read per generated token)
    checkpoint: Callable[..., Weights] | None = None   # (spec, seed, write=True) -> the model as a Hugging Face
    #   checkpoint folder (--weights', else random weights written once): what an engine loads; with write=False
    #   nothing is written (the plan's checks read its config and digest)
    memory_needed: Callable[[Any, Any], Any] | None = None   # (spec, case) -> the bytes a case needs on its
    #   device (``.total``, ``.explain()``) or None: a case that can't fit is skipped at plan time (plan/fit.py)
    options: tuple[WorkloadOption, ...] = ()      # its own option rows
    Options: type[CaseOptions] = CaseOptions      # its own options, typed (a frozen subclass of case.Options)
    check_options: Callable[[Mapping[str, Any]], Any] | None = None   # refuses bad values (UserError)
    key_options: tuple[str, ...] = ()             # options that are part of a case's identity (Case.key)
    describe_options: Callable[[Mapping[str, Any]], list[str]] | None = None   # a case's given key options in
    #   words (llama's "4/30 layers", "pp64", "tg16"; none: "name value"): workloads.options_text
    case_options: Callable[[Mapping[str, Any]], list[dict]] | None = None  # one options dict per case
    pin_options: Callable[[Mapping[str, Any]], dict] | None = None   # the planner's one resolution of what
    #   the options point at (llama: --weights' absolute folder, digest and model name), read once
    run: Callable[[Any], Any] | None = None       # a workload that is its own measurement (selftest)
    in_default_run: bool = True                   # planned by ``xpubench run`` without -w
    target: DefaultTarget | None = None           # its default quality target (--mode time-to-target)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"workload {self.name}: kind {self.kind!r} is not one of {KINDS}")
        for name in ("models", "optimizers", "quick_options", "generation_models"):   # read-only, as the record is
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def options_of(self, options: Mapping[str, Any] | None) -> CaseOptions:
        """Its ``Options`` of a case's (or a request's) options: built once by the planner, so a planned
        case's are returned as they are; a record's are read (every other key kept as given)."""
        return self.Options.of(options)

    def spec_for(self, options: Mapping[str, Any] | None = None) -> Any:
        """The spec of a case with these options (its ``Options``): ``configure`` where the workload
        takes options, else ``spec``. It reads the options' fields and nothing else (no file: a
        checkpoint's architecture is pinned in them by the plan)."""
        return self.configure(self.options_of(options)) if self.configure else self.spec

    def backend_options(self) -> frozenset[str]:
        """The keys of its options that one backend's loop reads (``WorkloadOption.backend_option``)."""
        return frozenset(row.key for row in self.options if row.backend_option)

    def case_mode(self, mode: str) -> str:
        """The loop a case of ``mode`` runs: "infer" of a generative workload is "generate"
        (harness/generation.py); any other mode is itself."""
        return "generate" if mode == "infer" and self.generates else mode


def jax_layers_file() -> str:
    """The file of the flax LSTM/GRU layers (workloads/jax_layers.py, which imports flax when imported):
    a source of the recurrent workloads' jax models."""
    return str(Path(__file__).with_name("jax_layers.py"))
