"""Configuration dataclasses: one per component, and the only home of default values.

Field names follow nerf-pytorch's config keys where one exists (``N_rand`` becomes
``TrainConfig.n_rand`` and so on); ``enerf.cli`` maps the flags onto these classes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from dataclasses import field as dc_field

from .errors import ConfigError

__all__ = [
    "DataConfig",
    "FieldConfig",
    "RenderConfig",
    "TrainConfig",
    "RunConfig",
    "CONDITIONING_MODES",
    "run_config_from_dict",
]

CONDITIONING_MODES = ("none", "row", "col", "rowcol")


@dataclass(frozen=True)
class DataConfig:
    """Where the scene lives and how it is loaded (LLFF conventions)."""

    scene: str = "demo"  # a name under data/ ("demo" is made on first use) or "fern" etc.
    datadir: str = ""  # explicit scene folder; overrides `scene` when set
    dataset_type: str = "llff"
    factor: int = 8  # image downscale factor (images_<factor>/ or in-process resize)
    llffhold: int = 8  # every llffhold-th image is held out for testing (0: none)
    use_ndc: bool = True  # NDC rays for forward-facing scenes
    spherify: bool = False
    recenter: bool = True
    bd_factor: float = 0.75


@dataclass(frozen=True)
class FieldConfig:
    """The NeRF MLP and its weight conditioning."""

    netdepth: int = 8  # hidden layers of the trunk
    netwidth: int = 256
    skips: tuple[int, ...] = (4,)  # trunk layers that re-read the encoded input
    multires: int = 10  # positional-encoding frequencies for positions
    multires_views: int = 4  # ... and for view directions
    use_viewdirs: bool = True
    view_width: int = 128  # width of the view-direction branch (netwidth // 2 in NeRF)
    conditioning: str = "none"  # one of CONDITIONING_MODES
    conditioned_layers: str = "hidden"  # "hidden", "all", or comma-separated layer names
    detach_conditioner: bool = False
    conditioning_passes: int = 1  # alternating passes for rowcol
    conditioning_eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.conditioning not in CONDITIONING_MODES:
            raise ConfigError(
                f"--conditioning {self.conditioning!r} is not one of {', '.join(CONDITIONING_MODES)}"
            )


@dataclass(frozen=True)
class RenderConfig:
    """Hierarchical volume rendering (NeRF's coarse + fine sampling)."""

    n_samples: int = 64  # coarse samples per ray (N_samples)
    n_importance: int = 0  # extra fine samples per ray (N_importance); 0: coarse only
    perturb: bool = True  # stratified jitter while training
    lindisp: bool = False  # sample linearly in disparity
    raw_noise_std: float = 0.0  # noise on pre-activation density while training
    white_bkgd: bool = False
    chunk: int = 8192  # rays per forward pass when rendering whole images


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, logging and evaluation cadence."""

    iters: int = 5000
    n_rand: int = 1024  # rays per step (N_rand)
    lrate: float = 5e-4
    lrate_decay: float = 250  # thousands of steps for a 10x decay (nerf-pytorch)
    seed: int = 0
    precrop_iters: int = 0
    precrop_frac: float = 0.5
    eval_every: int = 0  # steps between held-out evaluations (0: only at the end)
    eval_views: int = 0  # held-out views used by periodic evaluations (0: all)
    log_every: int = 100  # steps between TensorBoard scalars
    kappa_every: int = 500  # steps between per-layer condition numbers
    ckpt_every: int = 0  # steps between checkpoints (0: only at the end)
    time_budget: float = 0.0  # stop after this many seconds of training (0: no limit)
    device: str = "auto"  # auto | cpu | cuda
    compute_lpips: bool = True


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs; stored verbatim in every checkpoint."""

    expname: str = "demo"
    basedir: str = "runs"
    data: DataConfig = dc_field(default_factory=DataConfig)
    field: FieldConfig = dc_field(default_factory=FieldConfig)
    render: RenderConfig = dc_field(default_factory=RenderConfig)
    train: TrainConfig = dc_field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return asdict(self)


def _build(cls, values: dict):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown {cls.__name__} keys in checkpoint config: {', '.join(unknown)}")
    values = dict(values)
    if "skips" in values:
        values["skips"] = tuple(values["skips"])
    return cls(**values)


def run_config_from_dict(values: dict) -> RunConfig:
    """Rebuild a RunConfig from ``RunConfig.to_dict()`` output (e.g. from a checkpoint)."""
    return RunConfig(
        expname=values["expname"],
        basedir=values["basedir"],
        data=_build(DataConfig, values["data"]),
        field=_build(FieldConfig, values["field"]),
        render=_build(RenderConfig, values["render"]),
        train=_build(TrainConfig, values["train"]),
    )
