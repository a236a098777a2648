"""Shape run configuration (occupancy / SDF networks fitted to a mesh; ``enerf shape``)."""

from __future__ import annotations

from typing import ClassVar, Literal, get_args

from ..errors import ConfigError
from .nerf import Cadence, ConditioningConfig, Regularization, RunFolderConfig, build_config
from .spec import MAX_GRID, MAX_SEED, check_config, check_skips, config_class, option, section

__all__ = ["SHAPE_KINDS", "ShapeDataConfig", "ShapeFieldConfig", "ShapeTrainConfig", "ShapeRunConfig",
           "ShapeMeshConfig", "shape_run_config_from_dict"]

ShapeKind = Literal["occupancy", "sdf"]
Activation = Literal["relu", "softplus"]
SHAPE_KINDS = get_args(ShapeKind)


@config_class
class ShapeDataConfig:
    """The mesh and the labelled points sampled from it (``enerf.shapes.mesh``)."""

    mesh: str = option("torus", "built-in shape (sphere, torus, box, capsule, bunny) or a mesh file "
                       "(.obj .ply .off .stl .glb)")
    padding: float = option(0.1, "volume box = unit cube grown by this (Occupancy Networks)", lo=0.0)
    n_uniform: int = option(100_000, "training points uniform in the box", lo=0)
    n_near: int = option(100_000, "training points per near-surface sigma", lo=0)
    near_sigmas: tuple[float, ...] = option((0.01, 0.003), "std of the Gaussian offsets of near-surface training "
                                            "points (one set per value)", lo=0.0, lo_open=True)
    sample_seed: int = option(0, "seed of the training / evaluation samples (fixed across --seed)",
                              lo=0, hi=MAX_SEED - 1000)
    allow_open: bool = option(False, "accept a non-watertight mesh, taking inside/outside from the closest face's "
                              "normal")
    cache_dir: str = option("data/shape_cache", "folder of the .npz caches of labelled samples")

    def __post_init__(self) -> None:
        check_config(self)
        if self.n_uniform + self.n_near * len(self.near_sigmas) == 0:
            raise ConfigError("n_uniform and n_near must give at least one training point",
                              fields=("n_uniform", "n_near"))


@config_class
class ShapeFieldConfig(ConditioningConfig):
    """Occupancy / SDF MLP (``enerf.fields.shape``); every linear layer is a ConditionedLinear."""

    kind: ShapeKind = option("occupancy", "occupancy (logits, BCE) or sdf (L1 on the clamped signed distance)")
    netdepth: int = option(8, "hidden layers", lo=1)
    netwidth: int = option(256, "width of the hidden layers", lo=1)
    skips: tuple[int, ...] = option((4,), "hidden layers after which the encoded input is re-read", lo=0)
    multires: int = option(0, "positional-encoding frequencies (0: raw xyz)", lo=0, hi=32)
    activation: Activation = option("relu", "relu or softplus (beta 100, as IGR, for smooth SDF gradients)")

    def __post_init__(self) -> None:
        check_config(self)
        self.check_conditioning_choice()
        check_skips(self.skips, self.netdepth)


@config_class
class ShapeTrainConfig(Cadence, Regularization):
    """Optimisation, evaluation and metrics of a shape run."""

    iters: int = option(5000, "training steps", lo=1)
    batch_size: int = option(8192, "points per step", lo=1, hi=2**24)
    lrate: float = option(5e-4, "learning rate", lo=0.0, lo_open=True)
    lrate_decay: float = option(0.0, "thousands of steps for a 10x learning-rate decay (0: constant)", lo=0.0)
    seed: int = option(0, "random seed (weights, batches); the samples use --sample_seed", lo=0, hi=MAX_SEED)
    sdf_clamp: float = option(0.1, "DeepSDF's delta: L1 between clamp(f, -d, d) and clamp(s, -d, d)",
                              lo=0.0, lo_open=True)
    eikonal_weight: float = option(0.0, "SDF: weight of the eikonal term mean (|grad f| - 1)^2", lo=0.0)
    eval_points: int = option(100_000, "uniform points for volumetric IoU", lo=1)
    surface_points: int = option(100_000, "surface samples per mesh for Chamfer / NC / F-score", lo=1)
    mesh_resolution: int = option(128, "marching-cubes grid of the metrics mesh", lo=8, hi=MAX_GRID)
    fscore_tau: float = option(0.01, "F-score threshold (1% of the unit cube's side)", lo=0.0, lo_open=True)
    chunk: int = option(65536, "points per forward pass when evaluating", lo=1)

    def __post_init__(self) -> None:
        check_config(self)

    def rate_scale(self, parameter: str = "") -> float:
        """Every parameter's learning rate is ``lrate``'s schedule (``TrainConfig.rate_scale``'s counterpart)."""
        return 1.0


@config_class
class ShapeRunConfig(RunFolderConfig):
    """Everything a shape run needs; stored verbatim in its checkpoints (task ``shape``)."""

    TASK: ClassVar[str] = "shape"

    expname: str = option("shape", "run name: the run folder is <basedir>/<expname>")
    data: ShapeDataConfig = section(ShapeDataConfig)
    field: ShapeFieldConfig = section(ShapeFieldConfig)
    train: ShapeTrainConfig = section(ShapeTrainConfig)


@config_class
class ShapeMeshConfig:
    """``enerf shape mesh``: the marching-cubes grid."""

    resolution: int = option(128, "grid points per axis", lo=8, hi=MAX_GRID)

    def __post_init__(self) -> None:
        check_config(self)


def shape_run_config_from_dict(values: dict) -> ShapeRunConfig:
    """Rebuild a ShapeRunConfig from ``to_dict()`` output; missing keys take their defaults,
    unknown keys are a ConfigError."""
    unknown = sorted(set(values) - {"expname", "basedir", "data", "field", "train"})
    if unknown:
        raise ConfigError(f"unknown ShapeRunConfig keys: {', '.join(unknown)}")
    top = {k: values[k] for k in ("expname", "basedir") if k in values}
    return ShapeRunConfig(
        **top,
        data=build_config(ShapeDataConfig, values.get("data", {})),
        field=build_config(ShapeFieldConfig, {k: v for k, v in values.get("field", {}).items()
                                              if k != "conditioning_eps"}),  # a deleted option

        train=build_config(ShapeTrainConfig, values.get("train", {})),
    )
