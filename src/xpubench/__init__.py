"""xpubench: on this hardware, with this framework, how fast does real deep-learning work run?

Notebook API (imports are lazy so `import xpubench` stays cheap)::

    import xpubench
    results = xpubench.run(workload="matmul", backend="numpy")
    df = xpubench.load(["results.jsonl"])
    xpubench.report(["a.jsonl", "b.jsonl"], "report.html")
    df = xpubench.bench("my_models.py:small_cnn", quick=True)   # your own model (docs/your-model.md)
"""

from xpubench.version import __version__

__all__ = ["__version__", "bench", "compare", "load", "report", "run"]


def __getattr__(name):
    if name in ("run", "load", "compare", "report"):
        from xpubench import api

        return getattr(api, name)
    if name == "bench":
        from xpubench.api.bench import bench

        return bench
    raise AttributeError(name)
