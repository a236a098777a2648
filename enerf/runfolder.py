"""Where a run writes, output locations checked before any work, and one writer per run folder.

* ``config_run_folder``: a run writes into one folder, ``<basedir>/<expname>/``, its checkpoints
  into ``<run>/checkpoints/``; ``checkpoint_run_folder`` maps a checkpoint back to its run folder,
  so ``enerf eval`` / ``render`` / ``mesh`` write beside the run wherever it was moved.

* ``check_output_dir`` / ``check_output_file``: the place exists or can be created (a file's
  folder must exist), and can be written; otherwise one ``ConfigError`` line naming the flag and
  the path part that blocks it.
  Nothing is created by the check.
* ``RunLock``: an OS file lock (``fcntl.flock``) on ``<run>/.lock``, held while a command writes
  into the run folder. A second writer stops at once with one line naming the process that holds
  it. The kernel drops the lock when its process dies (``kill -9`` included), so a killed run
  never leaves a stale lock behind.
* ``remove_stale_temp_files``: the ``.NAME.*.tmp`` files of an atomic write that a killed process
  never renamed (``enerf.atomic``); removed once the lock is held, so no live writer owns them.
* ``run_splats_path`` / ``choose_splats``: the splats baked into a run folder (``<run>/splats.ply``),
  which ``enerf view``, ``render`` and ``export html`` draw unless told otherwise.
"""

from __future__ import annotations

import errno
import json
import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    from .config import RunConfig, ShapeRunConfig

__all__ = ["config_run_folder", "checkpoint_run_folder", "check_output_dir", "check_output_file", "check_parent_exists", "RunLock", "remove_stale_temp_files", "LOCK_NAME",
           "RUN_SPLATS", "run_splats_path", "SplatChoice", "choose_splats", "read_metrics"]

LOCK_NAME = ".lock"
RUN_SPLATS = "splats.ply"  # the run's baked splats (a 3DGS PLY), in the run folder


def config_run_folder(cfg: RunConfig | ShapeRunConfig) -> Path:
    """Where a run trained with ``cfg`` writes: ``<basedir>/<expname>``."""
    return Path(cfg.basedir) / cfg.expname


def checkpoint_run_folder(ckpt_path: str | Path, cfg: RunConfig | ShapeRunConfig) -> Path:
    """The run folder of a checkpoint: ``<run>`` for ``<run>/checkpoints/NAME.pt`` (wherever the
    run was moved), else the folder its config names (``config_run_folder``)."""
    ckpt = Path(ckpt_path).resolve()
    return ckpt.parent.parent if ckpt.parent.name == "checkpoints" else config_run_folder(cfg)


def run_splats_path(run_folder: str | Path) -> Path | None:
    """``<run>/splats.ply`` (the field baked into Gaussian splats) when the run folder has that
    file, else None."""
    path = Path(run_folder) / RUN_SPLATS
    return path if path.is_file() else None


def _shown(path: Path) -> str:
    """``path`` as a line shows it: relative to the working folder when inside it."""
    path = Path(os.path.abspath(path))
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class SplatChoice:
    """What a command that reads a run draws: a splat file, or the field; and why."""

    path: Path | None  # the splat file; None: the field
    origin: str  # "--splats" (named), "run" (<run>/splats.ply), "--field" (asked for), "none" (the run has none)

    def describe(self, hint: str = "--field for the field") -> str:
        """The command's line, after ``PROG: ``: e.g. ``drawing the run's splats (runs/x/splats.ply);
        --field for the field``; ``hint`` follows the run's splats ("": nothing)."""
        if self.origin == "--splats":
            return f"drawing the splats of {_shown(self.path)} (--splats)"
        if self.origin == "run":
            return f"drawing the run's splats ({_shown(self.path)})" + (f"; {hint}" if hint else "")
        if self.origin == "--field":
            return "rendering the field (--field)"
        return f"rendering the field (the run has no {RUN_SPLATS})"


def choose_splats(splats: str | Path | None, run_folder: str | Path | None, field: bool = False) -> SplatChoice:
    """``--splats F`` when given, else (without ``--field``) ``<run>/splats.ply`` when it exists,
    else the field. ``run_folder``: None without a run (then only ``splats`` can be drawn)."""
    if splats is not None:
        return SplatChoice(Path(splats), "--splats")
    if field:
        return SplatChoice(None, "--field")
    found = run_splats_path(run_folder) if run_folder is not None else None
    return SplatChoice(found, "run") if found is not None else SplatChoice(None, "none")


def _nearest_existing(path: Path) -> Path:
    probe = path
    while not os.path.lexists(probe):
        if probe.parent == probe:
            break
        probe = probe.parent
    return probe


def _writable(folder: Path) -> str | None:
    """None when a file can be created in ``folder``; else the reason. Probes with a temp file
    (removed at once) so read-only mounts and root's pseudo file systems are caught too."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return "permission denied"
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".enerf-probe-"):
            pass
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def check_output_dir(path: str | Path, flag: str) -> Path:
    """``path`` is a folder, or can be made one (its nearest existing ancestor is a writable
    folder); returns it. Raises ConfigError naming ``flag`` otherwise."""
    path = Path(os.path.abspath(path))
    probe = _nearest_existing(path)
    if probe.is_symlink() and not probe.exists():
        raise ConfigError(f"{flag} {path}: {probe} is a broken symbolic link; choose another path")
    if not probe.is_dir():
        what = "the path itself" if probe == path else str(probe)
        raise ConfigError(f"{flag} {path}: {what} is a file, not a folder; choose another path")
    reason = _writable(probe)
    if reason is not None:
        raise ConfigError(f"{flag} {path}: cannot write in {probe} ({reason}); choose a writable folder")
    return path


def check_output_file(path: str | Path, flag: str) -> Path:
    """``path`` can be written as a file: not a folder, its folder exists (a missing one is
    refused, not made: a mistyped folder should not be created silently) and is writable."""
    path = Path(os.path.abspath(path))
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a folder; give a file name")
    check_output_dir(path.parent, flag)
    check_parent_exists(path, flag)
    return path


def check_parent_exists(path: str | Path, flag: str) -> None:
    """The folder ``path`` goes in exists (a missing one is refused with one line, not made)."""
    parent = Path(os.path.abspath(path)).parent
    if not parent.is_dir():
        raise ConfigError(f"{flag} {path}: folder {parent} does not exist; create it first")


def remove_stale_temp_files(config_run_folder: Path) -> list[Path]:
    """Delete the ``.*.tmp`` files of unfinished atomic writes in ``config_run_folder`` and the folders a
    run writes into (``checkpoints``, ``test_views``); returns what was removed. Call with the
    run's lock held."""
    removed = []
    for folder in (config_run_folder, config_run_folder / "checkpoints", config_run_folder / "test_views"):
        if not folder.is_dir():
            continue
        for tmp in folder.glob(".*.tmp"):
            if tmp.is_file():
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
    return removed


class RunLock:
    """``with RunLock(config_run_folder, "enerf train"):`` — exclusive writer of ``config_run_folder``.

    Creates ``config_run_folder`` (check it first with ``check_output_dir``), locks ``config_run_folder/.lock`` with
    ``fcntl.flock`` and writes this process's id and command into it; raises ConfigError when
    another process holds the lock. The lock file stays (removing it would race a waiting
    writer); the lock itself ends with the ``with`` block or the process.
    """

    def __init__(self, config_run_folder: str | Path, command: str) -> None:
        self.config_run_folder = Path(config_run_folder)
        self.command = command
        self._fd: int | None = None

    def acquire(self) -> "RunLock":
        try:
            self.config_run_folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.config_run_folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ConfigError(f"{self.config_run_folder}: cannot create the run folder's lock file ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise ConfigError(f"{self.config_run_folder}: cannot lock the run folder ({exc.strerror})") from None
            raise ConfigError(f"{self.config_run_folder} is in use by {holder}; wait for it to finish or use another "
                              "--expname / --basedir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()} ({self.command})\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def read_metrics(path: Path) -> dict:
    """A run's metrics.json as a dict ({} when absent); ConfigError when it is not a JSON object."""
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid JSON ({str(exc).splitlines()[0]}); move it away or delete it, "
                          "then run again") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} holds a JSON {type(value).__name__}, not a metrics object; move it away or delete it")
    return value
