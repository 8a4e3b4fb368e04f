"""Errors a user can cause. The CLI turns each into one line on stderr and exit code 2."""


class UserError(Exception):
    """Bad input from the user (flag, config, dataset file, result file): one clear line, exit 2."""


class DataUnavailable(UserError):
    """A dataset is not on disk and cannot be downloaded (offline, or checksum mismatch)."""


def warn_caller(message: str) -> None:
    """A Python warning (a notebook's way to hear one) attributed to the first line outside xpubench: the
    user's call, however deep in the library the warning arose (``xpubench.bench`` -> ``api.run`` ->
    ...), never a line of the library's own."""
    import os
    import sys
    import warnings

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 2        # stacklevel 2: warn_caller's caller
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, stacklevel=level)
