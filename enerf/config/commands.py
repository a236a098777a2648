"""Options of the commands that read a checkpoint or make data: render, mesh, compare, data synth."""

from __future__ import annotations

from typing import Literal, get_args

from ..errors import ConfigError
from .spec import MAX_GRID, MAX_SEED, check_box, check_config, config_class, option

__all__ = ["CAMERA_PATHS", "CAMERAS_HELP", "check_cameras", "VideoConfig", "MeshConfig", "CompareConfig", "SynthConfig",
           "ViewerConfig", "VIEWER_OUTPUTS", "VIEWER_LAYOUTS", "VIEWER_MOVING", "PoseConfig", "FramesConfig"]

CameraPath = Literal["spiral", "orbit", "test", "train", "interp", "ellipse"]
MeshNetwork = Literal["fine", "coarse"]
MeshFrame = Literal["world", "scene"]
MeshMethod = Literal["density", "tsdf"]
MeshUnwrap = Literal["auto", "xatlas", "pairs"]
XATLAS_MAX_FACES = 20_000  # --unwrap auto: xatlas's charts up to this many faces, face pairs above
TaskName = Literal["nerf", "shape"]
Launcher = Literal["local", "ray"]
CAMERA_PATHS = get_args(CameraPath)
ViewerOutput = Literal["rgb", "depth", "accumulation"]  # enerf.viewer.render.OUTPUTS
ViewerLayout = Literal["side", "split", "a", "b", "difference"]  # two checkpoints: how they share the view
ViewerMoving = Literal["splats", "draft"]  # what the browser shows while its camera moves (enerf.viewer.splat_layer)
VIEWER_OUTPUTS, VIEWER_LAYOUTS, VIEWER_MOVING = get_args(ViewerOutput), get_args(ViewerLayout), get_args(ViewerMoving)
PoseMatcher = Literal["auto", "sequential", "exhaustive"]  # enerf.ingest.colmap.MATCHERS, plus auto
PoseLayout = Literal["nerfstudio", "llff", "blender"]  # enerf.ingest.colmap.LAYOUTS
CameraModel = Literal["SIMPLE_RADIAL", "SIMPLE_PINHOLE", "RADIAL", "PINHOLE", "OPENCV", "OPENCV_FISHEYE"]
CAMERAS_HELP = ("test (held-out views), train, or a camera path of enerf render --path: spiral, orbit, interp, "
                "ellipse, or a .json file saved by enerf view")


def check_cameras(cameras: str) -> None:
    """``--cameras`` of the commands that render a set of cameras: a name of CAMERA_PATHS or a .json path file."""
    if cameras not in CAMERA_PATHS and not cameras.lower().endswith(".json"):
        raise ConfigError(f"cameras must be one of {', '.join(CAMERA_PATHS)} or a .json camera path file, got "
                          f"{cameras!r}", fields=("cameras",))


@config_class
class VideoConfig:
    """``enerf render``: camera path, frame count and encoding of the novel-view videos."""

    path: str = option("spiral", "camera path: spiral (LLFF; the orbit on Blender scenes), orbit (Blender: "
                       "elevation -30 deg, radius 4), test (held-out views), train, interp (through the training "
                       "cameras), ellipse (around the point the training cameras look at; captures), or a camera "
                       "path file (.json, saved by enerf view)")
    frames: int = option(120, "frames of the spiral / interp / ellipse paths (test / train: one per view)", lo=1, hi=100_000)
    fps: int = option(30, "frames per second of the videos", lo=1, hi=1000)
    downscale: int = option(1, "render at 1/N of the training image size", lo=1)
    colormap: str = option("turbo", "matplotlib colormap for depth / disparity")
    quality: float = option(8.0, "imageio-ffmpeg quality, 0 (worst) .. 10 (best)", lo=0.0, hi=10.0)
    png: bool = option(False, "also write every frame as PNG")
    chunk: int = option(0, "rays per forward pass (0: the checkpoint's chunk); bounds the peak memory", lo=0)

    def __post_init__(self) -> None:
        check_config(self)
        if self.path not in CAMERA_PATHS and not self.path.lower().endswith(".json"):
            raise ConfigError(f"path must be one of {', '.join(CAMERA_PATHS)} or a .json file saved by enerf view, "
                              f"got {self.path!r}", fields=("path",))
        from matplotlib import colormaps

        if self.colormap not in colormaps:
            raise ConfigError(f"colormap {self.colormap!r} is not a matplotlib colormap (e.g. turbo, viridis, gray)",
                              fields=("colormap",))


def _positive(name: str, value: int) -> int:
    """A flag that must be at least 1 where the field's default (0) means "off"."""
    if value < 1:
        raise ConfigError(f"{name} must be at least 1, got {value}", fields=(name,))
    return value


@config_class
class MeshConfig:
    """``enerf mesh``: density grid, iso-level and clean-up."""

    method: MeshMethod = option("density", "density: marching cubes of the density at --threshold; tsdf: fuse the "
                                "rendered depth of the training views, or of --cameras (the surface the cameras saw)")
    resolution: int = option(256, "grid points per axis", lo=8, hi=MAX_GRID)
    threshold: float = option(10.0, "density iso-level (sigma, in the field's coordinates)")
    downscale: int = option(1, "tsdf: render the views at 1/N of their size", lo=1)
    cameras: str = option("train", "tsdf: whose rendered depth is fused: " + CAMERAS_HELP)
    frames: int = option(120, "tsdf: frames of a camera path (test / train: one per view)", lo=1, hi=100_000)
    chunk: int = option(65536, "grid points per forward pass", lo=1)
    min_component: int = option(0, "drop connected components with fewer faces (0: keep all)", lo=0)
    faces: int = option(0, "simplify to at most N faces (quadric decimation; default: keep all)", lo=0,
                        from_flag=lambda n: _positive("faces", n))
    texture: bool = option(False, "unwrap UVs (--unwrap) and bake the field's colour into a texture image "
                           "(--out .obj or .glb)")
    texture_size: int = option(2048, "texture width and height in pixels", lo=64, hi=16384)
    unwrap: MeshUnwrap = option("auto", "--texture's UV layout: xatlas (charts; the mesh extra), pairs (two faces per "
                                "square cell: fast on any mesh), auto (xatlas up to "
                                f"{XATLAS_MAX_FACES:,} faces when installed)")
    bbox: tuple[float, ...] = option((), "xmin ymin zmin xmax ymax zmax in the field's coordinates (NDC for "
                                     "forward-facing scenes; default: from the scene; a field with --contraction: a cube around "
                                     "the point the cameras look at)")
    field: MeshNetwork = option("fine", "fine (if the checkpoint has one) or coarse network")
    frame: MeshFrame = option("world", "world (poses_bounds.npy frame) or scene (normalised frame)")

    def __post_init__(self) -> None:
        check_config(self)
        check_cameras(self.cameras)
        if self.bbox:
            check_box("bbox", self.bbox)


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
