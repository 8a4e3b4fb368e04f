"""``xpubench env`` for people: the host, one line per framework, then one table of the devices, each with
the frameworks that see it."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.segment import Segment
from rich.table import Table

from xpubench.devices import kernels
from xpubench.devices.cpu_peak import clock_said
from xpubench.legible.plaintext import markup
from xpubench.legible.units import fmt_bytes, fmt_flops

SIMD_SHOWN = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni",
              "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16", "neon", "asimd", "sve", "sve2")


def _na(value: Any) -> str:
    """A field of the environment (detected, or read from an --env-file) as markup that prints as text."""
    return "n/a" if value in (None, "", []) else markup(value)


def render_environment(env: dict[str, Any], console: Console) -> None:
    host = env.get("host", {})
    cpu = host.get("cpu", {})
    flags = [f for f in SIMD_SHOWN if f in set(cpu.get("flags") or [])]
    console.print(f"[bold]Host[/bold] {_na(host.get('hostname'))}  {_na(host.get('os'))}  "
                  f"Python {_na(host.get('python'))}")
    cores = f"{_na(cpu.get('usable_physical_cores'))} physical / {_na(cpu.get('usable_cores'))} logical usable"
    reported = cpu.get("mhz_max") or cpu.get("mhz_current")
    clock = f"{reported / 1000:.2f} GHz reported" if reported else "clock n/a"
    if cpu.get("mhz_measured"):
        clock = (f"{cpu['mhz_measured'] / 1000:.2f} GHz measured under load{clock_said(cpu)}"
                 + (f" ({clock})" if reported else ""))
    console.print(f"[bold]CPU[/bold]  {_na(cpu.get('model'))} ({_na(cpu.get('arch'))}), {cores}, {clock}, "
                  f"memory {fmt_bytes(host.get('memory_bytes'))}")
    console.print(f"[bold]SIMD[/bold] {' '.join(flags) or 'n/a'}")
    estimates = cpu.get("peak_estimate") or {}
    if estimates:
        console.print("[bold]CPU peak (estimate)[/bold] " + ", ".join(
            f"{markup(dtype)} {fmt_flops(est.get('value'))}" for dtype, est in estimates.items()))
        basis = (estimates.get("fp32") or {}).get("basis")
        console.print(f"  [dim]{markup(basis)}[/dim]" if basis else "")
    chosen = kernels.describe(env.get("kernels"))
    if chosen:
        console.print("[bold]CPU kernels[/bold] " + "; ".join(f"{markup(k)}: {markup(v)}" for k, v in chosen.items()),
                      highlight=False)
    for finding in kernels.findings(env.get("kernels"), cpu.get("flags"), env.get("variables") or {}):
        console.print(f"[yellow]warning:[/] {markup(finding.sentence())} (`xpubench doctor` measures what it costs)",
                      highlight=False)
    backends = env.get("backends", {})
    for name, info in backends.items():
        console.print(_framework_line(name, info), highlight=False)
        for platform, error in (info.get("platform_errors") or {}).items():
            console.print(f"[yellow]{markup(name)}: {markup(platform)} backend did not load (so no "
                          f"{markup(platform)} device):[/] {markup(error)}",
                          highlight=False, soft_wrap=True)
    table = _device_table(backends)
    if table is None:
        return
    drawn = Segment.split_lines(console.render(table, console.options))   # as drawn, before the console crops
    if max(Segment.get_line_length(line) for line in drawn) <= console.width:
        console.print(table)
        return
    console.print("[bold]devices[/bold]")   # a console narrower than the table's columns: nothing cropped
    cells = [list(column.cells) for column in table.columns]
    for row in zip(*cells):
        said = [f"{column.header} {cell}" for column, cell in zip(table.columns[1:], row[1:]) if cell != "n/a"]
        console.print(f"  {row[0]}: " + "; ".join(said), highlight=False)
    if table.caption:
        console.print(table.caption, highlight=False)


def _framework_line(name: str, info: dict[str, Any]) -> str:
    """"jax 0.10.2 (jaxlib 0.10.2), 1 device" (or why it has none)."""
    install = markup(info.get("install") or f"pip install 'xpubench[{name}]'")   # a record without it: an older one
    if not info.get("installed"):
        return f"[bold]{markup(name)}[/bold]: not installed ({install})"
    extras = [f"{markup(k.replace('_version', ''))} {markup(v)}" for k, v in info.items()
              if k.endswith("_version") and v] + ([f"BLAS {markup(info['blas'])}"] if info.get("blas") else [])
    variants = _variants(name, info)
    if variants is not None:   # a framework running on the devices of the one under it (keras:jax)
        under = ", ".join(f"{markup(name)}:{markup(b)}" for b in variants) or "none installed"
        return f"[bold]{markup(name)}[/bold] {_na(info.get('version'))}: runs on its backends' devices ({under})"
    devices = info.get("devices", [])
    line = f"[bold]{markup(name)}[/bold] {_na(info.get('version'))}" + (f" ({', '.join(extras)})" if extras else "")
    line += f", {len(devices)} device{'s' if len(devices) != 1 else ''}"
    if info.get("missing_imports"):   # backends/detect.py: its workers would stop at the import
        line += (f" - [yellow]missing {markup(', '.join(info['missing_imports']))}[/], which its cases import: "
                 f"{install}")
    return line + (f" - failed to initialise: {markup(info['error'])}" if info.get("error") else "")


def _variants(name: str, info: dict[str, Any]) -> list | None:
    """The installed variants of a backend that runs on other frameworks (its detection's
    ``"<name>_backends"`` list: keras's ``keras_backends``), None for a backend with devices of its own."""
    variants = info.get(f"{name}_backends")
    return variants if isinstance(variants, list) else None


def _device_table(backends: dict[str, Any]) -> Table | None:
    """One row per device, whichever frameworks see it (the ``frameworks`` column): a device is its id and
    name; where the frameworks' memory figures differ (torch: a card's total, JAX: XLA's allocator limit)
    the cell gives each."""
    seen: dict[tuple, list[tuple[str, dict]]] = {}
    for name, info in backends.items():
        if info.get("installed") and _variants(name, info) is None:
            for dev in info.get("devices") or []:
                seen.setdefault((dev.get("id"), dev.get("name")), []).append((name, dev))
    if not seen:
        return None
    devices = [dev for views in seen.values() for _, dev in views]
    # peak columns: fp32 and bf16 always; tf32 and fp16 where a chip here has a published figure (not
    # for the CPU's estimate alone: a CPU has no TF32, and its fp16 estimate is its fp32 one)
    dtypes = [d for d in ("fp32", "tf32", "bf16", "fp16")
              if d in ("fp32", "bf16") or any((dev.get("peak_flops") or {}).get(d) and not dev.get("peak_is_estimate")
                                              for dev in devices)]
    tpu = any(dev.get("kind") == "tpu" for dev in devices)
    limit = any(dev.get("memory_is_limit") for dev in devices)
    caption = ("memory*: XLA's allocator limit (75% of the GPU's memory by default, XLA_PYTHON_CLIENT_MEM_FRACTION), "
               "all a JAX case can use; not the card's total" if limit else None)
    table = Table(title="devices", title_justify="left", caption=caption, caption_justify="left")
    for col in ("device", "name", "frameworks", "memory", *(["TPU cores"] if tpu else []), "CC", "driver",
                *(f"peak {d}" for d in dtypes), "mem BW"):
        table.add_column(col, overflow="fold", min_width=len(col) if col in ("device", "frameworks") else None)
    for views in seen.values():
        dev = views[0][1]
        peak = dev.get("peak_flops") or {}
        mark = " (est.)" if dev.get("peak_is_estimate") else ""
        table.add_row(markup(dev.get("id")), _na(dev.get("name")), ", ".join(name for name, _ in views), _memory(views),
                      *([_tpu_cores(dev)] if tpu else []), _na(dev.get("compute_capability")), _na(dev.get("driver")),
                      *(fmt_flops(peak.get(d)) + (mark if peak.get(d) else "") for d in dtypes),
                      _bandwidth(dev.get("memory_bandwidth")))
    return table


def _memory(views: list[tuple[str, dict]]) -> str:
    said = {name: fmt_bytes(dev.get("memory_bytes")) + ("*" if dev.get("memory_is_limit") else "")
            for name, dev in views}
    if len(set(said.values())) == 1:
        return next(iter(said.values()))
    return ", ".join(f"{name} {value}" for name, value in said.items())


def _tpu_cores(dev: dict[str, Any]) -> str:
    """'2 cores/chip, 2 devices/chip' for a TPU (figures from devices/chips.py and the chip's coords)."""
    if dev.get("kind") != "tpu":
        return ""
    parts = [f"{dev[k]} {label}/chip" for k, label in (("cores_per_chip", "cores"), ("devices_per_chip", "devices"))
             if dev.get(k)]
    return ", ".join(parts) or "n/a"


def _bandwidth(value: float | None) -> str:
    return "n/a" if not value else f"{value / 1e9:,.0f} GB/s"
