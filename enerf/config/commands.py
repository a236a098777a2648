"""Options of the commands that compare runs, make data or view a run: compare, data synth|images|video|colmap,
view (the export commands' options: ``export.py``)."""

from __future__ import annotations

from typing import Literal, get_args

from ..errors import ConfigError
from .spec import MAX_SEED, check_config, config_class, option

__all__ = ["CompareConfig", "SynthConfig", "ViewerConfig", "VIEWER_OUTPUTS", "VIEWER_LAYOUTS", "VIEWER_MOVING", "PoseConfig",
           "FramesConfig"]

TaskName = Literal["nerf", "shape"]
Launcher = Literal["local", "ray"]
ViewerOutput = Literal["rgb", "depth", "accumulation"]  # enerf.viewer.render.OUTPUTS
ViewerLayout = Literal["side", "split", "a", "b", "difference"]  # two checkpoints: how they share the view
ViewerMoving = Literal["splats", "draft"]  # what the browser shows while its camera moves (enerf.viewer.splat_layer)
VIEWER_OUTPUTS, VIEWER_LAYOUTS, VIEWER_MOVING = get_args(ViewerOutput), get_args(ViewerLayout), get_args(ViewerMoving)
PoseMatcher = Literal["auto", "sequential", "exhaustive"]  # enerf.ingest.colmap.MATCHERS, plus auto
PoseLayout = Literal["nerfstudio", "llff", "blender"]  # enerf.ingest.colmap.LAYOUTS
CameraModel = Literal["SIMPLE_RADIAL", "SIMPLE_PINHOLE", "RADIAL", "PINHOLE", "OPENCV", "OPENCV_FISHEYE"]
@config_class
class CompareConfig:
    """``enerf compare``: the grid of runs and where its table and plots go. A new option of the
    command is a new field here; its flag is generated from it."""

    task: TaskName = option("nerf", "nerf (enerf train) or shape (enerf shape train)")
    scenes: tuple[str, ...] = option(("demo",), "scene names or folders (nerf), mesh names (shape)")
    modes: tuple[str, ...] = option(("none", "row"), "COND, COND+PRECOND or COND:LAYERS, each optionally ~I "
                                    "(--init_weights I) and *S (learning rates times S), e.g. none row rowcol "
                                    "row+bnp row:all none~equilibrated row~vanilla row*2")
    seeds: tuple[int, ...] = option((0, 1, 2), "seeds of every scene and mode", lo=0, hi=MAX_SEED)
    jobs: int = option(1, "runs at once (each gets cores // jobs threads)", lo=1, hi=256)
    out: str = option("runs/compare", "output folder")
    baseline: str = option("none", "mode the deltas are measured against")
    launcher: Launcher = option("local", "local (subprocesses on this machine, --jobs at once) or ray (one Ray task per run)")
    address: str = option("", "ray: address of a running cluster (ray start --head); empty: start a local Ray instance")
    run_cpus: float = option(1.0, "ray: CPUs each run declares (and its torch threads)", lo=0.0, lo_open=True)
    run_gpus: float = option(0.0, "ray: GPUs each run declares", lo=0.0)

    def __post_init__(self) -> None:
        check_config(self)
        if not str(self.out).strip():
            raise ConfigError("out must name a folder, got ''", fields=("out",))


@config_class
class SynthConfig:
    """``enerf data synth``: the embedded synthetic scene's size."""

    views: int = option(24, "camera views", lo=1, hi=10_000)
    width: int = option(1008, "image width in pixels", lo=2, hi=16384)
    height: int = option(756, "image height in pixels", lo=2, hi=16384)
    seed: int = option(0, "random seed of the scene", lo=0, hi=MAX_SEED)

    def __post_init__(self) -> None:
        check_config(self)


@config_class
class PoseConfig:
    """``enerf data video``, ``enerf data images`` and ``enerf data colmap``: how COLMAP poses the
    frames / photos and the layout written (``enerf.ingest.colmap.pose_folder``)."""

    matcher: PoseMatcher = option("auto", "auto: sequential for video frames, exhaustive for photos; sequential: "
                                  "each image with the --overlap next ones in name order; exhaustive: every pair")
    overlap: int = option(10, "sequential matching: how many following images each image is matched with", lo=1,
                          hi=1000)
    camera_model: CameraModel = option("SIMPLE_RADIAL", "COLMAP camera model shared by every image (SIMPLE_PINHOLE: "
                                       "the simplest; OPENCV as ns-process-data)")
    layout: PoseLayout = option("nerfstudio", "nerfstudio: transforms.json (z up) as ns-process-data writes it; llff: "
                                "poses_bounds.npy; blender: transforms.json in COLMAP's frame")
    factors: tuple[int, ...] = option((2, 4), "also write images_<f>/ downscaled by each factor (the flag alone: none)",
                                      lo=2, hi=64, may_be_empty=True)
    seed: int = option(0, "COLMAP's random seed", lo=0, hi=MAX_SEED)

    def __post_init__(self) -> None:
        check_config(self)


@config_class
class FramesConfig:
    """``enerf data video``: which frames of the video are kept (``enerf.ingest.video.extract_sharpest``)."""

    frames: int = option(120, "frames to keep: the video is cut into this many runs of consecutive frames and the "
                         "sharpest of each is kept", lo=3, hi=100_000)
    # Variance of the Laplacian of the luma at 360 px on the short side. beer.mp4's 706 frames score
    # 1.4e-4 to 1.5e-3 (median 8.1e-4); the same frames blurred with a Gaussian of sigma 1 % of the
    # short side (7 px) score 4e-6 to 1.1e-5 (benchmarks/README.md).
    min_sharpness: float = option(4e-5, "frames scoring below this are too blurred to keep (variance of the "
                                  "Laplacian of the luma in [0, 1] at 360 px on the short side)", lo=0.0)

    def __post_init__(self) -> None:
        check_config(self)


@config_class
class ViewerConfig:
    """``enerf view`` and ``enerf train --viewer``: the browser viewer (``enerf.viewer``)."""

    host: str = option("127.0.0.1", "address the viewer listens on (127.0.0.1: this machine only; 0.0.0.0 "
                       "opens it to the network, an explicit choice)")
    port: int = option(8080, "port of the viewer (0: any free port)", lo=0, hi=65535)
    max_width: int = option(512, "resolution cap: the finest frame is at most this many pixels wide", lo=16, hi=8192)
    preview_seconds: float = option(0.25, "time the first, coarse frame after a camera move may take; its size "
                                    "follows the measured render speed", lo=0.01)
    min_width: int = option(32, "narrowest preview frame in pixels", lo=8, hi=8192)
    output: ViewerOutput = option("rgb", "what is shown first: rgb, depth or accumulation")
    layout: ViewerLayout = option("side", "two checkpoints: side (side by side), split (a slider between them), a, b, or "
                         "difference (|A - B|, scaled by 4)")
    colormap: str = option("turbo", "matplotlib colormap of the depth output")
    jpeg_quality: int = option(85, "JPEG quality of the preview frames (the finest frame is sent as PNG)", lo=1, hi=100)
    draft: float = option(0.25, "fraction of the renderer's samples per ray in the frames shown before the exact one "
                          "(previews, and a first frame at the resolution cap); 1: every frame exact", lo=0.0, hi=1.0,
                          lo_open=True)
    moving: ViewerMoving = option("splats", "what is shown while the camera moves, when the run has splats (enerf view "
                                  "--splats, or <run>/splats.ply): splats (drawn by the browser) or draft (the "
                                  "field's preview frames)")
    rest_seconds: float = option(0.3, "with splats while moving: how long the camera rests before the field's exact "
                                 "frame is rendered", lo=0.0)
    render_share: float = option(0.2, "enerf train --viewer: the most of the wall time spent rendering for the "
                                 "viewer (the rest trains)", lo=0.0, hi=1.0, lo_open=True, hi_open=True)

    def __post_init__(self) -> None:
        check_config(self)
        if self.min_width > self.max_width:
            raise ConfigError(f"min_width ({self.min_width}) must not exceed max_width ({self.max_width})",
                              fields=("min_width", "max_width"))
        from matplotlib import colormaps

        if self.colormap not in colormaps:
            raise ConfigError(f"colormap {self.colormap!r} is not a matplotlib colormap (e.g. turbo, viridis, gray)",
                              fields=("colormap",))
