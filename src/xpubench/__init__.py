"""xpubench: on this hardware, with this framework, how fast does real deep-learning work run?

Notebook API (imports are lazy so `import xpubench` stays cheap)::

    import xpubench
    results = xpubench.run(workload="matmul", backend="numpy")
    df = xpubench.load(["results.jsonl"])
    xpubench.report(["a.jsonl", "b.jsonl"], "report.html")
"""

from xpubench.version import __version__

__all__ = ["__version__", "compare", "load", "report", "run"]


def __getattr__(name):
    if name in ("run", "load", "compare", "report"):
        from xpubench import api

        return getattr(api, name)
    raise AttributeError(name)
