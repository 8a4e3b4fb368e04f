"""Errors a user can cause. The CLI turns each into one line on stderr and exit code 2."""


class UserError(Exception):
    """Bad input from the user (flag, config, dataset file, result file): one clear line, exit 2."""


class DataUnavailable(UserError):
    """A dataset is not on disk and cannot be downloaded (offline, or checksum mismatch)."""
