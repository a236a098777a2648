"""Options of ``enerf export depth``, ``enerf export pointcloud``, ``enerf export splats`` and ``enerf export html``."""

from __future__ import annotations

from .commands import CAMERAS_HELP, MeshFrame, check_cameras
from ..errors import ConfigError
from .spec import check_box, check_config, config_class, option

__all__ = ["DepthExportConfig", "PointCloudConfig", "SplatConfig", "HtmlExportConfig"]


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


@config_class
class SplatConfig:
    """``enerf export splats``: how many Gaussians, their SH degree, how they start and how long they fit."""

    count: int = option(300_000, "Gaussians at most (the starting ones: one per rendered pixel, a random subset "
                         "when there are more)", lo=1, hi=50_000_000)
    sh_degree: int = option(1, "SH degree of the colours (0: one colour per Gaussian; 3: as 3DGS)", lo=0, hi=3)
    bake_seconds: float = option(180.0, "seconds of fitting the splats to the training photos (0: the field's "
                                 "starting splats as they are)", lo=0.0)
    init_downscale: int = option(4, "render the training views at 1/N of their size for the starting splats", lo=1)
    init_min_acc: float = option(0.5, "a pixel starts a Gaussian when its accumulated opacity is at least this",
                                 lo=0.0, hi=1.0, lo_open=True)
    init_max_violations: int = option(2, "a starting point is dropped when more training views than this see through "
                                      "it (their surface lies beyond it)", lo=0)
    init_opacity: float = option(0.5, "the starting Gaussians' opacity", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    init_scale: float = option(1.0, "a starting Gaussian's standard deviation relative to half its surface cell "
                               "(one rendered pixel's footprint)", lo=0.0, lo_open=True)
    init_flatness: float = option(0.2, "a starting Gaussian's thickness along its surface normal, relative to its "
                                  "width", lo=0.0, hi=1.0, lo_open=True)
    fit_rows: int = option(0, "image rows rendered per fitting step (0: the whole photo)", lo=0)
    fit_downscale: int = option(2, "fit to the photos at 1/N of the training size (N x N blocks averaged)", lo=1)
    fit_lr: float = option(3.0, "learning rates of the fit relative to 3DGS's", lo=0.0, lo_open=True)
    densify_every: int = option(50, "fitting steps between two densifications (0: the count stays fixed)", lo=0)
    densify_grow: float = option(0.15, "fraction of the Gaussians cloned or split at each densification (those "
                                 "with the largest screen-space gradient), until --count", lo=0.0, hi=1.0)
    densify_until: float = option(0.5, "densify during this fraction of the fitting time", lo=0.0, hi=1.0)
    seed: int = option(0, "seed of the subset and of the fitting order", lo=0)
    frame: MeshFrame = option("world", "world (the capture's own frame: poses_bounds.npy / transforms.json) or scene "
                              "(the normalised frame the run trained in)")

    def __post_init__(self) -> None:
        check_config(self)


@config_class
class HtmlExportConfig:
    """``enerf export html``: which splat file goes into the page, how many of its splats, its title."""

    splats: str = option("", "the 3DGS splat file (.ply, e.g. from enerf export splats) to show (required)")
    title: str = option("", "the page's title (default: the splat file's name)")
    max_splats: int = option(500_000, "splats kept at most (the largest opacity x volume first)", lo=1,
                             hi=50_000_000)
    sh_degree: int = option(1, "view-dependent colour in the page: 0 (one colour per splat) or 1 (SH band 1, "
                            "where the file has it)", lo=0, hi=1)

    def __post_init__(self) -> None:
        check_config(self)
        if not self.splats:
            raise ConfigError("splats is required: the 3DGS splat file (.ply) to put in the page", fields=("splats",))
