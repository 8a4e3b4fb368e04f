"""How a PyTorch Llama's weights enter its matmuls (``Proj``, each projection of torch_model.py's
``LlamaTorch``): int8 per-row and int4 per-group quantisation and their packed CPU kernels, and half
weights widened on a CPU that has no instructions for them, and the one-row product a compiled CPU
decode step multiplies with.

Weight formats (``costs.FORMATS``): fp32 / bf16 / fp16 hold every parameter in that dtype. int8 holds
every matmul weight (projections, embedding table, head) as int8 with one scale per output row in the
compute dtype (bf16 by default); ``Proj`` dequantises inside the forward: for a few rows (decode) with
``torch._weight_int8pack_mm`` (int8 weights read, dequantised in the kernel) where the device has it (a
compiled CPU step: ``one_row_product``, the int8 rows widened in its fused loop), else
``F.linear(x, w.to(dtype)) * scale`` (the per-row scale commutes with the matmul). int4 holds them
two values per byte with a scale and a zero per group (``quantize_groups``); on the CPU every matmul
runs ``torch._weight_int4pack_mm_for_cpu`` (the weights in its layout, dequantised in the kernel; the
embedding keeps its row-packed copy for lookups), elsewhere the weight is dequantised, then F.linear.

Widening: on a CPU without bf16 (AVX512_BF16, AMX) or fp16 (AVX512_FP16, AMX-FP16) instructions, PyTorch's
bf16/fp16 GEMM runs emulated, ~15 GFLOP/s on a 2-core Zen 3 where its fp32 GEMM makes ~85 (a 512 x 576 by
576 x 1536 product, measured side by side in one process). A matmul of more than ``PACKED_MAX_ROWS`` rows
(a prefill, or a batch) of half weights or activations there widens both to fp32 for that product and
rounds the result back, as XLA:CPU computes bf16 dots: the weights stay stored, and read, in their
format; the products accumulate in fp32 as the native kernels' do. One-row steps (decode) keep their
path: widening a whole matrix per token would triple what a bandwidth-bound step reads. Training (grad
enabled) keeps PyTorch's half kernels: it asked for them. A generation record's ``matmul_widening`` says
where it happened (``widening_note``).

One row compiled for a CPU (``one_row_product``): Inductor's fused multiply-sum over W's rows (f32 in registers),
not aten's one-row GEMM (MKL's reads fp32 weights at ~7 GB/s on a Zen 3, oneDNN's bf16 one-row product ~8 GB/s
on an AMX Xeon, where the fused loop reads 18-25: docs/workloads.md, "one-row projections"). Its input is first
made a buffer computed once: Inductor otherwise inlines the input's pointwise producer (an RMS norm with its
weight, silu(gate) * up, a residual add) into the product's loop and recomputes it for every weight row: a
compute-bound loop (on the AMX Xeon smollm-135m's compiled bf16 step took 33.7 ms per token with it, 24.9-29.0
without). And W's rows are multiplied ``ROW_BLOCKS`` blocks at a time: one sum per block of rows, all of the same
shape and input, which Inductor fuses into one loop that keeps a sum of each block in flight (four independent
accumulators in its C++; one row's sum alone waits on each add: the AMX Xeon's loop of one block read fp32
weights at 14 GB/s, of four at 25, int8 at 8 and 14). The same for int8 weights (their per-row scale
applied to the sums), which is faster than ``torch._weight_int8pack_mm``'s one row.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

# a reduction of more elements than Inductor unrolls into pointwise code (its unroll_reductions_threshold, 8)
# is a buffer it writes once
COMPUTED_ONCE_COPIES = 9
ROW_BLOCKS = 4            # blocks of W's rows a compiled one-row product sums side by side (module docstring)
PACKED_MAX_ROWS = 16      # int8: rows up to which _weight_int8pack_mm runs (its CPU kernel is slow on many rows)


@functools.cache
def native_half(dtype: torch.dtype) -> bool:
    """Whether this CPU has instructions for ``dtype`` matmuls (torch.cpu's checks; unknown: True)."""
    cpu = torch.cpu
    checks = {torch.bfloat16: ("_is_avx512_bf16_supported", "_is_amx_tile_supported"),
              torch.float16: ("_is_amx_fp16_supported", "_is_avx512_fp16_supported")}.get(dtype, ())
    found = [getattr(cpu, name) for name in checks if hasattr(cpu, name)]
    return not found or any(check() for check in found)


def one_row_product(weight: torch.Tensor, x: torch.Tensor, scale: torch.Tensor | None = None) -> torch.Tensor:
    """x @ W^T (times a per-row ``scale``: int8) for x of one row (any leading shape of size 1), W (out, in)
    float or int8, written for Inductor on a CPU (module docstring), in x's dtype. The input made a buffer: the
    max over copies of it, which is it exactly; W's rows in ``ROW_BLOCKS`` blocks (their greatest common
    divisor with the rows)."""
    row = x.reshape(1, 1, -1).float().expand(COMPUTED_ONCE_COPIES, 1, x.shape[-1]).amax(0)
    y = torch.cat([(block.float() * row).sum(-1) for block in weight.chunk(math.gcd(weight.shape[0], ROW_BLOCKS))])
    if scale is not None:
        y = y * scale.float()
    return y.to(x.dtype).view(*x.shape[:-1], -1)


def widened(x: torch.Tensor) -> bool:
    """Whether a matmul of ``x`` computes in fp32 (module docstring)."""
    return (x.device.type == "cpu" and x.dtype in (torch.bfloat16, torch.float16)
            and x.numel() // x.shape[-1] > PACKED_MAX_ROWS and not torch.is_grad_enabled()
            and not native_half(x.dtype) and not torch.compiler.is_compiling())


def widening_note(dtype: torch.dtype, device: torch.device) -> str | None:
    """What the record says of widening for a model computing in ``dtype`` on ``device`` (None: none)."""
    if device.type != "cpu" or dtype not in (torch.bfloat16, torch.float16) or native_half(dtype):
        return None
    name = "bf16" if dtype == torch.bfloat16 else "fp16"
    return (f"matmuls of more than {PACKED_MAX_ROWS} rows (prefill) computed in fp32, not {name}, and rounded "
            f"back to {name}: this CPU has no {name} matmul instructions")


def quantize_rows(w: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per row: (int8 values, scales = max|row| / 127 in ``dtype``)."""
    w = w.float()
    scale = (w.abs().amax(dim=1) / 127.0).clamp(min=1e-12)
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale.to(dtype)


def quantize_groups(w: torch.Tensor, group: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric int4 in groups of ``group`` along each row (gpt-fast's and torchao's scheme):
    (values 0..15 two per byte (N, K/2) uint8, the low nibble first; scales (N, K/G); zeros (N, K/G)),
    so that w ~= (q - 8)·scale + zero."""
    g = w.float().reshape(w.shape[0], -1, group)
    low, high = g.amin(-1), g.amax(-1)
    scale = ((high - low) / 15).clamp(min=1e-6)
    q = torch.round((g - low[..., None]) / scale[..., None]).clamp(0, 15).to(torch.uint8).reshape(w.shape)
    return q[:, 0::2] | (q[:, 1::2] << 4), scale.to(dtype), (low + 8 * scale).to(dtype)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """(N, K/2) uint8 -> (N, K) values 0..15 (uint8), the inverse of quantize_groups' packing."""
    return torch.stack((packed & 15, packed >> 4), dim=-1).reshape(packed.shape[0], -1)


def int8pack_available(device: torch.device, dtype: torch.dtype) -> bool:
    """Whether ``torch._weight_int8pack_mm`` runs on this device for this activation dtype."""
    try:
        x = torch.ones(1, 32, dtype=dtype, device=device)
        torch._weight_int8pack_mm(x, torch.ones(8, 32, dtype=torch.int8, device=device),
                                  torch.ones(8, dtype=dtype, device=device))
        return True
    except (RuntimeError, NotImplementedError):
        return False


def int4_kernel_weights(packed: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor):
    """(weights in the layout of ``torch._weight_int4pack_mm_for_cpu``, its (K/G, N, 2) scales and zeros),
    or None where that kernel does not take them (not a CPU tensor, N not a multiple of 16, an older torch)."""
    convert = getattr(torch.ops.aten, "_convert_weight_to_int4pack_for_cpu", None)
    if packed.device.type != "cpu" or convert is None:
        return None
    try:
        return convert(unpack_int4(packed).to(torch.int32), 1), torch.stack((scale.t(), zero.t()), -1).contiguous()
    except (RuntimeError, NotImplementedError):
        return None


class Proj(nn.Module):
    """y = x W^T, W (out, in): a float parameter; or int8 values + per-row scales; or int4 values two per
    byte + a scale and a zero per group of ``group`` (buffers; module docstring)."""

    def __init__(self, out_features: int, in_features: int, dtype: torch.dtype, int8: bool = False, device=None,
                 int4: bool = False, group: int = 32):
        super().__init__()
        self.int8, self.int4, self.group, self.packed = int8, int4, group, False
        self.shape = (out_features, in_features)
        self.kernel: tuple[torch.Tensor, torch.Tensor] | None = None   # int4: the CPU kernel's layout
        if int8:
            self.register_buffer("weight", torch.zeros(out_features, in_features, dtype=torch.int8, device=device))
            self.register_buffer("scale", torch.ones(out_features, dtype=dtype, device=device))
        elif int4:
            self.register_buffer("weight", torch.zeros(out_features, in_features // 2, dtype=torch.uint8,
                                                       device=device))
            self.register_buffer("scale", torch.ones(out_features, in_features // group, dtype=dtype, device=device))
            self.register_buffer("zero", torch.zeros(out_features, in_features // group, dtype=dtype, device=device))
        else:
            self.weight = nn.Parameter(torch.empty(out_features, in_features, dtype=dtype, device=device))

    @property
    def quantised(self) -> bool:
        return self.int8 or self.int4

    def set_rows(self, start: int, w: torch.Tensor) -> None:
        """Rows ``start ..`` of W from a float tensor (int8 / int4: quantised)."""
        rows = slice(start, start + w.shape[0])
        with torch.no_grad():
            if self.int8:
                q, s = quantize_rows(w.to(self.weight.device), self.scale.dtype)
                self.weight[rows], self.scale[rows] = q, s
            elif self.int4:
                self.weight[rows], self.scale[rows], self.zero[rows] = quantize_groups(
                    w.to(self.weight.device), self.group, self.scale.dtype)
            else:
                self.weight[rows] = w.to(self.weight.device, self.weight.dtype)

    def use_int4_kernel(self, keep_rows: bool) -> None:
        """int4: multiply through ``torch._weight_int4pack_mm_for_cpu`` where it runs (the weights in its
        layout; the row-packed ones are kept only where rows are looked up: ``keep_rows``)."""
        self.kernel = int4_kernel_weights(self.weight, self.scale, self.zero)
        if self.kernel is not None and not keep_rows:
            empty = self.weight.new_empty(0)
            self.weight, self.scale, self.zero = empty, self.scale.new_empty(0), self.scale.new_empty(0)

    def rows(self, idx: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Rows ``idx`` of W as floats (an embedding lookup; int8 / int4 dequantised)."""
        if self.int8:
            return self.weight[idx].to(dtype) * self.scale[idx, None]
        if self.int4:
            q = unpack_int4(self.weight[idx.reshape(-1)]).to(dtype).reshape(*idx.shape, -1, self.group)
            y = (q - 8) * self.scale[idx, :, None] + self.zero[idx, :, None]
            return y.reshape(*idx.shape, -1)
        return F.embedding(idx, self.weight)

    def dense(self, dtype: torch.dtype) -> torch.Tensor:
        """W as a float matrix (int8 / int4: dequantised)."""
        if self.int4:
            return self.rows(torch.arange(self.weight.shape[0], device=self.weight.device), dtype)
        return self.weight.to(dtype) * self.scale[:, None] if self.int8 else self.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if rows == 1 and not self.int4 and x.device.type == "cpu" and torch.compiler.is_compiling():
            # decode's one row compiled for a CPU (module docstring); int8: its scale applied to the sums
            return one_row_product(self.weight, x, self.scale if self.int8 else None)
        if not self.quantised:
            if widened(x):   # many rows of half weights on a CPU without instructions for them (module docstring)
                return F.linear(x.float(), self.weight.float()).to(x.dtype)
            return F.linear(x, self.weight)
        if self.kernel is not None:
            y = torch._weight_int4pack_mm_for_cpu(x.reshape(rows, x.shape[-1]).contiguous(), self.kernel[0],
                                                 self.group, self.kernel[1])
            return y.view(*x.shape[:-1], -1)
        if self.packed and rows <= PACKED_MAX_ROWS:
            y = torch._weight_int8pack_mm(x.reshape(rows, x.shape[-1]).contiguous(), self.weight, self.scale)
            return y.view(*x.shape[:-1], -1)
        if widened(x):
            return self.dequantised_linear(x.float()).to(x.dtype)
        return self.dequantised_linear(x)

    def dequantised_linear(self, x: torch.Tensor) -> torch.Tensor:
        if self.int4:
            return F.linear(x, self.dense(x.dtype))
        return F.linear(x, self.weight.to(x.dtype)) * self.scale.to(x.dtype)
