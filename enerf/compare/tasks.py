"""What ``enerf compare`` can compare: a small registry of tasks (nerf, shape).

A task says how to launch one run (the ``enerf`` subcommand and its flags) and which
metrics.json keys make the table and the curves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError

__all__ = ["Metric", "TaskKind", "ModeSpec", "parse_mode", "TASKS", "get_task"]


@dataclass(frozen=True)
class Metric:
    key: str  # metrics.json key
    label: str  # table heading
    higher_is_better: bool
    fmt: str  # format of the numbers in compare.md


@dataclass(frozen=True)
class ModeSpec:
    """One column of the comparison: ``COND[+PRECOND][:LAYERS][~INIT][*LR]`` (e.g. ``row``, ``row+bnp``,
    ``row:all``, ``none~equilibrated``: plain training from row's step-0 weights, ``row*2``: row at
    twice the config's learning rates)."""

    spec: str
    conditioning: str
    precond: str = ""
    layers: str = ""
    lr_scale: str = ""
    init_weights: str = ""

    @property
    def label(self) -> str:
        """File-system-safe name: ``row:all`` -> ``row@all``, ``row*0.5`` -> ``rowx0.5``."""
        return self.spec.replace(":", "@").replace("/", "_").replace("*", "x")

    def flags(self) -> list[str]:
        out = ["--conditioning", self.conditioning]
        if self.precond:
            out += ["--precond", self.precond]
        if self.layers:
            out += ["--conditioned_layers", self.layers]
        if self.init_weights:
            out += ["--init_weights", self.init_weights]
        if self.lr_scale:
            out += ["--lrate_scale", self.lr_scale]
        return out


def parse_mode(spec: str, known_conditioning: tuple[str, ...] = (), known_precond: tuple[str, ...] = (),
               lr_scales: bool = False) -> ModeSpec:
    """Parse ``A``, ``A+B``, ``A:L`` or ``A+B:L`` (conditioning A, preconditioner B, layers L), each
    optionally followed by ``~I`` (``--init_weights I``) and by ``*S``: learning rates times S (only
    where ``lr_scales``: NeRF runs)."""
    body, star, scale = spec.partition("*")
    body, tilde, init = body.partition("~")
    if tilde and init not in ("native", "equilibrated", "vanilla"):
        raise ConfigError(f"--modes entry {spec!r}: the initial weights after '~' are native, equilibrated or vanilla")
    if star:
        if not lr_scales:
            raise ConfigError(f"--modes entry {spec!r}: a learning-rate factor (*S) is only for --task nerf")
        try:
            ok = 0 < float(scale) < float("inf")
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"--modes entry {spec!r}: the factor after '*' must be a number > 0, e.g. row*2")
    head, _, layers = body.partition(":")
    cond, _, precond = head.partition("+")
    if not cond or (":" in spec and not layers) or ("+" in head and not precond):
        raise ConfigError(f"--modes entry {spec!r} is not COND, COND+PRECOND, COND:LAYERS or COND+PRECOND:LAYERS")
    if known_conditioning and cond not in known_conditioning:
        raise ConfigError(f"--modes entry {spec!r}: conditioning {cond!r} is not one of {', '.join(known_conditioning)}")
    if precond and known_precond and precond not in known_precond:
        raise ConfigError(f"--modes entry {spec!r}: preconditioner {precond!r} is not one of {', '.join(known_precond)}")
    return ModeSpec(spec, cond, precond, layers, scale, init)


@dataclass(frozen=True)
class TaskKind:
    name: str
    subcommand: tuple[str, ...]  # enerf subcommand that trains one run
    scene_flag: str  # flag that names the scene (nerf) or mesh (shape)
    metrics: tuple[Metric, ...]  # table columns, in order
    curves: tuple[tuple[str, str], ...]  # (history entry, axis label): one <entry>_curves.png each
    images: bool  # side_by_side.png of a held-out view
    resume_flag: str = ""  # flag that continues a run from its checkpoint ("" if none)
    quiet_flag: str = ""  # flag that turns off the run's progress bar

    def command(self, python: str, scene: str, mode: ModeSpec, seed: int, basedir: Path, expname: str,
                config: str | None, extra: list[str], resume: bool) -> list[str]:
        """The command line of one run."""
        cmd = [python, "-m", "enerf.cli", *self.subcommand]
        if config:
            cmd += ["--config", config]
        if self.scene_flag == "--scene" and Path(scene).is_dir():
            cmd += ["--datadir", scene]  # a scene folder instead of a name under data/
        else:
            cmd += [self.scene_flag, scene]
        cmd += [*mode.flags(), "--seed", str(seed), "--basedir", str(basedir), "--expname", expname]
        if self.quiet_flag:
            cmd.append(self.quiet_flag)
        if resume and self.resume_flag:
            cmd.append(self.resume_flag)
        return cmd + list(extra)


def _enerf_task(name: str, subcommand: tuple[str, ...], scene_flag: str, metrics: tuple[Metric, ...],
                curves: tuple[tuple[str, str], ...], images: bool) -> TaskKind:
    """A task run by an ``enerf`` subcommand that takes ``--resume`` and ``--quiet``."""
    return TaskKind(name, subcommand, scene_flag, metrics, curves, images, resume_flag="--resume", quiet_flag="--quiet")


TASKS = {
    "nerf": _enerf_task(
        "nerf", ("train",), "--scene",
        (Metric("psnr", "PSNR (dB)", True, ".2f"), Metric("ssim", "SSIM", True, ".4f"),
         Metric("lpips", "LPIPS", False, ".4f")),
        curves=(("psnr", "held-out PSNR (dB)"), ("train_psnr", "training-batch PSNR (dB)")), images=True,
    ),
    "shape": _enerf_task(
        "shape", ("shape", "train"), "--mesh",
        (Metric("iou", "IoU", True, ".4f"), Metric("chamfer_l1", "Chamfer-L1", False, ".5f"),
         Metric("normal_consistency", "NC", True, ".4f"), Metric("fscore", "F-score", True, ".4f")),
        curves=(("iou", "IoU"),), images=False,
    ),
}


def get_task(name: str) -> TaskKind:
    if name not in TASKS:
        raise ConfigError(f"--task {name!r} is not one of {', '.join(TASKS)}")
    return TASKS[name]
