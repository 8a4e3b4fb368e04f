"""The callbacks a run reports its progress through (the terminal's progress bar, a notebook's
warnings); all optional. ``api.RunHooks`` is this class."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from xpubench.case import Case
from xpubench.errors import warn_caller
from xpubench.results.schema import Run


@dataclasses.dataclass
class RunHooks:
    """Callbacks the terminal uses for progress; all optional."""

    on_plan: Callable[[list[Case], int, int], None] | None = None     # (cases, processes, runs left)
    on_start: Callable[[Case, int], None] | None = None                # (case, process index)
    on_result: Callable[[Run], None] | None = None                     # one process's run
    on_warning: Callable[[str], None] | None = None
    on_budget: Callable[[Any], None] | None = None                    # the run's launch.budget.Budget
    on_cut: Callable[[Case, int], None] | None = None                  # a process the budget left out
    on_note: Callable[[str], None] | None = None                       # the plan's notes (else on_warning)
    on_timing: Callable[[str], None] | None = None                     # at the end: the estimate against what it took

    def warn(self, message: str) -> None:
        """To the CLI's hook, or as a Python warning in a notebook."""
        if self.on_warning:
            self.on_warning(message)
        else:
            warn_caller(message)   # at the user's line, however deep the call (xpubench.bench -> run -> ...)

    def note(self, message: str) -> None:
        """A plan's note: to ``on_note``, else as a warning."""
        (self.on_note or self.warn)(message)
