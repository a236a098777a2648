"""Atomic file writes: readers never see a half-written file.

Every write goes to a temp file ``.NAME.*.tmp`` beside the target and is renamed onto it once
complete (``enerf.runfolder.remove_stale_temp_files`` removes the temp files of a killed writer).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

__all__ = ["publish", "atomic_replace", "atomic_write_bytes", "atomic_write_files", "atomic_write_text", "atomic_write_json", "json_safe"]


def _read_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


_UMASK = _read_umask()  # read once, at import: os.umask is process-wide, so not while threads write files


def publish(tmp: str | Path, path: Path) -> None:
    """Give a finished temp file the permissions a plain ``open`` would (``mkstemp`` makes them
    0600) and rename it onto ``path`` in one step."""
    os.chmod(tmp, 0o666 & ~_UMASK)
    os.replace(tmp, path)


def atomic_replace(path: Path, write: Callable[[str], None]) -> None:
    """Write through ``write(tmp_path)`` into a temp file beside ``path``, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        publish(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers never see a half-written file."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    atomic_replace(path, write)


def atomic_write_files(files: dict[Path, bytes]) -> None:
    """Write several files that belong together (an OBJ, its .mtl and texture) all or none.

    Every file is written to a temp file beside its target first; only when all are complete are
    they renamed, in the order given (put the file that names the others last). A rename that
    fails removes the files already renamed, so a failure leaves none of them.
    """
    temps: list[tuple[str, Path]] = []
    done: list[Path] = []
    try:
        for path, data in files.items():
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        for tmp, path in temps:
            publish(tmp, path)
            done.append(path)
    except BaseException:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        for path in done:
            path.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def json_safe(value: Any) -> Any:
    """``value`` with every NaN / inf float replaced by None (JSON has no spelling for them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def atomic_write_json(path: Path, value: Any) -> None:
    """Write ``value`` as indented, always valid JSON (non-finite floats become null)."""
    atomic_write_text(path, json.dumps(json_safe(value), indent=2, allow_nan=False) + "\n")
