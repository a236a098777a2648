"""Configuration dataclasses: one per component, and the only home of default values.

Field names follow nerf-pytorch's config keys where one exists (``N_rand`` becomes
``TrainConfig.n_rand`` and so on); ``enerf.cli`` maps the flags onto these classes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from dataclasses import field as dc_field
from typing import ClassVar

from .errors import ConfigError

__all__ = [
    "DataConfig",
    "FieldConfig",
    "RenderConfig",
    "TrainConfig",
    "RunConfig",
    "CONDITIONING_MODES",
    "ENCODINGS",
    "DATASET_TYPES",
    "RENDERERS",
    "PRECOND_MODES",
    "DECAY_SPACES",
    "run_config_from_dict",
    "VideoConfig",
    "MeshConfig",
    "CompareConfig",
    "CAMERA_PATHS",
    "SHAPE_KINDS",
    "ShapeDataConfig",
    "ShapeFieldConfig",
    "ShapeTrainConfig",
    "ShapeRunConfig",
    "shape_run_config_from_dict",
]

DATASET_TYPES = ("auto", "llff", "blender")  # enerf.data.loaders.LOADERS
ENCODINGS = ("frequency", "triplane")  # enerf.fields.nerf: how positions enter the MLP
CONDITIONING_MODES = ("none", "row", "col", "rowcol", "wn", "ws")  # enerf.nn.conditioning.CONDITIONERS
RENDERERS = ("auto", "nerfacc", "torch_grid", "hierarchical")  # enerf.render.build
PRECOND_MODES = ("none", "bnp")  # gradient preconditioners (enerf.optim)
DECAY_SPACES = ("p", "z")  # where --weight_decay / --grad_reg regularize (enerf.optim.regularization)


@dataclass(frozen=True)
class DataConfig:
    """Where the scene lives and how it is loaded (LLFF conventions)."""

    scene: str = "demo"  # "demo" (made on first use), or a name under data/nerf_llff_data/ or data/nerf_synthetic/
    datadir: str = ""  # explicit scene folder; overrides `scene` when set
    dataset_type: str = "auto"  # one of DATASET_TYPES; auto: blender if transforms_*.json is there, llff if poses_bounds.npy
    factor: int = 0  # image downscale factor (LLFF: images_<factor>/ or in-process resize); 0: 8 for LLFF, 1 for Blender
    half_res: bool = False  # Blender: halve the stored images (nerf-pytorch's half_res)
    testskip: int = 1  # Blender: keep every testskip-th test frame (train keeps all)
    llffhold: int = 8  # every llffhold-th image is held out for testing (0: none)
    use_ndc: bool = True  # NDC rays for forward-facing scenes
    spherify: bool = False
    recenter: bool = True
    bd_factor: float = 0.75

    def __post_init__(self) -> None:
        if self.dataset_type not in DATASET_TYPES:
            raise ConfigError(f"--dataset_type {self.dataset_type!r} is not one of {', '.join(DATASET_TYPES)}")
        if self.factor < 0 or self.testskip < 1:
            raise ConfigError(f"--factor must be >= 0 (0: the dataset's default) and --testskip >= 1, "
                              f"got {self.factor} and {self.testskip}")


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
    encoding: str = "frequency"  # positions: frequency (NeRF's sinusoids) | triplane (TensoRF VM grids)
    grid_resolutions: tuple[int, ...] = (64, 256)  # triplane: plane side / line length per level
    grid_components: int = 8  # triplane: channels per plane-line product (3 x this per level)
    grid_aabb: tuple[float, ...] = (-1.5, -1.67, -1.0, 1.5, 1.67, 1.0)  # triplane: box on the grids (TensoRF's NDC box)

    def __post_init__(self) -> None:
        if self.conditioning not in CONDITIONING_MODES:
            raise ConfigError(
                f"--conditioning {self.conditioning!r} is not one of {', '.join(CONDITIONING_MODES)}"
            )
        if self.encoding not in ENCODINGS:
            raise ConfigError(f"--encoding {self.encoding!r} is not one of {', '.join(ENCODINGS)}")


@dataclass(frozen=True)
class RenderConfig:
    """Volume rendering: NeRF's hierarchical sampler, or ray marching through an occupancy grid."""

    n_samples: int = 64  # coarse samples per ray (N_samples)
    n_importance: int = 0  # extra fine samples per ray (N_importance); 0: coarse only
    perturb: bool = True  # stratified jitter while training
    lindisp: bool = False  # sample linearly in disparity
    raw_noise_std: float = 0.0  # noise on pre-activation density while training
    white_bkgd: bool = False
    chunk: int = 8192  # rays per forward pass when rendering whole images
    # Ray marching (--renderer nerfacc / torch_grid / auto); see enerf/render/renderer.py.
    renderer: str = "hierarchical"  # one of RENDERERS
    render_step_size: float = 1.0 / 128  # marching step in ray t (NDC rays: t spans [0, 1])
    grid_resolution: int = 64  # occupancy grid cells per axis over the scene (NDC) box
    occ_thre: float = 0.01  # occupied: density * step above min(occ_thre, mean occupancy)
    grid_update_every: int = 16  # steps between occupancy grid updates
    grid_warmup: int = 256  # steps during which each update re-evaluates every cell
    grid_ema_decay: float = 0.95  # decay of the running occupancy per update
    early_stop_eps: float = 1e-4  # drop samples behind transmittance below this (0: no early stop)
    alpha_thre: float = 0.0  # drop samples with opacity below this (needs the density pre-pass)
    cull_occluded: bool = False  # torch_grid: empty cells no training ray reaches with transmittance >= early_stop_eps
    early_stop_block: int = 4  # torch_grid: samples per ray in the first front-to-back round, doubling (0: pre-pass, as nerfacc)
    target_sample_batch_size: int = 0  # samples per training step; rays per step adapt (0: N_rand * N_samples; -1: N_rand rays)

    def __post_init__(self) -> None:
        if self.renderer not in RENDERERS:
            raise ConfigError(f"--renderer {self.renderer!r} is not one of {', '.join(RENDERERS)}")
        positive = {"render_step_size": self.render_step_size, "grid_resolution": self.grid_resolution,
                    "grid_update_every": self.grid_update_every}
        for name, value in positive.items():
            if not value > 0:
                raise ConfigError(f"--{name} must be > 0, got {value}")
        for name in ("occ_thre", "grid_warmup", "early_stop_eps", "alpha_thre", "early_stop_block"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"--{name} must be >= 0, got {getattr(self, name)}")
        if not 0 < self.grid_ema_decay <= 1:
            raise ConfigError(f"--grid_ema_decay must be in (0, 1], got {self.grid_ema_decay}")
        if self.target_sample_batch_size < -1:
            raise ConfigError(
                f"--target_sample_batch_size must be >= 0 (or -1: fixed N_rand), got {self.target_sample_batch_size}"
            )


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, logging and evaluation cadence."""

    iters: int = 5000
    n_rand: int = 1024  # rays per step (N_rand)
    lrate: float = 5e-4
    lrate_decay: float = 250  # thousands of steps for a 10x decay (nerf-pytorch)
    encoding_lrate: float = 0.0  # learning rate of a learned position encoding (triplane grids; 0: lrate)
    lrate_scale: float = 1.0  # multiplies lrate and encoding_lrate (learning-rate sweeps: compare's COND*S modes)
    tv_weight: float = 0.0  # weight of the total-variation loss on triplane grids (0: off)
    seed: int = 0
    precrop_iters: int = 0
    precrop_frac: float = 0.5
    eval_every: int = 0  # steps between held-out evaluations (0: only at the end)
    eval_views: int = 0  # held-out views used by periodic evaluations (0: all)
    log_every: int = 100  # steps between TensorBoard scalars
    kappa_every: int = 500  # steps between per-layer condition numbers
    ckpt_every: int = 0  # steps between checkpoints (0: only at the end)
    time_budget: float = 0.0  # stop after this many seconds of training (0: no limit)
    stop_at_psnr: float = 0.0  # stop once a periodic held-out evaluation reaches this PSNR (0: never)
    device: str = "auto"  # auto | cpu | cuda
    dist_timeout: float = 300.0  # torchrun: seconds a rank waits for the others before it stops (a dead rank)
    compute_lpips: bool = True
    precond: str = "none"  # gradient preconditioner, one of PRECOND_MODES (bnp: BNP, Algorithms 2-3)
    weight_decay: float = 0.0  # λ of the L2 regularization (0: off)
    decay_space: str = "z"  # p: λ||p||² added to the loss; z: decoupled decay (AdamW-style)
    grad_reg: float = 0.0  # λ of the gradient regularization λ||∇L||² in decay_space (0: off)

    def __post_init__(self) -> None:
        _check_optimizer_fields(self)
        for name in ("encoding_lrate", "tv_weight"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"--{name} must be >= 0, got {getattr(self, name)}")
        if not 0 < self.lrate_scale < float("inf"):
            raise ConfigError(f"--lrate_scale must be a finite number > 0, got {self.lrate_scale}")


def _check_optimizer_fields(train) -> None:
    """Validate the precond / weight_decay / decay_space / grad_reg fields of a train config."""
    if train.precond not in PRECOND_MODES:
        raise ConfigError(f"--precond {train.precond!r} is not one of {', '.join(PRECOND_MODES)}")
    if train.decay_space not in DECAY_SPACES:
        raise ConfigError(f"--decay_space {train.decay_space!r} is not one of {', '.join(DECAY_SPACES)}")
    for name in ("weight_decay", "grad_reg"):
        if not getattr(train, name) >= 0:
            raise ConfigError(f"--{name} must be >= 0, got {getattr(train, name)}")


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


CAMERA_PATHS = ("spiral", "orbit", "test", "train", "interp")


@dataclass(frozen=True)
class VideoConfig:
    """``enerf render``: camera path, frame count and encoding of the novel-view videos."""

    path: str = "spiral"  # one of CAMERA_PATHS
    frames: int = 120  # frames of the spiral / interp paths (test / train: one per view)
    fps: int = 30
    downscale: int = 1  # render at 1/downscale of the checkpoint's image size
    colormap: str = "turbo"  # matplotlib colormap for depth (disparity for NDC scenes)
    quality: float = 8.0  # imageio-ffmpeg quality, 0 (worst) .. 10 (best)
    png: bool = False  # also write every frame as PNG
    chunk: int = 0  # rays per forward pass (0: the checkpoint's render.chunk)


@dataclass(frozen=True)
class MeshConfig:
    """``enerf mesh``: density grid, iso-level and clean-up."""

    resolution: int = 256  # grid points per axis
    threshold: float = 10.0  # density iso-level (sigma, in the field's coordinates)
    chunk: int = 65536  # grid points per forward pass
    min_component: int = 0  # drop connected components with fewer faces (0: keep all)
    bbox: tuple[float, ...] = ()  # xmin ymin zmin xmax ymax zmax in the field's frame; (): from the scene
    field: str = "fine"  # fine (if the checkpoint has one) or coarse
    frame: str = "world"  # world (frame of poses_bounds.npy) or scene (the loader's normalised frame)


@dataclass(frozen=True)
class CompareConfig:
    """``enerf compare``: the grid of runs and where its table and plots go."""

    task: str = "nerf"  # nerf | shape
    scenes: tuple[str, ...] = ("demo",)  # scene names / folders (nerf) or mesh names (shape)
    modes: tuple[str, ...] = ("none", "row")  # A, A+PRECOND, A:LAYERS
    seeds: tuple[int, ...] = (0, 1, 2)
    jobs: int = 1  # runs at once, each with cores // jobs threads
    out: str = "runs/compare"
    baseline: str = "none"  # the mode Δ is measured against
    launcher: str = "local"  # local (subprocesses here) | ray (one Ray task per run; enerf.compare.launchers)
    address: str = ""  # ray: the cluster to join (ray start --head prints it); "": a local Ray instance
    run_cpus: float = 1.0  # ray: CPUs each run declares (and its torch threads)
    run_gpus: float = 0.0  # ray: GPUs each run declares


def _build(cls, values: dict):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown {cls.__name__} keys in checkpoint config: {', '.join(unknown)}")
    values = dict(values)
    for key in ("skips", "grid_resolutions", "grid_aabb"):
        if key in values:
            values[key] = tuple(values[key])
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


# --- 3D shapes (occupancy / SDF networks; ``enerf shape``) -----------------------------------

SHAPE_KINDS = ("occupancy", "sdf")


@dataclass(frozen=True)
class ShapeDataConfig:
    """The mesh and the labelled points sampled from it (``enerf.data.mesh``)."""

    mesh: str = "torus"  # a built-in shape (enerf.data.shapes.SHAPES) or a mesh file path
    padding: float = 0.1  # volume box = unit cube grown by this (Occupancy Networks)
    n_uniform: int = 100_000  # training points uniform in the box
    n_near: int = 100_000  # training points per near-surface sigma
    near_sigmas: tuple[float, ...] = (0.01, 0.003)  # Gaussian offsets of surface points
    sample_seed: int = 0  # seed of the training / evaluation samples (fixed across --seed)
    allow_open: bool = False  # non-watertight mesh: sign from the closest face normal
    cache_dir: str = "data/shape_cache"  # .npz caches of labelled samples

    def __post_init__(self) -> None:
        if not self.padding >= 0:
            raise ConfigError(f"--padding must be >= 0, got {self.padding}")
        if self.n_uniform < 0 or self.n_near < 0 or self.n_uniform + self.n_near * len(self.near_sigmas) == 0:
            raise ConfigError("--n_uniform and --n_near must be >= 0 and give at least one training point")
        if any(not s > 0 for s in self.near_sigmas):
            raise ConfigError(f"--near_sigmas must all be > 0, got {self.near_sigmas}")


@dataclass(frozen=True)
class ShapeFieldConfig:
    """Occupancy / SDF MLP (``enerf.fields.shape``); every linear layer is a ConditionedLinear."""

    kind: str = "occupancy"  # occupancy (logits, BCE) or sdf (L1 on clamped SDF)
    netdepth: int = 8  # hidden layers
    netwidth: int = 256
    skips: tuple[int, ...] = (4,)  # hidden layers after which the encoded input is re-read
    multires: int = 0  # positional-encoding frequencies (0: raw xyz)
    activation: str = "relu"  # relu | softplus (softplus with beta=100, as IGR, for smooth SDF gradients)
    conditioning: str = "none"  # one of CONDITIONING_MODES
    conditioned_layers: str = "hidden"  # hidden | all | none | comma-separated layer names
    detach_conditioner: bool = False
    conditioning_passes: int = 1
    conditioning_eps: float = 1e-8

    def __post_init__(self) -> None:
        if self.kind not in SHAPE_KINDS:
            raise ConfigError(f"--kind {self.kind!r} is not one of {', '.join(SHAPE_KINDS)}")
        if self.conditioning not in CONDITIONING_MODES:
            raise ConfigError(f"--conditioning {self.conditioning!r} is not one of {', '.join(CONDITIONING_MODES)}")
        if self.activation not in ("relu", "softplus"):
            raise ConfigError(f"--activation {self.activation!r} is not one of relu, softplus")


@dataclass(frozen=True)
class ShapeTrainConfig:
    """Optimisation, evaluation and metrics of a shape run."""

    iters: int = 5000
    batch_size: int = 8192  # points per step
    lrate: float = 5e-4
    lrate_decay: int = 0  # steps for a 10x learning-rate decay (0: constant)
    seed: int = 0  # weights and batches
    sdf_clamp: float = 0.1  # DeepSDF's delta: L1 between clamp(f, -d, d) and clamp(s, -d, d)
    eikonal_weight: float = 0.0  # weight of mean (|grad f| - 1)^2 on the batch (SDF only; IGR / SIREN)
    eval_every: int = 0  # steps between IoU / Chamfer evaluations (0: only at the end)
    log_every: int = 100
    kappa_every: int = 500
    ckpt_every: int = 0
    time_budget: float = 0.0  # stop after this many seconds of training (0: no limit)
    device: str = "auto"
    eval_points: int = 100_000  # uniform points for volumetric IoU
    surface_points: int = 100_000  # surface samples per mesh for Chamfer / NC / F-score
    mesh_resolution: int = 128  # marching-cubes grid for the metrics
    fscore_tau: float = 0.01  # F-score threshold (1% of the unit cube's side)
    chunk: int = 65536  # points per forward pass when evaluating
    precond: str = "none"  # as TrainConfig: gradient preconditioner (bnp: BNP)
    weight_decay: float = 0.0  # as TrainConfig
    decay_space: str = "z"  # as TrainConfig
    grad_reg: float = 0.0  # as TrainConfig

    def __post_init__(self) -> None:
        _check_optimizer_fields(self)
        if self.iters < 1 or self.batch_size < 1:
            raise ConfigError(f"--iters and --batch_size must be integers >= 1, got {self.iters} and {self.batch_size}")
        if self.mesh_resolution < 8:
            raise ConfigError(f"--mesh_resolution must be >= 8, got {self.mesh_resolution}")


@dataclass(frozen=True)
class ShapeRunConfig:
    """Everything a shape run needs; stored verbatim in its checkpoints (task ``shape``)."""

    TASK: ClassVar[str] = "shape"

    expname: str = "shape"
    basedir: str = "runs"
    data: ShapeDataConfig = dc_field(default_factory=ShapeDataConfig)
    field: ShapeFieldConfig = dc_field(default_factory=ShapeFieldConfig)
    train: ShapeTrainConfig = dc_field(default_factory=ShapeTrainConfig)

    def to_dict(self) -> dict:
        return asdict(self)


def _build_tuples(cls, values: dict):
    """``_build`` that also turns JSON lists back into the tuple-typed fields."""
    values = dict(values)
    for f in fields(cls):
        if f.name in values and isinstance(values[f.name], list):
            values[f.name] = tuple(values[f.name])
    return _build(cls, values)


def shape_run_config_from_dict(values: dict) -> ShapeRunConfig:
    """Rebuild a ShapeRunConfig from ``to_dict()`` output; missing keys take their defaults,
    unknown keys are a ConfigError."""
    unknown = sorted(set(values) - {"expname", "basedir", "data", "field", "train"})
    if unknown:
        raise ConfigError(f"unknown ShapeRunConfig keys: {', '.join(unknown)}")
    top = {k: values[k] for k in ("expname", "basedir") if k in values}
    return ShapeRunConfig(
        **top,
        data=_build_tuples(ShapeDataConfig, values.get("data", {})),
        field=_build_tuples(ShapeFieldConfig, values.get("field", {})),
        train=_build_tuples(ShapeTrainConfig, values.get("train", {})),
    )
