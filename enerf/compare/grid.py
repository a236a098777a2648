"""Run (or resume) a grid of scenes x modes x seeds, one subprocess per run.

Every run lives in ``<out>/runs/<scene>-<mode>-s<seed>/`` beside a ``compare_run.json``
that records what it was launched with (task, scene, mode, seed, the sha256 of the config
file's settings, so that an edited comment reruns nothing, the extra flags) and, once it finished, its wall time and peak RSS. A run whose
``metrics.json`` exists and whose record matches is skipped; a matching run that was cut
off is resumed from its checkpoint (tasks with a resume flag); a run whose record differs
is started again.

The command runner is injectable (``runner(cmd, env, log_path) -> ProcessResult``) so tests
and other front ends can run the grid without subprocesses; so is the launcher that runs the
commands (``launchers.py``: here, or as Ray tasks).
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import configargparse
from tqdm import tqdm

from ..atomic import atomic_write_text
from ..errors import ConfigError, EnerfError
from .launchers import Job, Launcher, ProcessResult, Runner, local_launcher, log_tail, subprocess_runner, threads_per_run
from .tasks import ModeSpec, TaskKind

__all__ = ["ProcessResult", "GridCell", "Runner", "subprocess_runner", "scene_configs", "plan_grid", "run_grid",
           "threads_per_run"]


@dataclass
class GridCell:
    """One cell of the grid and where its results live."""

    scene: str
    mode: ModeSpec
    seed: int
    basedir: Path
    expname: str
    signature: dict
    config: str | None = None  # config file of this run's scene
    file_digest: str | None = None  # sha256 of the config file's bytes: what older records hold
    status: str = "pending"  # pending | skipped | done | failed
    record: dict = field(default_factory=dict)

    def launched_as_now(self) -> bool:
        """Whether the record says the run was launched as it would be now."""
        recorded = self.record.get("signature")
        return recorded == self.signature or recorded == {**self.signature, "config_sha256": self.file_digest}

    @property
    def config_run_folder(self) -> Path:
        return self.basedir / self.expname

    @property
    def metrics_path(self) -> Path:
        return self.config_run_folder / "metrics.json"

    @property
    def record_path(self) -> Path:
        return self.config_run_folder / "compare_run.json"

    def metrics(self) -> dict:
        return json.loads(self.metrics_path.read_text())


def scene_label(scene: str) -> str:
    """The name a scene goes by in tables and folder names: a folder's basename, a file's name
    without its suffix (a mesh), else the name itself (a built-in scene or shape)."""
    path = Path(scene)
    return path.name if path.is_dir() else path.stem if path.is_file() else scene


def _config_digests(config: str | None) -> tuple[str | None, str | None]:
    """sha256 of the settings in a config file (its ``key = value`` lines as configargparse reads
    them: comments and layout do not count), and of the file's bytes (older records)."""
    if not config:
        return None, None
    path = Path(config)
    if not path.is_file():
        raise ConfigError(f"--config {config}: file not found")
    text = path.read_text()
    settings = configargparse.DefaultConfigFileParser().parse(io.StringIO(text))
    settings_json = json.dumps(sorted(settings.items()))
    return hashlib.sha256(settings_json.encode()).hexdigest(), hashlib.sha256(path.read_bytes()).hexdigest()


def scene_configs(scenes, items: list[str] | str | None) -> dict[str, str | None]:
    """The config file of each scene from ``--config`` items: ``FILE`` (every scene without one
    of its own) or ``SCENE=FILE`` (that scene), e.g. ``fern=configs/fern_cpu.txt lego=configs/lego_cpu.txt``.

    Raises:
        ConfigError: a ``SCENE=`` that names no scene of the grid, or two default files.
    """
    items = [items] if isinstance(items, str) else list(items or [])
    default, own = None, {}
    for item in items:
        scene, sep, path = item.partition("=")
        if not sep:
            if default is not None:
                raise ConfigError(f"--config names two files for every scene ({default}, {item}); use SCENE=FILE")
            default = item
        elif scene not in scenes:
            raise ConfigError(f"--config {item}: {scene!r} is not one of --scenes ({' '.join(scenes)})")
        else:
            own[scene] = path
    return {scene: own.get(scene, default) for scene in scenes}


def plan_grid(task: TaskKind, scenes, modes: list[ModeSpec], seeds, out: Path, config: list[str] | str | None,
              extra: list[str]) -> list[GridCell]:
    """The runs of the grid, scene-major, with their recorded state (skipped when finished).

    ``config``: ``--config`` items (see ``scene_configs``)."""
    if not scenes or not modes or not seeds:
        raise ConfigError("enerf compare needs at least one scene, one mode and one seed")
    labels = [m.label for m in modes]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"--modes lists a mode twice: {' '.join(m.spec for m in modes)}")
    configs = scene_configs(scenes, config)
    basedir = Path(out) / "runs"
    runs = []
    for scene in scenes:
        digest, file_digest = _config_digests(configs[scene])
        for mode in modes:
            for seed in seeds:
                signature = {"task": task.name, "scene": scene, "mode": mode.spec, "seed": int(seed),
                             "config_sha256": digest, "extra": list(extra)}
                run = GridCell(scene, mode, int(seed), basedir, f"{scene_label(scene)}-{mode.label}-s{seed}", signature,
                              configs[scene], file_digest)
                if run.record_path.is_file():
                    try:
                        run.record = json.loads(run.record_path.read_text())
                    except ValueError:
                        run.record = {}
                if run.launched_as_now() and run.record.get("status") == "done" and run.metrics_path.is_file():
                    run.status = "skipped"
                runs.append(run)
    return runs


def _start(task: TaskKind, run: GridCell, extra: list[str]) -> Job:
    """Record ``run`` as running; its command (resuming a matching run that was cut off)."""
    resume = (run.launched_as_now() and bool(task.resume_flag)
              and (run.config_run_folder / "checkpoints" / "latest.pt").is_file())
    cmd = task.command(sys.executable, run.scene, run.mode, run.seed, run.basedir, run.expname, run.config, extra, resume)
    run.record = {"signature": run.signature, "status": "running", "command": cmd, "resumed": resume}
    atomic_write_text(run.record_path, json.dumps(run.record, indent=2) + "\n")
    return Job(cmd, run.config_run_folder / "compare.log")


def _finish(run: GridCell, result: ProcessResult) -> None:
    """Record how ``run`` ended; a failed run's log tail goes to stderr at once."""
    ok = result.returncode == 0 and run.metrics_path.is_file()
    run.status = "done" if ok else "failed"
    run.record.update(status=run.status, returncode=result.returncode, wall_seconds=result.wall_seconds,
                      peak_rss_gb=result.peak_rss_gb)
    atomic_write_text(run.record_path, json.dumps(run.record, indent=2) + "\n")
    if not ok:
        tail = "".join(f"\n    {line}" for line in log_tail(run.config_run_folder / "compare.log"))
        tqdm.write(f"{run.expname} failed (exit {result.returncode}); end of {run.config_run_folder / 'compare.log'}:{tail}",
                   file=sys.stderr)


def run_grid(task: TaskKind, runs: list[GridCell], extra: list[str], jobs: int = 1,
             runner: Runner = subprocess_runner, progress: bool = True, launcher: Launcher | None = None) -> list[GridCell]:
    """Launch every run that is not skipped with ``launcher`` (default: here, ``jobs`` at a time,
    with ``runner``); the others go on when one fails. Raises EnerfError if any failed."""
    launch = launcher or local_launcher(runner, jobs)
    todo = [r for r in runs if r.status != "skipped"]
    bar = tqdm(total=len(runs), initial=len(runs) - len(todo), desc="compare", disable=not progress, dynamic_ncols=True)
    for index, result in launch([_start(task, run, extra) for run in todo]):
        run = todo[index]
        _finish(run, result)
        bar.set_postfix_str(f"{run.expname}: {run.status}")
        bar.update(1)
    bar.close()
    failed = [r for r in runs if r.status == "failed"]
    if failed:
        first = failed[0]
        raise EnerfError(
            f"{len(failed)} of {len(runs)} runs failed; first {first.expname} "
            f"(exit {first.record.get('returncode')}), see {first.config_run_folder / 'compare.log'}"
        )
    return runs
