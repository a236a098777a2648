"""One validation layer for every command's configuration: ranges, types and combinations.

Each ``validate_*`` function raises ``ConfigError`` with one line naming the flag and the
allowed range (``--N_rand must be an integer in [1, 1048576], got 0``) and writes nothing;
the CLI calls them before any file is touched. The dataclasses in ``enerf.config`` keep their
own choice checks (``--conditioning`` and the like); the numeric ranges live here, one table
per config, so a range is stated once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable

from .config import CAMERA_PATHS, CompareConfig, MeshConfig, RunConfig, ShapeRunConfig, VideoConfig
from .errors import ConfigError

__all__ = [
    "Rule",
    "check_rules",
    "validate_run_config",
    "validate_shape_run_config",
    "validate_video_config",
    "validate_mesh_config",
    "validate_compare_config",
    "validate_synth",
    "validate_mesh_resolution",
    "MAX_SEED",
    "MAX_RAYS",
]

MAX_SEED = 2**32 - 1  # numpy's seed range
MAX_RAYS = 2**20  # rays per training step; more cannot be allocated on the machines enerf targets
MAX_GRID = 2048  # points per axis of a marching-cubes grid (2048^3 densities are 32 GiB)


@dataclass(frozen=True)
class Rule:
    """``--flag`` is read from ``section.name`` and must lie in [lo, hi] (open ends with
    ``lo_open`` / ``hi_open``); ``integer``: an int; ``each``: every value of a tuple."""

    flag: str
    section: str
    name: str
    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    each: bool = False

    def allowed(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        if self.lo == -math.inf and self.hi == math.inf:
            return kind
        if self.hi == math.inf:
            return f"{kind} {'>' if self.lo_open else '>='} {_bound(self.lo)}"
        left, right = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
        return f"{kind} in {left}{_bound(self.lo)}, {_bound(self.hi)}{right}"

    def ok(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below

    def check(self, config: Any) -> None:
        """Raise ConfigError unless ``config.section.name`` (``config.name`` when section is "") is allowed."""
        self.check_value(getattr(config if self.section == "" else getattr(config, self.section), self.name))

    def check_value(self, value: Any) -> None:
        values = value if self.each and isinstance(value, (tuple, list)) else (value,)
        for item in values:
            if not self.ok(item):
                what = "values must each be" if self.each else "must be"
                raise ConfigError(f"--{self.flag} {what} {self.allowed()}, got {_show(value)}")


def _bound(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _show(value: Any) -> str:
    if isinstance(value, (tuple, list)):
        return " ".join(_show(v) for v in value) or "(none)"
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _int(flag, section, name, lo=0, hi=math.inf, each=False) -> Rule:
    return Rule(flag, section, name, lo=lo, hi=hi, integer=True, each=each)


def _nonneg(flag, section, name) -> Rule:
    return Rule(flag, section, name, lo=0.0)


def _positive(flag, section, name) -> Rule:
    return Rule(flag, section, name, lo=0.0, lo_open=True)


def check_rules(config: Any, rules: Iterable[Rule]) -> None:
    """Raise ConfigError on the first rule ``config`` breaks."""
    for rule in rules:
        rule.check(config)


# The MLP flags that `enerf train` and `enerf shape train` share.
COMMON_FIELD_RULES = (
    _int("netdepth", "field", "netdepth", lo=1),
    _int("netwidth", "field", "netwidth", lo=1),
    _int("skips", "field", "skips", each=True),
    _int("multires", "field", "multires", hi=32),
    _int("conditioning_passes", "field", "conditioning_passes", lo=1),
    _positive("conditioning_eps", "field", "conditioning_eps"),
)

# Optimisation and cadence flags that `enerf train` and `enerf shape train` share.
COMMON_TRAIN_RULES = (
    _positive("lrate", "train", "lrate"),
    _int("seed", "train", "seed", hi=MAX_SEED),
    _int("eval_every", "train", "eval_every"),
    _int("log_every", "train", "log_every", lo=1),
    _int("kappa_every", "train", "kappa_every"),
    _int("ckpt_every", "train", "ckpt_every"),
    _nonneg("time_budget", "train", "time_budget"),
    _nonneg("weight_decay", "train", "weight_decay"),
    _nonneg("grad_reg", "train", "grad_reg"),
)

RUN_RULES = (
    _int("factor", "data", "factor"),
    _int("testskip", "data", "testskip", lo=1),
    _int("llffhold", "data", "llffhold"),
    _positive("bd_factor", "data", "bd_factor"),
    *COMMON_FIELD_RULES,
    _int("multires_views", "field", "multires_views", hi=32),
    _int("view_width", "field", "view_width", lo=1),
    _int("grid_resolutions", "field", "grid_resolutions", lo=2, each=True),
    _int("grid_components", "field", "grid_components", lo=1),
    Rule("grid_aabb", "field", "grid_aabb", each=True),
    _int("N_samples", "render", "n_samples", lo=1),
    _int("N_importance", "render", "n_importance"),
    _nonneg("raw_noise_std", "render", "raw_noise_std"),
    _int("chunk", "render", "chunk", lo=1),
    _positive("render_step_size", "render", "render_step_size"),
    _int("grid_resolution", "render", "grid_resolution", lo=1, hi=1024),
    _nonneg("occ_thre", "render", "occ_thre"),
    _int("grid_update_every", "render", "grid_update_every", lo=1),
    _int("grid_warmup", "render", "grid_warmup"),
    Rule("grid_ema_decay", "render", "grid_ema_decay", lo=0.0, hi=1.0, lo_open=True),
    Rule("early_stop_eps", "render", "early_stop_eps", lo=0.0, hi=1.0),
    Rule("alpha_thre", "render", "alpha_thre", lo=0.0, hi=1.0),
    _int("early_stop_block", "render", "early_stop_block"),
    _int("target_sample_batch_size", "render", "target_sample_batch_size", lo=-1),
    _int("iters", "train", "iters", lo=1),
    _int("N_rand", "train", "n_rand", lo=1, hi=MAX_RAYS),
    _positive("lrate_decay", "train", "lrate_decay"),
    _positive("lrate_scale", "train", "lrate_scale"),
    _nonneg("encoding_lrate", "train", "encoding_lrate"),
    _nonneg("tv_weight", "train", "tv_weight"),
    _int("precrop_iters", "train", "precrop_iters"),
    Rule("precrop_frac", "train", "precrop_frac", lo=0.0, hi=1.0, lo_open=True),
    _int("eval_views", "train", "eval_views"),
    _nonneg("stop_at_psnr", "train", "stop_at_psnr"),
    *COMMON_TRAIN_RULES,
)


def _check_run_name(expname: str, basedir: str) -> None:
    if not str(expname).strip() or str(expname).strip() in (".", ".."):
        raise ConfigError(f"--expname must name a folder under --basedir, got {expname!r}")
    if not str(basedir).strip():
        raise ConfigError("--basedir must name a folder, got ''")
    if "\0" in str(expname) + str(basedir):
        raise ConfigError("--expname and --basedir must not contain NUL characters")


def validate_run_config(cfg: RunConfig) -> RunConfig:
    """Ranges of every ``enerf train`` flag and the combinations that cannot work; returns ``cfg``."""
    _check_run_name(cfg.expname, cfg.basedir)
    check_rules(cfg, RUN_RULES)
    f, r = cfg.field, cfg.render
    if f.encoding == "triplane":
        lo, hi = f.grid_aabb[:3], f.grid_aabb[3:]
        if len(f.grid_aabb) != 6 or any(a >= b for a, b in zip(lo, hi)):
            raise ConfigError(f"--grid_aabb takes 6 numbers xmin ymin zmin xmax ymax zmax with each min < max, "
                              f"got {_show(f.grid_aabb)}")
        if not f.grid_resolutions:
            raise ConfigError("--grid_resolutions needs at least one value (>= 2)")
    if any(s == f.netdepth - 1 for s in f.skips):
        raise ConfigError(f"--skips must be in 0..{f.netdepth - 2} (or >= {f.netdepth}, ignored) for --netdepth "
                          f"{f.netdepth}, got {_show(f.skips)}")
    if r.renderer != "hierarchical" and r.n_importance > 0:
        raise ConfigError(f"--N_importance must be 0 with --renderer {r.renderer} (one field), got {r.n_importance}")
    if r.cull_occluded and r.early_stop_eps <= 0:
        raise ConfigError("--cull_occluded needs --early_stop_eps > 0, got 0")
    return cfg


SHAPE_RULES = (
    _nonneg("padding", "data", "padding"),
    _int("n_uniform", "data", "n_uniform"),
    _int("n_near", "data", "n_near"),
    Rule("near_sigmas", "data", "near_sigmas", lo=0.0, lo_open=True, each=True),
    _int("sample_seed", "data", "sample_seed", hi=MAX_SEED - 1000),
    *COMMON_FIELD_RULES,
    _int("iters", "train", "iters", lo=1),
    _int("batch_size", "train", "batch_size", lo=1, hi=2**24),
    _int("lrate_decay", "train", "lrate_decay"),
    _positive("sdf_clamp", "train", "sdf_clamp"),
    _nonneg("eikonal_weight", "train", "eikonal_weight"),
    _int("eval_points", "train", "eval_points", lo=1),
    _int("surface_points", "train", "surface_points", lo=1),
    _int("mesh_resolution", "train", "mesh_resolution", lo=8, hi=MAX_GRID),
    _positive("fscore_tau", "train", "fscore_tau"),
    _int("chunk", "train", "chunk", lo=1),
    *COMMON_TRAIN_RULES,
)


def validate_shape_run_config(cfg: ShapeRunConfig) -> ShapeRunConfig:
    """Ranges of every ``enerf shape train`` flag; returns ``cfg``."""
    _check_run_name(cfg.expname, cfg.basedir)
    check_rules(cfg, SHAPE_RULES)
    return cfg


VIDEO_RULES = (
    _int("frames", "", "frames", lo=1, hi=100_000),
    _int("fps", "", "fps", lo=1, hi=1000),
    _int("downscale", "", "downscale", lo=1),
    Rule("quality", "", "quality", lo=0.0, hi=10.0),
    _int("chunk", "", "chunk"),
)


def validate_video_config(cfg: VideoConfig) -> VideoConfig:
    """``enerf render`` flags; returns ``cfg``."""
    if cfg.path not in CAMERA_PATHS:
        raise ConfigError(f"--path {cfg.path!r} is not one of {', '.join(CAMERA_PATHS)}")
    check_rules(cfg, VIDEO_RULES)
    from matplotlib import colormaps

    if cfg.colormap not in colormaps:
        raise ConfigError(f"--colormap {cfg.colormap!r} is not a matplotlib colormap (e.g. turbo, viridis, gray)")
    return cfg


MESH_RULES = (
    _int("resolution", "", "resolution", lo=8, hi=MAX_GRID),
    Rule("threshold", "", "threshold"),
    _int("chunk", "", "chunk", lo=1),
    _int("min_component", "", "min_component"),
    Rule("bbox", "", "bbox", each=True),
)


def validate_mesh_config(cfg: MeshConfig) -> MeshConfig:
    """``enerf mesh`` flags; returns ``cfg``."""
    check_rules(cfg, MESH_RULES)
    if cfg.field not in ("fine", "coarse"):
        raise ConfigError(f"--field {cfg.field!r} is not one of fine, coarse")
    if cfg.frame not in ("world", "scene"):
        raise ConfigError(f"--frame {cfg.frame!r} is not one of world, scene")
    if cfg.bbox and (len(cfg.bbox) != 6 or any(a >= b for a, b in zip(cfg.bbox[:3], cfg.bbox[3:]))):
        raise ConfigError(f"--bbox takes 6 numbers xmin ymin zmin xmax ymax zmax with each min < max, got {_show(cfg.bbox)}")
    return cfg


def validate_mesh_resolution(resolution: int) -> None:
    """``enerf shape mesh --resolution``."""
    _int("resolution", "", "resolution", lo=8, hi=MAX_GRID).check_value(resolution)


def validate_compare_config(cfg: CompareConfig) -> CompareConfig:
    """``enerf compare`` flags (scenes, modes and seeds themselves are checked when the grid is planned)."""
    check_rules(cfg, (_int("jobs", "", "jobs", lo=1, hi=256), _int("seeds", "", "seeds", hi=MAX_SEED, each=True)))
    if not str(cfg.out).strip():
        raise ConfigError("--out must name a folder, got ''")
    return cfg


def validate_synth(views: int, width: int, height: int, seed: int) -> None:
    """``enerf data synth`` flags."""
    values = {"views": views, "width": width, "height": height, "seed": seed}
    rules = (_int("views", "", "views", lo=1, hi=10_000), _int("width", "", "width", lo=2, hi=16384),
             _int("height", "", "height", lo=2, hi=16384), _int("seed", "", "seed", hi=MAX_SEED))
    for rule in rules:
        rule.check_value(values[rule.name])
