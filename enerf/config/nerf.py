"""NeRF run configuration: one dataclass per component, the only home of default values.

Field names follow nerf-pytorch's config keys where one exists; three are lower-cased here
(``n_rand``, ``n_samples``, ``n_importance``) and keep nerf-pytorch's spelling as flags
(``--N_rand``). ``FLAG_ALIASES`` and ``NERF_PYTORCH_IGNORED`` list the other keys of
nerf-pytorch's config files, so such a file loads unchanged.
"""

from __future__ import annotations

import operator
from dataclasses import asdict, fields
from pathlib import Path
from typing import Literal, get_args

from ..errors import ConfigError
from .spec import MAX_RAYS, MAX_SEED, check_box, check_config, check_run_name, check_skips, config_class, option, section

__all__ = ["DATA_ROOT", "RunFolderConfig", "ConditioningConfig", "DataConfig", "FieldConfig", "RenderConfig", "TrainConfig", "Cadence", "Regularization", "RunConfig", "run_config_from_dict",
           "build_config", "CONDITIONING_MODES", "ENCODINGS", "DATASET_TYPES", "SAMPLERS", "PRECOND_MODES",
           "DECAY_SPACES", "OPTIMIZERS", "DEVICES", "CONTRACTIONS", "SCENE_KINDS", "FLAG_ALIASES", "NERF_PYTORCH_IGNORED"]

# Where --scene names are looked up (data/demo, data/nerf_llff_data/<scene>, data/nerf_synthetic/<scene>),
# relative to the working directory; every command and function that finds a scene by name starts here.
DATA_ROOT = Path("data")

# The choices of the config's string fields (each field is annotated with its Literal).
DatasetType = Literal["auto", "llff", "blender", "nerfstudio"]  # enerf.data.loaders.LOADERS
SceneKind = Literal["auto", "forward", "walkaround"]  # enerf.cameras.scene_kind: what the cameras show
Holdout = Literal["every", "far"]  # enerf.data.loaders.far_split: which views are held out
Encoding = Literal["frequency", "triplane"]  # enerf.fields.nerf: how positions enter the MLP
ContractionKind = Literal["none", "mipnerf360", "linf"]  # enerf.nn.contraction: unbounded scenes
Conditioning = Literal["none", "row", "col", "rowcol", "rowcol_indep", "wn", "ws"]  # enerf.nn.conditioning.CONDITIONERS
SamplerName = Literal["auto", "nerfacc", "torch_grid", "hierarchical", "proposal"]  # enerf.render.registry.ESTIMATORS
InitWeights = Literal["native", "equilibrated", "vanilla"]  # enerf.nn.conditioners.INIT_WEIGHTS
Precond = Literal["none", "bnp"]  # gradient preconditioners (enerf.optim)
OptimizerName = Literal["adam", "sgd"]  # enerf.optim.build_optimizer
DecaySpace = Literal["p", "z"]  # where weight_decay / grad_reg regularize (enerf.optim.regularization)
Device = Literal["auto", "cpu", "cuda", "mps"]  # enerf.device.choose_device
# after training: none, auto (enerf.cameras.paths.default_path) or one of enerf render's --path names
AppearanceModel = Literal["none", "affine"]  # enerf.fields.appearance: per-image colour transforms
FinalVideo = Literal["none", "auto", "spiral", "orbit", "test", "train", "interp", "ellipse"]
DATASET_TYPES, ENCODINGS, CONDITIONING_MODES, SAMPLERS, PRECOND_MODES, DECAY_SPACES, DEVICES, CONTRACTIONS = (
    get_args(t) for t in (DatasetType, Encoding, Conditioning, SamplerName, Precond, DecaySpace, Device,
                          ContractionKind))
OPTIMIZERS = get_args(OptimizerName)
SCENE_KINDS = get_args(SceneKind)
HOLDOUTS = get_args(Holdout)

# Other names a flag (and a config file's key) is read under: alias -> (field, what the name is):
# nerf-pytorch's config keys, and earlier names of enerf's own flags.
FLAG_ALIASES = {"N_iters": ("iters", "nerf-pytorch's name"), "i_print": ("log_every", "nerf-pytorch's name"),
                "i_weights": ("ckpt_every", "nerf-pytorch's name"), "random_seed": ("seed", "nerf-pytorch's name"),
                "renderer": ("sampler", "the earlier name")}
# nerf-pytorch config keys accepted so its config files load, without effect here.
NERF_PYTORCH_IGNORED = ("netdepth_fine", "netwidth_fine", "netchunk", "no_batching", "no_reload", "ft_path",
                        "render_only", "render_test", "render_factor", "i_img", "i_testset", "i_video", "i_embed",
                        "shape")


@config_class
class DataConfig:
    """Where the scene lives and how it is loaded (LLFF conventions)."""

    scene: str = option("demo", "scene name: 'demo' (embedded, made on first use) or a folder under "
                        "data/nerf_llff_data/ or data/nerf_synthetic/ (e.g. fern, lego)")
    datadir: str = option("", "scene folder in LLFF, Blender or nerfstudio layout (overrides --scene)")
    dataset_type: DatasetType = option("auto", "auto (blender if the folder has transforms_*.json of frames with "
                                       "transparent pixels, as the NeRF synthetic scenes; nerfstudio, a capture, if "
                                       "transforms.json or transforms_*.json of photos without alpha; llff if "
                                       "poses_bounds.npy), llff, blender or nerfstudio")
    factor: int = option(0, "image downscale factor (LLFF / nerfstudio: uses images_<f>/ if present, else resizes in "
                         "process; 0: 8 for LLFF, 1 for Blender, for nerfstudio the smallest factor that brings the "
                         "photos' long side to 512 px or less)", lo=0)
    half_res: bool = option(False, "Blender: halve the stored images")
    testskip: int = option(1, "Blender (and transforms_test.json of photos): keep every N-th test frame", lo=1)
    llffhold: int = option(8, "hold out every N-th image for testing (0: none; Blender: when there is no "
                           "transforms_test.json)", lo=0)
    holdout: Holdout = option("every", "which views are held out: every (the loader's split: every --llffhold-th "
                              "view, or the layout's test frames) or far (as many views, those whose cameras stand "
                              "farthest from the point the cameras look at: views away from the path walked)")
    scene_kind: SceneKind = option("auto", "what the cameras show: forward (forward-facing; NDC rays, as "
                                   "configs/fern_cpu.txt) or walkaround (around the scene; world-space rays for a "
                                   "contraction, as configs/capture_cpu.txt); auto: enerf train without --config "
                                   "decides from the cameras' viewing directions, else the layout's own rays (LLFF: "
                                   "NDC, nerfstudio: world-space). Blender scenes keep their bounded box")
    use_ndc: bool = option(True, "use world-space rays instead of NDC (for non-forward-facing scenes)",
                           flag="no_ndc", flag_type=bool, from_flag=operator.not_)
    spherify: bool = option(False, "LLFF: spherify the poses (360-degree scenes)")
    recenter: bool = option(True, "LLFF: recenter the poses", cli=False)
    bd_factor: float = option(0.75, "LLFF: scale the scene so the nearest bound is 1 / bd_factor", lo=0.0, lo_open=True)
    far: float = option(0.0, "world-space rays end at this distance from the camera, in scene units (0: the loader's "
                        "far bound); e.g. 1000 for an unbounded capture with --contraction", lo=0.0)

    def __post_init__(self) -> None:
        check_config(self)


@config_class
class ConditioningConfig:
    """The weight conditioning of a network's linear layers (``enerf.nn.conditioning``); shared by
    ``FieldConfig`` and ``ShapeFieldConfig`` (its fields come first)."""

    conditioning: Conditioning = option("none", "weight conditioning of the linear layers: none (vanilla), E-NeRF's "
                                        "row / col / rowcol (column norms of E_r W) / rowcol_indep (of W), wn (weight "
                                        "normalization) or ws (weight standardization)")
    conditioned_layers: str = option("hidden", "which layers are conditioned: hidden (the trunk, or the shape "
                                     "network's hidden layers), all, none, or comma-separated names")
    detach_conditioner: bool = option(False, "treat the equilibration matrix as a constant in backprop")
    conditioning_passes: int = option(1, "alternating row / column passes of rowcol", lo=1)
    init_weights: InitWeights = option("native", "weights the conditioned layers apply at step 0: native (each mode's "
                                       "own), equilibrated (E(W0) W0, row's start; with none W0 is replaced by it) or "
                                       "vanilla (a conditioned layer's applied weight scaled by a fixed constant to "
                                       "the Frobenius norm of W0)")

    def check_conditioning_choice(self) -> None:
        """Refuse an ``init_weights`` that has no meaning for ``conditioning`` (ConfigError)."""
        from ..nn.conditioners import check_init_weights  # the rule lives beside the layers
        check_init_weights(self.conditioning, self.init_weights)


@config_class
class FieldConfig(ConditioningConfig):
    """The NeRF MLP and its weight conditioning."""

    netdepth: int = option(8, "hidden layers of the trunk", lo=1)
    netwidth: int = option(256, "width of the trunk", lo=1)
    skips: tuple[int, ...] = option((4,), "trunk layers that re-read the encoded input", lo=0, cli=False)
    multires: int = option(10, "positional-encoding frequencies for positions", lo=0, hi=32)
    multires_views: int = option(4, "positional-encoding frequencies for view directions", lo=0, hi=32)
    use_viewdirs: bool = option(True, "condition colour on the view direction")
    view_width: int = option(128, "width of the view-direction branch (netwidth // 2 in NeRF)", lo=1)
    encoding: Encoding = option("frequency", "positions: frequency (NeRF's sinusoids) or triplane (TensoRF VM grids)")
    grid_resolutions: tuple[int, ...] = option((64, 256), "triplane: plane side / line length per level", lo=2)
    grid_components: int = option(8, "triplane: channels per plane-line product (3 x this per level)", lo=1)
    grid_aabb: tuple[float, ...] = option((-1.5, -1.67, -1.0, 1.5, 1.67, 1.0),
                                          "triplane: xmin ymin zmin xmax ymax zmax of the grids (TensoRF's NDC box; "
                                          "with a contraction the grids cover the contracted box [-2, 2]^3 instead)")
    contraction: ContractionKind = option("none", "scene contraction in front of the position encoding, for unbounded "
                                          "scenes: none, mipnerf360 (|x| > 1 squeezed into the ball of radius 2) or "
                                          "linf (nerfacto's, into the cube [-2, 2]^3)")

    def __post_init__(self) -> None:
        check_config(self)
        self.check_conditioning_choice()
        if self.encoding == "triplane":
            check_box("grid_aabb", self.grid_aabb)
            if not self.grid_resolutions:
                raise ConfigError("grid_resolutions needs at least one value (>= 2)", fields=("grid_resolutions",))
        check_skips(self.skips, self.netdepth)


@config_class
class RenderConfig:
    """Volume rendering: NeRF's hierarchical sampler, or ray marching through an occupancy grid."""

    n_samples: int = option(64, "coarse samples per ray", flag="N_samples", lo=1)
    n_importance: int = option(0, "fine samples per ray (0: no fine network)", flag="N_importance", lo=0)
    perturb: bool = option(True, "stratified jitter while training: 1 on, 0 off", flag_type=float,
                           from_flag=lambda value: value > 0)
    lindisp: bool = option(False, "sample linearly in disparity")
    lindisp_from: float = option(0.0, "hierarchical: half the samples evenly in depth up to this distance, half evenly "
                                 "in disparity beyond it (nerfacto's piecewise sampler, 1 there; for unbounded scenes "
                                 "with --contraction; 0: off)", lo=0.0)
    raw_noise_std: float = option(0.0, "noise on the pre-activation density while training", lo=0.0)
    white_bkgd: bool = option(False, "composite onto a white background")
    chunk: int = option(8192, "rays per forward pass when rendering whole images", lo=1)
    rgb_weight_threshold: float = option(0.0, "compute colour only at samples whose compositing weight exceeds this "
                                         "(TensoRF's appearance mask; 0: at every sample)", lo=0.0, hi=1.0)
    gradient_scaling: float = option(0.0, "while training, scale the gradients of the density and colour of samples "
                                     "closer to the camera than this distance by (distance / this)^2 (Philip and "
                                     "Deschaintre's fix for floaters near the cameras; scene units; 0: off)", lo=0.0)
    sampler: SamplerName = option("hierarchical", "the sampler: where along each ray the field is queried. "
                           "hierarchical (NeRF's coarse/fine sampling), torch_grid (occupancy-grid "
                           "ray marching in plain torch, CPU or CUDA), nerfacc (the same with nerfacc, CUDA), auto "
                           "(nerfacc if it builds, else torch_grid), proposal (nerfacto's proposal networks, "
                           "for unbounded captures)", flag="sampler")
    render_step_size: float = option(1.0 / 128, "grid renderers: marching step in ray t (NDC rays span t in [0, 1])",
                                     lo=0.0, lo_open=True)
    grid_resolution: int = option(64, "grid renderers: occupancy grid cells per axis over the scene (NDC) box",
                                  lo=1, hi=1024)
    occ_thre: float = option(0.01, "grid renderers: a cell is occupied when density * step exceeds "
                             "min(this, mean occupancy)", lo=0.0)
    grid_update_every: int = option(16, "grid renderers: steps between occupancy grid updates", lo=1)
    grid_warmup: int = option(256, "grid renderers: steps during which every update re-evaluates all cells", lo=0)
    grid_ema_decay: float = option(0.95, "grid renderers: decay of a cell's running occupancy per update",
                                   lo=0.0, hi=1.0, lo_open=True)
    early_stop_eps: float = option(1e-4, "grid renderers: drop samples behind transmittance below this "
                                   "(0: no early stop)", lo=0.0, hi=1.0)
    cull_occluded: bool = option(False, "torch_grid: occlusion culling; a cell no training ray reached with "
                                 "transmittance >= --early_stop_eps since the last grid update is empty "
                                 "(needs --early_stop_eps > 0)")
    early_stop_block: int = option(4, "torch_grid: find the visible samples by reading densities front to back, "
                                   "this many samples per ray in the first round and twice as many in each next one, "
                                   "stopping each ray at its early stop (0: nerfacc's way, a density pre-pass over "
                                   "all samples); the rendering pass then queries the visible samples", lo=0)
    proposal_samples: tuple[int, ...] = option((128,), "proposal renderer: intervals per ray of each proposal pass, "
                                               "coarse to fine (one proposal network each)", lo=1)
    proposal_resolutions: tuple[int, ...] = option((64,), "proposal renderer: grid side of each proposal network "
                                                   "(one per --proposal_samples entry)", lo=2)
    proposal_components: int = option(8, "proposal renderer: channels per plane-line product of the proposal networks",
                                      lo=1)
    distortion_weight: float = option(0.002, "proposal renderer: weight of mip-NeRF 360's distortion loss (0: off)",
                                      lo=0.0)
    target_sample_batch_size: int = option(0, "grid renderers: samples per step; rays per step adapt to it "
                                           "(0: N_rand * N_samples; -1: N_rand rays every step)", lo=-1)

    def __post_init__(self) -> None:
        check_config(self)
        if len(self.proposal_samples) != len(self.proposal_resolutions):
            raise ConfigError(f"proposal_samples and proposal_resolutions need one entry per proposal network, got "
                              f"{len(self.proposal_samples)} and {len(self.proposal_resolutions)}",
                              fields=("proposal_samples", "proposal_resolutions"))
        if self.lindisp and self.lindisp_from > 0:
            raise ConfigError("lindisp and lindisp_from are two spacings of the samples; set one of them",
                              fields=("lindisp", "lindisp_from"))


@config_class
class Cadence:
    """How often a training run logs, evaluates and saves, and where it runs; shared by
    ``TrainConfig`` and ``ShapeTrainConfig`` (their fields come first)."""

    eval_every: int = option(0, "steps between held-out evaluations (0: only at the end)", lo=0)
    log_every: int = option(100, "steps between TensorBoard scalars", lo=1)
    kappa_every: int = option(500, "steps between per-layer condition numbers (0: never)", lo=0)
    ckpt_every: int = option(0, "steps between checkpoints (0: only at the end)", lo=0)
    ckpt_every_seconds: float = option(60.0, "seconds of training between checkpoints (0: off); Ctrl-C and SIGTERM "
                                       "also write one at the end of the current step, so --resume continues", lo=0.0)
    time_budget: float = option(0.0, "stop training after this many seconds (0: no limit)", lo=0.0)
    lrate_cooldown: float = option(0.0, "final fraction of the run over which the learning rate anneals "
                                   "exponentially to a tenth of its schedule (the run ends at iters, or at "
                                   "time_budget when that comes first; 0: no cooldown)", lo=0.0, hi=1.0)
    device: Device = option("auto", "auto (CUDA when torch sees a GPU, else the CPU), cpu, cuda, or mps (Apple's "
                           "Metal backend where torch has it; untested)")
    dist_timeout: float = option(300.0, "torchrun runs: seconds a rank waits for the others before it stops with one "
                                 "line (a dead rank)", lo=0.0, lo_open=True)


@config_class
class Regularization:
    """Optimizer, gradient preconditioner and regularizers (``enerf.optim``); shared like ``Cadence``."""

    optimizer: OptimizerName = option("adam", "adam, or sgd (with --momentum; BNP's paper trains with SGD: under "
                                      "Adam BNP's scaling cancels and mostly its centring acts)")
    momentum: float = option(0.9, "sgd: heavy-ball momentum (0: plain SGD)", lo=0.0, hi=1.0, hi_open=True)

    precond: Precond = option("none", "gradient preconditioner: none, or bnp (batch normalization preconditioning; any "
                          "conditioning)")
    weight_decay: float = option(0.0, "L2 regularization strength λ (0: off); where it acts: --decay_space", lo=0.0)
    decay_space: DecaySpace = option("z", "p: λ||p||² added to the loss; z: decoupled decay in the preconditioned space "
                              "(AdamW-style)")
    grad_reg: float = option(0.0, "gradient regularization λ||∇L||² in --decay_space, by double backprop "
                             "(0: off; slow)", lo=0.0)


@config_class
class TrainConfig(Cadence, Regularization):
    """Optimisation, logging and evaluation cadence."""

    iters: int = option(5000, "training steps", lo=1)
    n_rand: int = option(1024, "rays per step", flag="N_rand", lo=1, hi=MAX_RAYS)
    lrate: float = option(5e-4, "learning rate", lo=0.0, lo_open=True)
    lrate_decay: float = option(250, "thousands of steps for a 10x learning-rate decay (nerf-pytorch; 0: constant)",
                                lo=0.0)
    encoding_lrate: float = option(0.0, "learning rate of a learned position encoding (triplane grids; 0: lrate)",
                                   lo=0.0)
    lrate_scale: float = option(1.0, "multiplies lrate and encoding_lrate (what enerf compare's COND*S modes set, "
                                "for learning-rate sweeps)", lo=0.0, lo_open=True)
    tv_weight: float = option(0.0, "weight of the total-variation loss on triplane grids (0: off)", lo=0.0)
    robust_trim: float = option(0.0, "robust photometric loss (RobustNeRF's), for passers-by and other things that "
                                "move between photos: a pixel whose error is above the batch's 1 - this quantile is "
                                "an outlier candidate and left out of the loss (with --robust_patch, only where its "
                                "neighbours are too; 0: off)", lo=0.0, hi=1.0, hi_open=True)
    robust_patch: int = option(8, "with --robust_trim: training rays drawn as patches of this many pixels a side, so "
                               "that a pixel counts as an outlier only when most of its 3 x 3 neighbours and of its "
                               "patch do (RobustNeRF's mask); 0: single rays, every candidate left out", lo=0)
    appearance: AppearanceModel = option("none", "per-image appearance: none, or affine (a colour matrix and offset "
                                         "learned per training photo for its exposure and white balance, their mean "
                                         "the identity; held-out views are scored on the mean appearance, "
                                         "enerf.fields.appearance)")
    visibility_loss: float = option(0.0, "weight of the visibility loss (Nerfbusters'): density is penalised at "
                                    "random points of the scene that fewer than --visibility_views training cameras "
                                    "have in their frustum (enerf.train.visibility; world-space scenes; 0: off)", lo=0.0)
    visibility_views: int = option(1, "with --visibility_loss: a point counts as seen by this many training cameras",
                                   lo=1)
    seed: int = option(0, "random seed (weights, ray batches, jitter)", lo=0, hi=MAX_SEED)
    precrop_iters: int = option(0, "steps that sample rays from the central crop only", lo=0)
    precrop_frac: float = option(0.5, "side of that central crop, as a fraction of the image", lo=0.0, hi=1.0,
                                 lo_open=True)
    video: FinalVideo = option("none", "after training, render a preview video (40 frames at half size, 2 s, "
                               "<run>/video_<path>/rgb.mp4 and depth.mp4) along this camera path: none, auto (spiral on "
                               "forward-facing scenes and Blender's orbit, interp through the training cameras on "
                               "walk-around captures) or a path of enerf render --path")
    splat_seconds: float = option(0.0, "after the field, bake it into Gaussian splats for this many seconds: "
                                  "<run>/splats.ply, scored on the held-out views beside the field (metrics.json's "
                                  "splats); captures' presets: 420 (after a 420-s field on a CPU); 0: the field only", lo=0.0)
    eval_views: int = option(0, "held-out views used by periodic evaluations (0: all)", lo=0)
    eval_stride: int = option(1, "evaluations render and score every this-many-th row and column of each held-out "
                              "view (PSNR over that regular subset of the pixels; for slow networks on a CPU)", lo=1)
    compute_lpips: bool = option(True, "skip LPIPS", flag="no_lpips", flag_type=bool, from_flag=operator.not_)
    cap_outputs: bool = option(True, "a run that trained for less time than its final evaluation and preview video "
                               "would take (and over 30 s each) scores every s-th row and column of the held-out views "
                               "and renders fewer preview frames, or none, so that each costs about the training time, "
                               "and says so (enerf eval and enerf render make the full ones); 0: always full")

    def __post_init__(self) -> None:
        check_config(self)

    def rate_scale(self, parameter: str = "") -> float:
        """The learning rate of ``parameter`` (a name as in ``named_parameters``; "": the network's) relative to
        ``lrate``'s schedule: ``lrate_scale``, times ``encoding_lrate / lrate`` for a learned position encoding
        (``pos_encoding.*``, the proposal networks' ``levels.*.pos_encoding.*``) when ``encoding_lrate`` > 0."""
        if self.encoding_lrate > 0 and ".pos_encoding." in f".{parameter}":
            return self.lrate_scale * (self.encoding_lrate / self.lrate)
        return self.lrate_scale


@config_class
class RunFolderConfig:
    """Where a run writes (``<basedir>/<expname>/``); the first fields of ``RunConfig`` and
    ``ShapeRunConfig``, whose sections follow."""

    expname: str = option("demo", "run name: the run folder is <basedir>/<expname> (default: the --datadir folder's name "
                          "when one is given, else demo)")
    basedir: str = option("runs", "folder of the run folders")

    def __post_init__(self) -> None:
        check_run_name(self.expname, self.basedir)

    def to_dict(self) -> dict:
        return asdict(self)


@config_class
class RunConfig(RunFolderConfig):
    """Everything a run needs; stored verbatim in every checkpoint."""

    data: DataConfig = section(DataConfig)
    field: FieldConfig = section(FieldConfig)
    render: RenderConfig = section(RenderConfig)
    train: TrainConfig = section(TrainConfig)


def build_config(cls, values: dict):
    """``cls(**values)`` from a ``to_dict()`` section: JSON lists back to tuples; unknown keys are a
    ConfigError; missing keys take their defaults."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown {cls.__name__} keys in checkpoint config: {', '.join(unknown)}")
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


# Keys that checkpoints written before their option was deleted carry (section -> keys); dropped on load.
DELETED_KEYS = {"train": ("stop_at_psnr",), "field": ("conditioning_eps",),
                "render": ("alpha_thre", "proposal_weight", "proposal_anneal_steps")}
# Keys that checkpoints written before a rename carry (section -> {old key: new key}).
RENAMED_KEYS = {"render": {"renderer": "sampler"}}


def run_config_from_dict(values: dict) -> RunConfig:
    """Rebuild a RunConfig from ``RunConfig.to_dict()`` output (e.g. from a checkpoint)."""
    values = {**values, **{s: {RENAMED_KEYS.get(s, {}).get(k, k): v for k, v in values[s].items()
                               if k not in DELETED_KEYS.get(s, ())} for s in ("data", "field", "render", "train")}}
    return RunConfig(
        expname=values["expname"],
        basedir=values["basedir"],
        data=build_config(DataConfig, values["data"]),
        field=build_config(FieldConfig, values["field"]),
        render=build_config(RenderConfig, values["render"]),
        train=build_config(TrainConfig, values["train"]),
    )
