"""The one exception type the CLI turns into a single line and exit code 2."""

__all__ = ["EnerfError", "DataError", "CheckpointError", "ConfigError", "DivergenceError", "RunInterrupted"]


class EnerfError(Exception):
    """A user-facing problem: bad input, missing data, wrong flag. Message is one line."""


class DataError(EnerfError):
    """A dataset on disk is missing, malformed or inconsistent."""


class CheckpointError(EnerfError):
    """A checkpoint is missing, unreadable or incompatible."""


class ConfigError(EnerfError):
    """A configuration value is invalid. ``fields``: the config field names the message uses
    (``n_rand``), which the CLI writes as its flags (``--N_rand``)."""

    def __init__(self, message: str, fields: tuple[str, ...] = ()):
        super().__init__(message)
        self.fields = tuple(fields)


class DivergenceError(EnerfError):
    """Training produced a non-finite loss, gradient or weight; the last good checkpoint is kept."""


class RunInterrupted(EnerfError):
    """Training stopped by Ctrl-C or SIGTERM after writing its checkpoint; the CLI prints the
    message and exits with ``exit_code`` (128 + the signal: 130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code
