"""Shared by the scripts that run a methods x seeds grid (``studies.conditioning_study``,
``benchmarks.shapes compare``): the grid is ``enerf compare``'s (``enerf.compare``: one
subprocess per run in ``<out>/runs/<scene>-<mode>-s<seed>/``, finished runs skipped, cut-off
ones resumed, wall time and peak RSS in each run's ``compare_run.json``); the tools only add a
fixed thread count per run and their own tables."""

from __future__ import annotations

import statistics
from pathlib import Path

from enerf.compare.grid import GridCell, Runner, plan_grid, run_grid, subprocess_runner
from enerf.compare.tasks import get_task, parse_mode

__all__ = ["threads_runner", "grid_runs", "run_grid_runs", "finished_metrics", "mean_std"]


def threads_runner(threads: int) -> Runner:
    """``enerf compare``'s subprocess runner with ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` set to
    ``threads`` (0: leave ``enerf compare``'s cores // jobs)."""
    if threads <= 0:
        return subprocess_runner
    value = str(threads)
    return lambda cmd, env, log: subprocess_runner(cmd, {**env, "OMP_NUM_THREADS": value, "MKL_NUM_THREADS": value}, log)


def grid_runs(task: str, scenes: list[str], modes: list[str], seeds: list[int], out: Path, config: str | None,
              extra: list[str]) -> list[GridCell]:
    """The planned grid (``enerf.compare.grid.plan_grid``): scenes x modes x seeds, mode specs as
    ``enerf compare --modes`` (``row``, ``row:all``, ``row+bnp``)."""
    specs = [parse_mode(m, lr_scales=task == "nerf") for m in modes]
    return plan_grid(get_task(task), scenes, specs, seeds, Path(out), config, list(extra))


def run_grid_runs(task: str, runs: list[GridCell], extra: list[str], jobs: int = 1, threads: int = 0,
                  first_per_scene: bool = False) -> list[GridCell]:
    """Run the grid's unfinished runs, ``jobs`` at a time. ``first_per_scene``: one run of each
    scene alone first (so that a scene's cached data is made once before runs share it)."""
    runner = threads_runner(threads)
    firsts: dict[str, GridCell] = {}
    if first_per_scene:
        for run in runs:
            if run.status != "skipped":
                firsts.setdefault(run.scene, run)
        run_grid(get_task(task), list(firsts.values()), list(extra), 1, runner)
    first_ids = {id(r) for r in firsts.values()}
    rest = [r for r in runs if id(r) not in first_ids]
    run_grid(get_task(task), rest, list(extra), jobs, runner)
    return runs


def finished_metrics(runs: list[GridCell], scene: str, mode: str) -> list[dict]:
    """metrics.json of the finished runs of one scene and mode spec, in seed order."""
    return [r.metrics() for r in runs if r.scene == scene and r.mode.spec == mode and r.metrics_path.is_file()]


def mean_std(values: list[float], fmt: str = ".2f") -> str:
    """``m ± s`` over the values (the sample std), or the value alone when there is one."""
    if len(values) == 1:
        return f"{values[0]:{fmt}}"
    return f"{statistics.mean(values):{fmt}} ± {statistics.stdev(values):{fmt}}"
