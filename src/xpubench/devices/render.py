"""``xpubench env`` for people: the host, then one table of devices per installed backend."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from xpubench.units import fmt_bytes, fmt_flops

SIMD_SHOWN = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni",
              "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16", "neon", "asimd", "sve", "sve2")


def _na(value: Any) -> str:
    return "n/a" if value in (None, "", []) else str(value)


def render_environment(env: dict[str, Any], console: Console) -> None:
    host = env.get("host", {})
    cpu = host.get("cpu", {})
    flags = [f for f in SIMD_SHOWN if f in set(cpu.get("flags") or [])]
    console.print(f"[bold]Host[/bold] {_na(host.get('hostname'))}  {_na(host.get('os'))}  "
                  f"Python {_na(host.get('python'))}")
    cores = f"{_na(cpu.get('usable_physical_cores'))} physical / {_na(cpu.get('usable_cores'))} logical usable"
    clock = cpu.get("mhz_max") or cpu.get("mhz_current")
    console.print(f"[bold]CPU[/bold]  {_na(cpu.get('model'))} ({_na(cpu.get('arch'))}), {cores}, "
                  f"{f'{clock / 1000:.2f} GHz' if clock else 'clock n/a'}, memory {fmt_bytes(host.get('memory_bytes'))}")
    console.print(f"[bold]SIMD[/bold] {' '.join(flags) or 'n/a'}")
    estimates = cpu.get("peak_estimate") or {}
    if estimates:
        console.print("[bold]CPU peak (estimate)[/bold] " + ", ".join(
            f"{dtype} {fmt_flops(est.get('value'))}" for dtype, est in estimates.items()))
        basis = (estimates.get("fp32") or {}).get("basis")
        console.print(f"  [dim]{basis}[/dim]" if basis else "")
    for name, info in env.get("backends", {}).items():
        console.print(_backend_table(name, info))


def _backend_table(name: str, info: dict[str, Any]) -> Table | str:
    if not info.get("installed"):
        return f"[bold]{name}[/bold]: not installed (pip install 'xpubench[{name}]')"
    extras = [f"{k.replace('_version', '')} {v}" for k, v in info.items()
              if k.endswith("_version") and v] + ([f"BLAS {info['blas']}"] if info.get("blas") else [])
    title = f"{name} {_na(info.get('version'))}" + (f" ({', '.join(extras)})" if extras else "")
    if info.get("error"):
        title += f" - failed to initialise: {info['error']}"
    table = Table(title=title, title_justify="left")
    for col in ("device", "name", "memory", "CC", "driver", "peak fp32", "peak bf16", "mem BW"):
        table.add_column(col, overflow="fold")
    for dev in info.get("devices", []):
        peak = dev.get("peak_flops") or {}
        mark = " (est.)" if dev.get("peak_is_estimate") else ""
        table.add_row(dev["id"], _na(dev.get("name")), fmt_bytes(dev.get("memory_bytes")),
                      _na(dev.get("compute_capability")), _na(dev.get("driver")),
                      fmt_flops(peak.get("fp32")) + (mark if peak.get("fp32") else ""),
                      fmt_flops(peak.get("bf16")) + (mark if peak.get("bf16") else ""),
                      _bandwidth(dev.get("memory_bandwidth")))
    return table


def _bandwidth(value: float | None) -> str:
    return "n/a" if not value else f"{value / 1e9:,.0f} GB/s"
