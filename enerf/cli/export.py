"""``enerf export ACTION``, the one door for what a trained run is turned into:

* ``mesh`` (also ``enerf mesh``) and ``video`` (also ``enerf render``): a mesh, novel-view videos;
  their own parsers (``cli/mesh.py``, ``cli/render.py``: ``--out`` optional, a file in the run folder);
* ``depth|pointcloud|splats --ckpt PATH --out OUT``: metric depth maps of a set of cameras, a
  coloured point cloud back-projected from them, or the field baked into Gaussian splats (a 3DGS PLY,
  SPZ or .splat; or ``--splats IN`` cropped / converted without a bake, ``--ckpt`` optional);
* ``html --splats F.ply|F.spz|F.splat --out OUT [--ckpt PATH]``: a splat file as one self-contained web page (with
  the run's cameras when a checkpoint is given; ``--ckpt`` alone: the run's ``splats.ply``).

Their options: ``enerf.config.export``."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..config import DATA_ROOT, DepthExportConfig, HtmlExportConfig, PointCloudConfig, SplatConfig
from ..config.export import SPLAT_SUFFIXES
from ..errors import ConfigError
from ..runfolder import RUN_SPLATS, check_output_dir, check_output_file, check_parent_exists, choose_splats
from .common import OneLineParser, add_ckpt_flags, add_config_flags, config_from_args
from .mesh import cmd_mesh
from .render import cmd_render

__all__ = ["cmd_export", "ACTIONS", "Action", "OWN_PARSER", "EXPORTS"]


def _depth(run, out: Path, cfg: DepthExportConfig, progress: bool) -> str:
    from ..export.depth import export_depth

    info = export_depth(run, out, cfg, progress=progress)
    return (f"wrote depth, z-depth, accumulation and normals of {info['views']} {cfg.cameras} views "
            f"({info['width']}x{info['height']}, {cfg.frame} frame; {100 * info['hit_fraction']:.1f} % of the pixels "
            f"hit a surface) and transforms.json -> {info['out']}")


def _pointcloud(run, out: Path, cfg: PointCloudConfig, progress: bool) -> str:
    from ..export.pointcloud import export_pointcloud

    info = export_pointcloud(run, out, cfg, progress=progress)
    return f"wrote {info['points']} points (of {info['candidates']} kept pixels of the {cfg.cameras} views, " \
           f"{cfg.frame} frame) -> {info['out']}"


def _splats(run, out: Path, cfg: SplatConfig, progress: bool) -> str:
    from ..splats.export import export_splats

    info = export_splats(run, out, cfg, progress=progress)
    report = info["report"]
    how = (f": started from {report.candidates} pixels of the field in {report.init_seconds:.0f} s, fitted "
           f"{report.fit_steps} steps ({report.backend}) in {report.fit_seconds:.0f} s" if report is not None
           else f" from {cfg.splats}")
    removed = "; ".join(f"removed {n} {_REMOVED[why]}" for why, n in info["removed"].items() if n or why != "not finite")
    return (f"wrote {info['count']} splats (SH degree {info['sh_degree']}, {info['frame']} frame, "
            f"{info['bytes'] / 1e6:.1f} MB) in {info['seconds']:.0f} s{how}{'; ' if removed else ''}{removed} "
            f"-> {info['out']}")


_REMOVED = {"not finite": "with a value that is not finite", "floaters": "floaters (below --min_contribution)",
            "crop": "outside --crop"}  # export_splats' removed counts, worded


def _html(run, out: Path, cfg: HtmlExportConfig, progress: bool) -> str:
    from ..splats.export import export_html

    if not cfg.splats:  # the run's splats.ply, titled with the run's name
        choice = choose_splats(None, run.folder, field=False) if run is not None else None
        if choice is None or choice.path is None:
            raise ConfigError("enerf export html needs --splats F.ply" + (
                "" if run is None else f": the run has no {RUN_SPLATS} (bake one: enerf export splats --ckpt "
                f"{run.ckpt_path} --out {run.folder / RUN_SPLATS})"))
        print(f"enerf export html: {choice.describe('--splats F.ply for another file')}", flush=True)
        cfg = dataclasses.replace(cfg, splats=str(choice.path), title=cfg.title or run.folder.name)
    info = export_html(cfg, out, run)
    kept = f"{info['splats']} splats" + (f" (of {info['splats_in']})" if info["splats"] < info["splats_in"] else "")
    views = (f"{info['cameras']} cameras of the run ({info['frame']} frame)" if run is not None
             else "no cameras (the page's own view)")
    dropped = f" (dropped {info['not_finite']} {_REMOVED['not finite']})" if info["not_finite"] else ""
    return (f"wrote a page of {kept}{dropped}, SH degree {info['sh_degree']}, {views}, {info['bytes'] / 1e6:.1f} MB "
            f"-> {info['path']}")


@dataclass(frozen=True)
class Action:
    """One ``enerf export`` action: its config, ``--out`` (a folder, or a file with one of ``suffixes``),
    whether it needs a checkpoint and the scene's images, and the function that runs it and words its
    one line."""

    config: type
    metavar: str
    out_help: str
    description: str
    run: Callable[..., str]  # (LoadedRun or None without --ckpt, out, config, progress) -> the line printed
    folder: bool = False
    suffixes: tuple[str, ...] = ()
    what: str = ""  # what the file is, for the suffix error
    images: bool = False  # load the scene's images (the bake fits the training photos)
    ckpt_required: bool = True  # False: --ckpt is optional (the action gets None for the run without it)
    index: str = ""  # the file written when --out is an existing folder ("": a folder is refused)
    refused: tuple[tuple[str, str], ...] = ()  # (suffix people try, why it is not written)


ACTIONS = {
    "depth": Action(DepthExportConfig, "DIR", "output folder (made if missing; its parent must exist)",
                    "Metric depth (.npy and 16-bit PNG), accumulation, normals and transforms.json of a set of cameras.",
                    _depth, folder=True),
    "pointcloud": Action(PointCloudConfig, "F.ply", "point cloud file (.ply) in an existing folder",
                         "A coloured point cloud with normals, back-projected from the rendered depth of a set of "
                         "cameras.", _pointcloud, suffixes=(".ply",), what="a point cloud"),
    "splats": Action(SplatConfig, "F.ply|F.spz|F.splat", "splat file in an existing folder, by its extension: .ply "
                     "(the 3DGS layout, float32), .spz (Niantic's, quantised and gzip'd), .splat (antimatter15's, "
                     "SH band 0 only)",
                     "The field baked into 3D Gaussian splats, fitted to the training photos (or the splat file "
                     "--splats, without a bake), cropped and cleaned, written as a 3DGS PLY (SuperSplat, Spark, "
                     "gsplat, nerfstudio and viser read it), SPZ or .splat.", _splats, suffixes=SPLAT_SUFFIXES,
                     what="a splat file", images=True, ckpt_required=False),
    "html": Action(HtmlExportConfig, "F.html|DIR", "the page (.html) in an existing folder, or an existing folder "
                   "(then DIR/index.html)",
                   "A splat file as one self-contained web page (WebGL; opens from file:// with no network). With "
                   "--ckpt, the page starts at the run's first training camera and steps through its cameras; "
                   "--ckpt without --splats takes the run's splats.ply.",
                   _html, suffixes=(".html",), what="a page", ckpt_required=False, index="index.html"),
}


# Exports with a parser of their own (``--out`` optional: a default in the run folder), also reachable
# under their first names: enerf mesh, enerf render (the same function: they print the same).
OWN_PARSER: dict[str, Callable[[list[str], str], int]] = {"mesh": cmd_mesh, "video": cmd_render}
EXPORTS = ("mesh", "pointcloud", "depth", "splats", "html", "video")  # ACTIONS and OWN_PARSER, in the order help lists them


def check_out(out: str, action: Action) -> Path:
    """``--out``: its parent folder exists (a missing one is refused, not made) and the shared
    output checks pass (``runfolder.check_output_dir`` / ``check_output_file``: writable, not a
    file where a folder is wanted and the reverse); a file ends in one of the action's suffixes;
    an existing folder, for an action with an ``index`` file, means that file in it.

    Raises:
        ConfigError: one line naming --out.
    """
    path = Path(os.path.abspath(out))
    if action.index and path.is_dir():
        path = path / action.index
    if action.folder:
        check_parent_exists(out, "--out")
        if path.exists() and not path.is_dir():
            raise ConfigError(f"--out {out} is a file; give a folder")
        return check_output_dir(path, "--out")
    suffix, refused = path.suffix.lower(), dict(action.refused)
    if suffix in refused and not path.is_dir():
        raise ConfigError(f"--out {out}: {refused[suffix]}")
    if suffix not in action.suffixes and not path.is_dir():
        raise ConfigError(f"--out {out}: {action.what} is written as {' or '.join(action.suffixes)}")
    return check_output_file(path, "--out")


def cmd_export(argv: list[str]) -> int:
    from ..loaded_run import load_run

    if not argv or argv[0] not in EXPORTS:
        parser = OneLineParser(prog="enerf export", description="Exports from a NeRF checkpoint or a splat file.")
        parser.add_argument("action", choices=EXPORTS, help="mesh: a mesh of the density (mesh --help; also enerf "
                            "mesh); pointcloud: a point cloud from rendered depth (pointcloud --help); depth: depth "
                            "maps of a set of cameras (depth --help); splats: the field baked into Gaussian splats "
                            "(splats --help); html: a splat file as a web page (html --help); video: novel-view "
                            "videos (video --help; also enerf render)")
        parser.parse_args(argv[:1])
    if argv[0] in OWN_PARSER:
        return OWN_PARSER[argv[0]](argv[1:], f"enerf export {argv[0]}")
    name = argv[0]
    action = ACTIONS[name]
    parser = OneLineParser(prog=f"enerf export {name}", description=action.description)
    add_ckpt_flags(parser, datadir=True, required=action.ckpt_required)
    parser.add_argument("--out", required=True, metavar=action.metavar, help=action.out_help)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(parser, action.config)
    args = parser.parse_args(argv[1:])
    cfg = config_from_args(action.config, args)
    out = check_out(args.out, action)
    run = (load_run(args.ckpt, DATA_ROOT, args.device, task="nerf", datadir=args.datadir, images=action.images)
           if args.ckpt else None)
    print(action.run(run, out, cfg, not args.quiet))
    return 0
