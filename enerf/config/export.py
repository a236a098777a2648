"""Options of the exports, ``enerf export mesh|pointcloud|depth|splats|html|video`` (``enerf mesh`` and
``enerf render`` are the mesh's and the video's other names): one config each."""

from __future__ import annotations

from typing import Literal, get_args

from ..errors import ConfigError
from .presets import CAPTURE_SPLAT_SECONDS
from .spec import MAX_GRID, check_box, check_config, config_class, option

__all__ = ["CAMERA_PATHS", "CAMERAS_HELP", "SPLAT_SUFFIXES", "check_crop", "XATLAS_MAX_FACES", "check_cameras", "VideoConfig", "MeshConfig",
           "DepthExportConfig", "PointCloudConfig", "SplatConfig", "HtmlExportConfig"]

CameraPath = Literal["spiral", "orbit", "test", "train", "interp", "ellipse"]
MeshNetwork = Literal["fine", "coarse"]
MeshFrame = Literal["world", "scene"]
MeshMethod = Literal["density", "tsdf"]
MeshUnwrap = Literal["auto", "xatlas", "pairs"]
XATLAS_MAX_FACES = 20_000  # --unwrap auto: xatlas's charts up to this many faces, face pairs above
CAMERA_PATHS = get_args(CameraPath)
SPLAT_SUFFIXES = (".ply", ".spz", ".splat")  # the keys of enerf.splats.files.FORMATS (a test keeps them equal)
_CROP_SHAPES = {6: "a box x0 y0 z0 x1 y1 z1", 4: "a sphere cx cy cz r"}  # enerf.splats.clean.CROPS by count
CAMERAS_HELP = ("test (held-out views), train, or a camera path of enerf render --path: spiral, orbit, interp, "
                "ellipse, or a .json file saved by enerf view")


def check_cameras(cameras: str) -> None:
    """``--cameras`` of the commands that render a set of cameras: a name of CAMERA_PATHS or a .json path file."""
    if cameras not in CAMERA_PATHS and not cameras.lower().endswith(".json"):
        raise ConfigError(f"cameras must be one of {', '.join(CAMERA_PATHS)} or a .json camera path file, got "
                          f"{cameras!r}", fields=("cameras",))


@config_class
class VideoConfig:
    """``enerf export video`` (``enerf render``): camera path, frame count and encoding of the novel-view videos."""

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
    """``enerf export mesh`` (``enerf mesh``): density grid, iso-level and clean-up."""

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
class DepthExportConfig:
    """``enerf export depth``: which cameras, at what size, in which frame."""

    cameras: str = option("test", CAMERAS_HELP)
    frames: int = option(120, "frames of a camera path (test / train: one per view)", lo=1, hi=100_000)
    downscale: int = option(1, "render at 1/N of the training image size", lo=1)
    frame: MeshFrame = option("world", "world (the capture's own frame: poses_bounds.npy / transforms.json) or scene "
                              "(the normalised frame the run trained in)")
    chunk: int = option(0, "rays per forward pass (0: the checkpoint's chunk)", lo=0)

    def __post_init__(self) -> None:
        check_config(self)
        check_cameras(self.cameras)


@config_class
class PointCloudConfig:
    """``enerf export pointcloud``: cameras, which pixels become points, how many, and where."""

    cameras: str = option("train", CAMERAS_HELP)
    frames: int = option(120, "frames of a camera path (test / train: one per view)", lo=1, hi=100_000)
    downscale: int = option(1, "render at 1/N of the training image size", lo=1)
    points: int = option(1_000_000, "points written at most (an even subsample of the pixels kept)", lo=1,
                         hi=1_000_000_000)
    min_acc: float = option(0.9, "keep pixels whose accumulated opacity is at least this", lo=0.0, hi=1.0, lo_open=True)
    bbox: tuple[float, ...] = option((), "xmin ymin zmin xmax ymax zmax in the field's coordinates (as enerf mesh "
                                     "--bbox; default: the box enerf mesh uses)")
    frame: MeshFrame = option("world", "world (the capture's own frame) or scene (the normalised frame)")
    chunk: int = option(0, "rays per forward pass (0: the checkpoint's chunk)", lo=0)

    def __post_init__(self) -> None:
        check_config(self)
        check_cameras(self.cameras)
        if self.bbox:
            check_box("bbox", self.bbox)


def check_crop(crop: tuple[float, ...]) -> None:
    """``--crop``: empty, a box (6 numbers, each min < max) or a sphere (4 numbers, radius > 0)."""
    if crop and len(crop) not in _CROP_SHAPES:
        raise ConfigError(f"crop takes {' or '.join(_CROP_SHAPES.values())}, got {len(crop)} numbers",
                          fields=("crop",))
    if len(crop) == 6:
        check_box("crop", crop)
    if len(crop) == 4 and not crop[3] > 0:
        raise ConfigError(f"crop: the sphere's radius must be positive, got {crop[3]}", fields=("crop",))


@config_class
class SplatConfig:
    """``enerf export splats``: how many Gaussians, their SH degree, how they start and how long they fit."""

    count: int = option(300_000, "Gaussians at most (the starting ones: one per rendered pixel, a random subset "
                         "when there are more)", lo=1, hi=50_000_000)
    sh_degree: int = option(1, "SH degree of the colours (0: one colour per Gaussian; 3: as 3DGS)", lo=0, hi=3)
    bake_seconds: float = option(CAPTURE_SPLAT_SECONDS, "seconds the bake takes: the splats started from the field, "
                                 "then fitted to the training photos for the time left (at least a quarter of it; 0: "
                                 "no fit, the starting splats as they are); the default is a capture run's splat stage",
                                 lo=0.0)
    init_downscale: int = option(4, "render the training views at 1/N of their size for the starting splats", lo=1)
    init_views: int = option(48, "training views rendered for the starting splats at most, evenly spread over the "
                             "capture (0: all)", lo=0)
    init_min_acc: float = option(0.05, "a pixel starts a Gaussian when its accumulated opacity is at least this (a "
                                 "hazy pixel too: its Gaussian starts faint)", lo=0.0, hi=1.0, lo_open=True)
    init_max_violations: int = option(2, "a starting point is dropped when more training views than this see through "
                                      "it (their surface lies beyond it)", lo=0)
    init_opacity: float = option(0.5, "a starting Gaussian's opacity where the field is opaque; times the pixels' "
                                 "accumulated opacity elsewhere", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    init_scale: float = option(1.0, "a starting Gaussian's standard deviation relative to half its surface cell "
                               "(one rendered pixel's footprint)", lo=0.0, lo_open=True)
    init_flatness: float = option(0.2, "a starting Gaussian's thickness along its surface normal, relative to its "
                                  "width", lo=0.0, hi=1.0, lo_open=True)
    fit_rows: int = option(0, "image rows rendered per fitting step (0: the whole photo)", lo=0)
    fit_downscale: int = option(1, "fit to the photos at 1/N of the training size (N x N blocks averaged)", lo=1)
    fit_lr: float = option(3.0, "learning rates of the fit relative to 3DGS's", lo=0.0, lo_open=True)
    fit_ssim: float = option(0.2, "weight of D-SSIM in the fit's loss, (1 - w) L1 + w (1 - SSIM) (3DGS's 0.2; 0: L1 "
                             "alone)", lo=0.0, hi=1.0)
    random_background: bool = option(True, "fit on a random background colour each step where the run composites "
                                     "onto black (photos without transparency): the splats must cover every pixel "
                                     "themselves, so nothing black shows where they thin out (3DGS's "
                                     "--random_background); false: on the run's background")
    teacher_views: int = option(32, "the field rendered from this many cameras between and beyond the training ones "
                                "(at 1/init_downscale), fitted beside the photos (0: the photos alone)", lo=0)
    teacher_share: float = option(0.25, "share of the fit's steps spent on the field's renderings", lo=0.0, hi=1.0)
    teacher_push: float = option(0.2, "the teacher cameras pushed in or out along their axis by up to this times their "
                                 "depth", lo=0.0, hi=0.9)
    teacher_turn: float = option(20.0, "degrees: the field also rendered from every rendered training camera turned "
                                 "up, down, left and right by this much, fitted beside the photos where it draws a "
                                 "surface (--turn_spread); those of their pixels that no training camera frames start "
                                 "Gaussians, so a view that looks past the photos' edges finds splats there (0: none)",
                                 lo=0.0, hi=90.0)
    turn_spread: float = option(0.1, "a turned view teaches and starts Gaussians only where the field draws a surface, "
                                "not fog: at least half opaque, its expected termination depth within this fraction of "
                                "its median one (0: every pixel)", lo=0.0)
    antialiased: bool = option(True, "fit and draw the splats with the 2D mip filter (Mip-Splatting; gsplat's "
                               "antialiased mode): they keep their coverage at any window size; recorded in the file "
                               "(.ply, .spz; a viewer without the filter draws them fuller); false: classic 3DGS")
    max_spread: float = option(0.25, "a Gaussian's largest standard deviation is kept at most this times its distance "
                               "from the nearest training camera (its angular size), so that no splat stretches across "
                               "a whole view (0: no cap)", lo=0.0)
    densify_every: int = option(0, "fitting steps between two densifications (0: none, the count stays fixed)", lo=0)
    densify_grow: float = option(0.15, "fraction of the Gaussians cloned or split at each densification (those "
                                 "with the largest screen-space gradient), until --count", lo=0.0, hi=1.0)
    densify_until: float = option(0.5, "densify during this fraction of the fitting time", lo=0.0, hi=1.0)
    seed: int = option(0, "seed of the subset and of the fitting order", lo=0)
    frame: MeshFrame = option("world", "world (the capture's own frame: poses_bounds.npy / transforms.json) or scene "
                              "(the normalised frame the run trained in; .ply only: .spz and .splat cannot name "
                              "it); with --splats and no --ckpt, the file's own frame is kept")
    splats: str = option("", "a splat file (.ply, .spz, .splat) to crop, clean or convert into --out instead of "
                         "baking (--ckpt then optional: it brings the run's cameras for --min_contribution and "
                         "its frames for --frame)")
    crop: tuple[float, ...] = option((), "keep the Gaussians whose centre lies in a box x0 y0 z0 x1 y1 z1 or a sphere "
                                     "cx cy cz r, in the frame of the file written (default: all)")
    min_contribution: float = option(0.0, "drop the Gaussians that give every training view less than this many "
                                     "pixels' worth of colour (their blending weight summed over a view; floaters "
                                     "no training camera sees; 0: off; needs --ckpt)", lo=0.0)

    def __post_init__(self) -> None:
        check_config(self)
        check_crop(self.crop)


@config_class
class HtmlExportConfig:
    """``enerf export html``: which splat file goes into the page (empty: the run's ``splats.ply``, so
    ``--ckpt`` is needed then; ``enerf.cli.export``), how many of its splats, its title."""

    splats: str = option("", "the splat file (.ply, .spz or .splat, e.g. from enerf export splats) to show (default with "
                         "--ckpt: the run's splats.ply)")
    title: str = option("", "the page's title (default: the splat file's name)")
    max_splats: int = option(500_000, "splats kept at most (the largest opacity x volume first)", lo=1,
                             hi=50_000_000)
    sh_degree: int = option(1, "view-dependent colour in the page: 0 (one colour per splat) or 1 (SH band 1, "
                            "where the file has it)", lo=0, hi=1)

    def __post_init__(self) -> None:
        check_config(self)
