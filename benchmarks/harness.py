"""What every benchmark and study records beside its figures, in one place: the machine, the load
average (``uptime``) before and after, wall time, the git commit of the tree measured, the command
that reproduces the record, and the record itself written atomically (``enerf.atomic``: a reader
never sees half a file).

    from benchmarks.harness import Timer, command_line, load_average, machine, write_record

    load_before = load_average()
    with Timer() as t:
        ...
    write_record(path, {"command": command_line(), "machine": machine(), "commit": git_commit(),
                        "load_before": load_before, "load_after": load_average(), "seconds": t.seconds})

Run from the repository root: ``python -m benchmarks.NAME ...`` or ``python -m studies.NAME ...``.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from enerf.atomic import atomic_write_text, json_safe

__all__ = ["ROOT", "TRAINING_CODE", "Timer", "as_run", "command_line", "git_commit", "load_average", "machine",
           "oldest_commit", "parse_load", "write_record", "write_report_files"]

ROOT = Path(__file__).resolve().parents[1]  # the repository root (benchmarks/ and studies/ live in it)
# What a record of a NeRF training run depends on (its ``depends``, benchmarks/pages: a later commit to one of
# these makes it stale); each benchmark adds what else it runs (its configs, exports, the viewer ...).
TRAINING_CODE = ["enerf/nn", "enerf/fields", "enerf/render", "enerf/train", "enerf/data", "enerf/cameras", "enerf/optim",
                 "enerf/config", "enerf/metrics.py", "enerf/device.py", "enerf/distributed.py"]


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages (what ``uptime`` prints), to 2 decimals."""
    return [round(x, 2) for x in os.getloadavg()]


def parse_load(text: str) -> list[float] | None:
    """The 1-, 5- and 15-minute load averages written as "B1 B5 B15" (or with commas); None unless three numbers."""
    try:
        load = [float(x) for x in text.replace(",", " ").split()]
    except ValueError:
        return None
    return load if len(load) == 3 else None


def cpu_model() -> str | None:
    """The processor's model name as Linux's /proc/cpuinfo gives it (e.g. "AMD EPYC"); None elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    names = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")]
    return names[0] if names and names[0] else None


def machine(device: str | None = None) -> str:
    """One line naming what ran the measurement: CPU cores and processor (its model where the system
    names it: machines of one architecture differ several-fold in speed), the GPU when ``device`` is a
    CUDA device, torch's version (when torch is imported or importable)."""
    parts = [f"{os.cpu_count()} CPU cores ({cpu_model() or platform.processor() or platform.machine()})"]
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of enerf
        return parts[0]
    if device is not None and str(device).startswith("cuda") and torch.cuda.is_available():
        parts.append(torch.cuda.get_device_name(torch.device(device)))
    parts.append(f"torch {torch.__version__}")
    return ", ".join(parts)


def git_commit(root: Path = ROOT) -> str | None:
    """The commit the working tree is at (``git rev-parse --short HEAD``), with ``+dirty`` when
    tracked files other than the records (``benchmarks/*.json``, which benchmarks write as they go)
    differ from it; None outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)benchmarks/*.json"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def oldest_commit(commits: list[str | None], root: Path = ROOT) -> str | None:
    """Of ``commits`` (git_commit's strings; None skipped), the one furthest behind HEAD: the oldest code a
    record with runs at several commits measured (its ``+dirty`` kept; one git cannot place counts as HEAD)."""
    def behind(commit: str) -> int:
        done = subprocess.run(["git", "rev-list", "--count", f"{commit.split('+')[0]}..HEAD"], cwd=root,
                              capture_output=True, text=True)
        return int(done.stdout) if done.returncode == 0 and done.stdout.strip().isdigit() else 0

    known = [c for c in commits if c]
    return max(known, key=behind) if known else None


def command_line(argv: list[str] | None = None) -> str:
    """The command that reproduces this process: ``python -m benchmarks.NAME ARGS`` for a module
    run with ``-m`` (``sys.argv[0]`` is then its file), else ``python ARGV``."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve() if argv else None
    if script is not None and script.suffix == ".py" and script.parent.parent == ROOT:
        head = ["python", "-m", f"{script.parent.name}.{script.stem}"]
    else:
        head = ["python", *argv[:1]]
    return shlex.join(head + argv[1:])


def as_run(cmd: list) -> list[str]:
    """CMD as this interpreter runs it: a leading ``enerf`` (the command a record shows) becomes
    ``sys.executable -m enerf``, so a benchmark started with a venv's python runs that venv's enerf
    whether or not the venv is activated (the ``enerf`` on PATH may be another installation's)."""
    cmd = [str(c) for c in cmd]
    return [sys.executable, "-m", "enerf", *cmd[1:]] if cmd[:1] == ["enerf"] else cmd


class Timer:
    """Wall time of a ``with`` block (``time.perf_counter``): ``seconds`` once it ends, or the time
    so far while it runs."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.end: float | None = None

    def __enter__(self) -> "Timer":
        self.start, self.end = time.perf_counter(), None
        return self

    def __exit__(self, *exc) -> None:
        self.end = time.perf_counter()

    @property
    def seconds(self) -> float:
        if self.start is None:
            return 0.0
        return (self.end if self.end is not None else time.perf_counter()) - self.start


def write_record(path: Path | str, record: dict, indent: int = 2) -> Path:
    """Write ``record`` as always-valid JSON (non-finite floats become null) to ``path`` through a
    temp file and a rename (parents made); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(json_safe(record), indent=indent, allow_nan=False) + "\n")
    return path


def write_entry(path: Path | str, name: str, entry: dict, what: str, depends: list[str]) -> Path:
    """Write ``entry`` as entry ``name`` of the record at ``path`` (a record of named ``entries``), which is made,
    with ``what``, ``depends`` and this machine, when absent; returns the path."""
    path = Path(path)
    record = json.loads(path.read_text()) if path.is_file() else {"what": what, "depends": depends,
                                                                    "machine": machine(), "entries": {}}
    record["entries"][name] = entry
    return write_record(path, record)


def keep_previous(record: dict, path: Path | str) -> dict:
    """``record``, before it replaces the record at ``path``: that one goes under ``previous`` when it
    measured another commit (without its own ``previous`` and the fields that describe the protocol
    rather than the result); with the same commit, its ``previous`` is carried over."""
    path = Path(path)
    old = json.loads(path.read_text()) if path.is_file() else {}
    if old.get("commit") not in (None, record.get("commit")):
        record["previous"] = {k: v for k, v in old.items() if k not in ("previous", "depends", "what", "command")}
    elif "previous" in old:
        record["previous"] = old["previous"]
    return record


def write_report_files(folder: Path, stem: str, record: dict, markdown: str, indent: int = 2) -> None:
    """Write ``folder/<stem>.json`` (``record``) and ``folder/<stem>.md`` (``markdown``), each
    atomically, then print ``markdown``."""
    folder = Path(folder)
    write_record(folder / f"{stem}.json", record, indent=indent)
    atomic_write_text(folder / f"{stem}.md", markdown)
    print(markdown)


def run_with_splats(ckpt: str, datadir: str | None):
    """(the LoadedRun of checkpoint ``ckpt`` with its photos, its splats.ply's path); exits with one line when the
    run has no splats."""
    from enerf.config import DATA_ROOT
    from enerf.loaded_run import load_run
    from enerf.runfolder import run_splats_path

    run = load_run(ckpt, DATA_ROOT, task="nerf", datadir=datadir, images=True)
    path = run_splats_path(run.folder)
    if path is None:
        raise SystemExit(f"{run.folder} has no splats.ply: run enerf train (or enerf export splats) first")
    return run, path
