"""What a Llama model costs, from its shape alone (nothing allocated): parameters, FLOPs of prompt
processing and of a decode step, bytes a decode step must read (the bandwidth bound), and the memory a
generation case needs before it starts.

Weight formats (``FORMATS``): fp32, bf16, fp16 store every parameter in that dtype and compute in it;
int8 and int4 are weight-only: every matmul weight (the 7 projections of each layer and the head, or
the tied embedding table) is quantised, and the RMSNorm weights, the activations and the KV cache stay
in the compute dtype (bf16 unless asked otherwise). int8: one byte per weight, one scale per output
channel (per row) in the compute dtype. int4 (as gpt-fast's and torchao's int4 weight-only, and like
llama.cpp's q4_0 blocks): two weights per byte, asymmetric in groups of ``group_size`` consecutive
weights of a row (``INT4_GROUP_SIZES``, 32 by default as q4_0), each group with a scale and a zero
point in the compute dtype: ``K/2 + 2·2·K/G`` bytes per row of K (4.5 + 0.5 bits per weight at G = 32
and bf16 scales; 4.25 at 128).

FLOPs (a multiply-add = 2 FLOPs), after PaLM (Chowdhery et al. 2022, appendix B) and Kaplan et al.
(2020, table 1): a token's forward pass costs 2 FLOPs per matmul weight, ``2·N_mm``, plus the attention
products ``QK^T`` and ``AV``, ``2·2·L·H·D·c`` for a token that attends to ``c`` positions. Here
``N_mm`` counts the projection weights of every layer and the head (``V·C``, tied or not); the input
embedding is a lookup (no FLOPs) and the norms are negligible. Unlike PaLM's training estimate, which
charges every token the full context, the prompt is counted causally: its ``i``-th token (from 0)
attends to ``i + 1`` positions, so a prefill of ``T`` tokens costs ``T·2·N_layers + 2·L·H·D·T(T+1)``
plus the head on the positions whose logits are computed (the last one only, for generation).
GQA shares keys and values between query heads: it shrinks the KV cache, not these FLOPs.

Bytes per decode step (the bandwidth bound; reads only, a lower bound of the traffic): every weight
the step multiplies with, read once for the whole batch (projections and head at the format's bytes,
int8 scales, the norms), the ``B`` embedding rows looked up when the table is not the head, and each
sequence's cached keys and values at its context ``c``: ``B·2·L·KV·D·c`` elements of the cache dtype
(``c`` counts the ``depth`` tokens the cache held before the round, llama-bench's ``-d``).
Bytes per generated token = bytes per step / B. A measured rate above ``bandwidth / bytes per token``
means the bytes or the bandwidth are wrong.

Memory (``memory_needed``): weights (+ scales) + KV cache (``B × (depth + prompt + new - 1)`` positions,
``2·L·KV·D`` elements each, as harness.generation.cache_positions) + the prefill's activations (the
live tensors of one layer at the widest point, ``B·T·(3C + 2(H + KV)·D + 3I)`` elements: inference
frees each layer's intermediates before the next) + the logits (``B × V`` in fp32 for the last
position, ``B·T·V`` when every position's logits are asked for) + for int8 and int4 the largest weight
dequantised at once by the prefill. Framework overhead (allocator slack, the runtime itself, XLA's
workspace) is not in it: the caller keeps a margin. GB here is 10^9 bytes, as model sizes are quoted.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpubench.legible.units import fmt_decimal_bytes as gb  # re-exported: costs.gb
from xpubench.workloads.llama.config import LlamaConfig

FORMATS = ("fp32", "bf16", "fp16", "int8", "int4")
QUANTISED = ("int8", "int4")      # weight-only formats: they compute in ``int8_compute``
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
DEFAULT_INT8_COMPUTE = "bf16"
INT4_GROUP_SIZES = (32, 64, 128, 256)   # the group sizes torch's int4 kernels take
DEFAULT_INT4_GROUP = 32                 # llama.cpp's q4_0 block


def weight_format(precision: str) -> str:
    """The weight format of a precision: tf32 is fp32 weights (with TF32 matmuls)."""
    return "fp32" if precision == "tf32" else precision


def compute_dtype(fmt: str, int8_compute: str = DEFAULT_INT8_COMPUTE) -> str:
    """The dtype activations, norms, scales and the KV cache use under a weight format."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown weight format {fmt!r}; choose from: {', '.join(FORMATS)}")
    return int8_compute if fmt in QUANTISED else fmt


def matrix_bytes(rows: int, cols: int, fmt: str, act: int, group: int = DEFAULT_INT4_GROUP) -> int:
    """Bytes of one (rows, cols) matmul weight stored in ``fmt`` (``act``: bytes of the compute dtype):
    float formats ``rows·cols·act``; int8 values + a scale per row; int4 two values per byte + a scale
    and a zero point per group of ``group`` along a row."""
    if fmt == "int8":
        return rows * cols + rows * act
    if fmt == "int4":
        return rows * cols // 2 + 2 * rows * (cols // group) * act
    return rows * cols * act


# ---- parameters -----------------------------------------------------------------------------------

def layer_matmul_params(cfg: LlamaConfig) -> int:
    """Projection weights of one block: q, k, v, o and the MLP's gate, up, down."""
    c = cfg.hidden_size
    return c * cfg.q_size + 2 * c * cfg.kv_size + cfg.q_size * c + 3 * c * cfg.intermediate_size


def param_count(cfg: LlamaConfig) -> int:
    """Every parameter, the tied embedding counted once (as transformers' ``num_parameters()``)."""
    c, v = cfg.hidden_size, cfg.vocab_size
    per_layer = layer_matmul_params(cfg) + 2 * c              # + input and post-attention RMSNorm
    return cfg.n_layers * per_layer + c + v * c * (1 if cfg.tie_embeddings else 2)


def matmul_params(cfg: LlamaConfig) -> int:
    """N_mm: the weights a token is multiplied with (every layer's projections and the head)."""
    return cfg.n_layers * layer_matmul_params(cfg) + cfg.vocab_size * cfg.hidden_size


# ---- FLOPs ----------------------------------------------------------------------------------------

def attention_flops(cfg: LlamaConfig, context: float) -> float:
    """QK^T and AV of one token against ``context`` cached positions, every layer."""
    return 4 * cfg.n_layers * cfg.q_size * context


def decode_flops_per_token(cfg: LlamaConfig, context: float) -> float:
    """Forward FLOPs of one generated token that attends to ``context`` positions (itself included):
    2·N_mm + 4·L·H·D·context."""
    return 2 * matmul_params(cfg) + attention_flops(cfg, context)


def prefill_flops(cfg: LlamaConfig, prompt_len: int, batch: int = 1, all_logits: bool = False) -> float:
    """FLOPs of one prefill of ``batch`` prompts of ``prompt_len`` tokens, counted causally (token i
    attends to i + 1 positions), with the head on the last position only unless ``all_logits``."""
    t = prompt_len
    layers = 2 * cfg.n_layers * layer_matmul_params(cfg) * t + attention_flops(cfg, 1) * t * (t + 1) / 2
    head = 2 * cfg.vocab_size * cfg.hidden_size * (t if all_logits else 1)
    return batch * (layers + head)


# ---- bytes ----------------------------------------------------------------------------------------

def matrices(cfg: LlamaConfig) -> list[tuple[int, int]]:
    """(rows = output features, cols = input features) of every matmul weight, as stored: per layer
    qkv, o, gate_up, down; the embedding table (and the head when untied)."""
    c, i = cfg.hidden_size, cfg.intermediate_size
    layer = [(cfg.q_size + 2 * cfg.kv_size, c), (c, cfg.q_size), (2 * i, c), (c, i)]
    return layer * cfg.n_layers + [(cfg.vocab_size, c)] * (1 if cfg.tie_embeddings else 2)


def weight_bytes(cfg: LlamaConfig, fmt: str, int8_compute: str = DEFAULT_INT8_COMPUTE,
                 group: int = DEFAULT_INT4_GROUP) -> int:
    """Bytes of every parameter stored in ``fmt`` (``matrix_bytes`` for every matmul weight, the
    embedding table included; the norms in the compute dtype)."""
    act = DTYPE_BYTES[compute_dtype(fmt, int8_compute)]
    norms = (2 * cfg.n_layers + 1) * cfg.hidden_size
    return sum(matrix_bytes(r, k, fmt, act, group) for r, k in matrices(cfg)) + norms * act


def kv_bytes_per_position(cfg: LlamaConfig, fmt: str, int8_compute: str = DEFAULT_INT8_COMPUTE) -> int:
    """One position of one sequence in the KV cache: keys and values of every layer."""
    return 2 * cfg.n_layers * cfg.kv_size * DTYPE_BYTES[compute_dtype(fmt, int8_compute)]


def decode_bytes_per_step(cfg: LlamaConfig, fmt: str, batch: int, context: float,
                          int8_compute: str = DEFAULT_INT8_COMPUTE, group: int = DEFAULT_INT4_GROUP) -> float:
    """Bytes one decode step reads (module docstring): weights once, the looked-up embedding rows of
    an untied table, and every sequence's KV cache at ``context`` positions."""
    act = DTYPE_BYTES[compute_dtype(fmt, int8_compute)]
    total = weight_bytes(cfg, fmt, int8_compute, group)
    if not cfg.tie_embeddings:     # the input table is looked up, not read whole
        c = cfg.hidden_size
        total -= matrix_bytes(cfg.vocab_size, c, fmt, act, group) - matrix_bytes(batch, c, fmt, act, group)
    return total + batch * context * kv_bytes_per_position(cfg, fmt, int8_compute)


def decode_bytes_per_token(cfg: LlamaConfig, fmt: str, batch: int, context: float,
                           int8_compute: str = DEFAULT_INT8_COMPUTE, group: int = DEFAULT_INT4_GROUP) -> float:
    """Bytes read per generated token: a step's bytes shared by the ``batch`` tokens it makes."""
    return decode_bytes_per_step(cfg, fmt, batch, context, int8_compute, group) / batch


# ---- memory ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MemoryNeed:
    """Bytes a generation case needs on its device, by part (module docstring)."""

    model: str
    fmt: str
    batch: int
    prompt_len: int
    new_tokens: int
    weights: int
    kv_cache: int
    activations: int
    logits: int
    dequant_scratch: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations + self.logits + self.dequant_scratch

    def explain(self) -> str:
        """One line: "llama-8b bf16 needs 16.2 GB: weights 16.1 GB + KV cache 0.1 GB + ..."."""
        parts = [f"weights {gb(self.weights)}", f"KV cache {gb(self.kv_cache)}",
                 f"activations {gb(self.activations)}", f"logits {gb(self.logits)}"]
        if self.dequant_scratch:
            parts.append(f"{self.fmt} dequantisation {gb(self.dequant_scratch)}")
        return (f"{self.model} {self.fmt} needs {gb(self.total)}: {' + '.join(parts)} (batch {self.batch}, "
                f"prompt {self.prompt_len}, {self.new_tokens} new tokens)")


def memory_needed(cfg: LlamaConfig, fmt: str, batch: int, prompt_len: int, new_tokens: int, *,
                  all_logits: bool = False, int8_compute: str = DEFAULT_INT8_COMPUTE, depth: int = 0) -> MemoryNeed:
    """The memory of a generation case (module docstring): batch x (depth + prompt + new - 1) cache positions."""
    act = DTYPE_BYTES[compute_dtype(fmt, int8_compute)]
    c, i = cfg.hidden_size, cfg.intermediate_size
    tokens = batch * prompt_len
    activations = tokens * (3 * c + 2 * (cfg.n_heads + cfg.n_kv_heads) * cfg.head_dim + 3 * i) * act
    logits = batch * (prompt_len if all_logits else 1) * cfg.vocab_size * 4
    scratch = 0
    if fmt in QUANTISED:   # the widest weight, dequantised whole for a prefill matmul
        scratch = max(2 * i * c, cfg.vocab_size * c, (cfg.q_size + 2 * cfg.kv_size) * c) * act
    return MemoryNeed(cfg.name, fmt, batch, prompt_len, new_tokens, weight_bytes(cfg, fmt, int8_compute),
                      batch * (depth + prompt_len + new_tokens - 1) * kv_bytes_per_position(cfg, fmt, int8_compute),
                      activations, logits, scratch)
