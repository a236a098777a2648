"""The one exception type the CLI turns into a single line and exit code 2."""

__all__ = ["EnerfError", "DataError", "CheckpointError", "ConfigError", "DivergenceError", "system_error_line"]


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


def system_error_line(exc: BaseException) -> str | None:
    """One line for running out of memory or a failed file operation; None for other errors
    (bugs keep their traceback). ``ENERF_TRACEBACK=1`` shows the traceback in every case."""
    if isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and (
            "out of memory" in str(exc) or "not enough memory" in str(exc))):
        return "out of memory; lower --N_rand, --chunk, --batch_size or the image size (--factor)"
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}; check the path and free space"
    return None
