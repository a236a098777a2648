"""Configuration dataclasses: one per component, the only home of default values and of the
rules a value must follow.

Each field carries its help text, flag name, choices and range in its metadata
(``enerf.config.spec.option``); the CLI builds its flags from them and every dataclass checks
itself on construction (``check_config``), so validation lives in one place.

    nerf.py      DataConfig, FieldConfig, RenderConfig, TrainConfig, RunConfig (``enerf train``)
    shape.py     ShapeDataConfig, ShapeFieldConfig, ShapeTrainConfig, ShapeRunConfig (``enerf shape``)
    commands.py  CompareConfig, SynthConfig, ViewerConfig, PoseConfig, FramesConfig
                 (compare, data synth, view, data video / images / colmap)
    export.py    MeshConfig, PointCloudConfig, DepthExportConfig, SplatConfig, HtmlExportConfig, VideoConfig
                 (export mesh / pointcloud / depth / splats / html / video; mesh and render: the same two)
    spec.py      option(), check_config(), Range
"""

from .commands import VIEWER_LAYOUTS, VIEWER_OUTPUTS, CompareConfig, FramesConfig, PoseConfig, SynthConfig, ViewerConfig
from .export import (CAMERA_PATHS, XATLAS_MAX_FACES, DepthExportConfig, HtmlExportConfig, MeshConfig, PointCloudConfig,
                     SplatConfig, VideoConfig)
from .nerf import (DATA_ROOT, CONDITIONING_MODES, CONTRACTIONS, DATASET_TYPES, DECAY_SPACES, DEVICES, ENCODINGS, FLAG_ALIASES,
                   NERF_PYTORCH_IGNORED, OPTIMIZERS, PRECOND_MODES, SAMPLERS, SCENE_KINDS, DataConfig, FieldConfig, RenderConfig, RunConfig,
                   TrainConfig, build_config, run_config_from_dict)
from .shape import (SHAPE_KINDS, ShapeDataConfig, ShapeFieldConfig, ShapeMeshConfig, ShapeRunConfig, ShapeTrainConfig,
                    shape_run_config_from_dict)
from .spec import MAX_GRID, MAX_RAYS, MAX_SEED, Range, check_config, option

__all__ = [
    "DATA_ROOT", "DataConfig", "FieldConfig", "RenderConfig", "TrainConfig", "RunConfig", "run_config_from_dict", "build_config",
    "CONDITIONING_MODES", "ENCODINGS", "DATASET_TYPES", "SAMPLERS", "PRECOND_MODES", "OPTIMIZERS", "DECAY_SPACES", "DEVICES",
    "CONTRACTIONS", "SCENE_KINDS", "FLAG_ALIASES", "NERF_PYTORCH_IGNORED",
    "VideoConfig", "MeshConfig", "XATLAS_MAX_FACES", "CompareConfig", "SynthConfig", "CAMERA_PATHS",
    "ViewerConfig", "VIEWER_OUTPUTS", "VIEWER_LAYOUTS", "PoseConfig", "FramesConfig",
    "DepthExportConfig", "PointCloudConfig", "SplatConfig", "HtmlExportConfig",
    "SHAPE_KINDS", "ShapeDataConfig", "ShapeFieldConfig", "ShapeTrainConfig", "ShapeRunConfig", "ShapeMeshConfig",
    "shape_run_config_from_dict",
    "option", "check_config", "Range", "MAX_SEED", "MAX_RAYS", "MAX_GRID",
]
