"""The one exception type the CLI turns into a single line and exit code 2."""

__all__ = ["EnerfError", "DataError", "CheckpointError", "ConfigError", "DivergenceError"]


class EnerfError(Exception):
    """A user-facing problem: bad input, missing data, wrong flag. Message is one line."""


class DataError(EnerfError):
    """A dataset on disk is missing, malformed or inconsistent."""


class CheckpointError(EnerfError):
    """A checkpoint is missing, unreadable or incompatible."""


class ConfigError(EnerfError):
    """A configuration value is invalid."""


class DivergenceError(EnerfError):
    """Training produced a non-finite loss, gradient or weight; the last good checkpoint is kept."""
