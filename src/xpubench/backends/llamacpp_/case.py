"""A case's llama-bench adapter: the programs, the GGUF of the case's weights in its format (written or
taken from the cache, untimed), the lengths and depth of the case, and what the result records of them."""

from __future__ import annotations

from xpubench.backends.llamacpp_.bench import LlamaBench, usable_threads
from xpubench.backends.llamacpp_.binaries import find
from xpubench.backends.llamacpp_.gguf_file import FORMAT_NOTES, GGUF_TYPES, gguf_for, tensor_summary


def llama_bench_for(case, gguf_format: str | None = None) -> LlamaBench:
    """The case's adapter; ``gguf_format`` (a key of GGUF_TYPES, e.g. "q4_K_M") overrides the file's format
    that the case's precision gives (benchmarks/llm_vs_llamacpp.py)."""
    from xpubench.workloads import get_workload

    programs = find()
    if programs.bench is None:
        raise FileNotFoundError(programs.missing)
    workload = get_workload(case.workload)
    spec = workload.spec_for(case.options)
    prompt_len, new_tokens = workload.generation_lengths(spec, case.options)
    threads = usable_threads()
    fmt = gguf_format or case.precision
    path, cached = gguf_for(spec, fmt, case.seed, programs.quantize, threads)
    summary = tensor_summary(path)
    facts = {
        "weight_format": GGUF_TYPES[fmt][0].lower(),
        "int8_method": FORMAT_NOTES.get(fmt),
        "gguf_types": ", ".join(f"{n} {t}" for t, n in sorted(summary["types"].items(), key=lambda kv: -kv[1]))
                      + f" ({path.name}, {'cached' if cached else 'written for this case'})",
    }
    return LlamaBench(bench=programs.bench, model=path, prompt_len=prompt_len, new_tokens=new_tokens,
                      depth=spec.depth, threads=threads,
                      facts={k: v for k, v in facts.items() if v is not None})
