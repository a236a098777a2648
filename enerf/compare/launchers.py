"""Where ``enerf compare`` runs its trainings: ``local`` (subprocesses on this machine, ``--jobs``
at a time) or ``ray`` (one Ray task per run, declaring ``--run_cpus`` / ``--run_gpus``, on a local
Ray instance or the cluster at ``--address``).

A launcher takes the grid's jobs and yields ``(index, ProcessResult)`` as each finishes, so the grid
records every run the moment it ends and a failed run never stops the others. Each job is one
``enerf train`` / ``enerf shape train`` command, run in a subprocess whose output goes to the
run's ``compare.log``. On a Ray cluster every node needs the same Python environment with enerf
installed, and ``--out`` on a file system all nodes share.
"""

from __future__ import annotations

import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from ..errors import ConfigError

__all__ = ["ProcessResult", "Runner", "Job", "Launcher", "subprocess_runner", "threads_per_run", "local_launcher",
           "ray_launcher", "make_launcher", "LAUNCHERS", "log_tail"]

LAUNCHERS = ("local", "ray")
RAY_MISSING = 'the ray launcher needs Ray: pip install -e ".[ray]"'


class ProcessResult(NamedTuple):
    returncode: int
    wall_seconds: float
    peak_rss_gb: float | None


Runner = Callable[[list[str], dict, Path], ProcessResult]


class Job(NamedTuple):
    """One run: its command and its log file."""

    cmd: list[str]
    log_path: Path


Launcher = Callable[[list[Job]], Iterator[tuple[int, ProcessResult]]]


def subprocess_runner(cmd: list[str], env: dict, log_path: Path) -> ProcessResult:
    """Run ``cmd`` with stdout and stderr in ``log_path``; measures wall time and peak RSS."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        tic = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped by wait4; tell Popen so it does not wait again
    return ProcessResult(code, time.perf_counter() - tic, usage.ru_maxrss / 1024**2)  # KiB -> GiB


def log_tail(path: Path, lines: int = 5) -> list[str]:
    """The last ``lines`` non-empty lines of a log (progress bars' carriage returns folded)."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    rows = [row.split("\r")[-1].rstrip() for row in text.splitlines()]
    return [row for row in rows if row.strip()][-lines:]


def threads_per_run(jobs: int) -> int:
    """CPU threads each of ``jobs`` parallel runs gets: cores // jobs (at least 1)."""
    return max(1, (os.cpu_count() or 1) // max(1, jobs))


def _run_env(threads: int) -> dict[str, str]:
    """This process's environment with ``threads`` torch / BLAS threads."""
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def local_launcher(runner: Runner = subprocess_runner, jobs: int = 1) -> Launcher:
    """Run the jobs here, ``jobs`` at a time, each with cores // jobs threads."""
    if jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {jobs}")
    env = _run_env(threads_per_run(jobs))

    def launch(todo: list[Job]) -> Iterator[tuple[int, ProcessResult]]:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(runner, job.cmd, env, job.log_path): i for i, job in enumerate(todo)}
            for future in as_completed(futures):
                yield futures[future], future.result()

    return launch


def _ray_job(job: Job, threads: int) -> ProcessResult:
    """A Ray task: the job in a subprocess on the worker's node, with the node's environment."""
    return subprocess_runner(job.cmd, _run_env(threads), job.log_path)


def ray_launcher(address: str = "", cpus: float = 1.0, gpus: float = 0.0) -> Launcher:
    """Each job as a Ray task declaring ``cpus`` CPUs and ``gpus`` GPUs. Uses Ray as it is when
    this process has initialized it already (e.g. ``ray.init(num_cpus=2)``), else joins
    ``address`` (a cluster's, from ``ray start --head``) or, without one, starts a local instance."""
    try:
        import ray
    except ImportError:
        raise ConfigError(RAY_MISSING) from None
    if not cpus > 0 or not gpus >= 0:
        raise ConfigError(f"--run_cpus must be > 0 and --run_gpus >= 0, got {cpus} and {gpus}")

    def launch(todo: list[Job]) -> Iterator[tuple[int, ProcessResult]]:
        if not ray.is_initialized():
            try:
                ray.init(address=address or None, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                raise ConfigError(f"could not start or join {where}: {str(exc).splitlines()[0]}") from None
        task = ray.remote(num_cpus=cpus, num_gpus=gpus, max_retries=0)(_ray_job)
        threads = max(1, int(cpus))
        pending = {task.remote(job, threads): i for i, job in enumerate(todo)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index = pending.pop(ref)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the task itself failed (node lost, ...)
                    with open(todo[index].log_path, "a") as log:
                        log.write(f"ray: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}\n")
                    result = ProcessResult(-1, 0.0, None)
                yield index, result

    return launch


def make_launcher(name: str, runner: Runner = subprocess_runner, jobs: int = 1, address: str = "",
                  cpus: float = 1.0, gpus: float = 0.0) -> Launcher:
    """The launcher ``--launcher name`` asks for (``local`` uses ``runner``, ``jobs`` at a time)."""
    if name == "local":
        return local_launcher(runner, jobs)
    if name == "ray":
        return ray_launcher(address, cpus, gpus)
    raise ConfigError(f"--launcher {name!r} is not one of {', '.join(LAUNCHERS)}")
