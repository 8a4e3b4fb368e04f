"""Reports: the terminal tables of a run, `xpubench compare`, and Markdown/HTML reports with charts.

``xpubench.report(paths, output)`` is the notebook API's report writer. Once any module of this package
is imported, Python binds the name ``xpubench.report`` to this package, hiding that function; so the
package itself is callable and does what :func:`xpubench.api.report` does (build.write_report). Both
spellings always work.
"""

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, paths, output, *, fmt=None, force=False):
        """Write a self-contained HTML page (or Markdown with PNG charts) from results files."""
        from pathlib import Path

        from xpubench.report.render.build import write_report

        return write_report(paths, Path(output), fmt=fmt, force=force)


sys.modules[__name__].__class__ = _CallablePackage
