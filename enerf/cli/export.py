"""``enerf export depth|pointcloud --ckpt PATH --out OUT``: metric depth maps of a set of cameras, or a
coloured point cloud back-projected from them, from a NeRF checkpoint alone."""

from __future__ import annotations

import os
from pathlib import Path

from ..config import DATA_ROOT, DepthExportConfig, PointCloudConfig
from ..errors import ConfigError
from ..runfolder import check_output_dir, check_output_file, check_parent_exists
from .common import OneLineParser, add_ckpt_flags, add_config_flags, config_from_args

__all__ = ["cmd_export"]

ACTIONS = {
    "depth": (DepthExportConfig, "DIR", "output folder (made if missing; its parent must exist)",
              "Metric depth (.npy and 16-bit PNG), accumulation, normals and transforms.json of a set of cameras."),
    "pointcloud": (PointCloudConfig, "F.ply", "point cloud file (.ply) in an existing folder",
                   "A coloured point cloud with normals, back-projected from the rendered depth of a set of cameras."),
}


def check_out(out: str, folder: bool) -> Path:
    """``--out``: its parent folder exists (a missing one is refused, not made) and the shared
    output checks pass (``runfolder.check_output_dir`` / ``check_output_file``: writable, not a
    file where a folder is wanted and the reverse); a point cloud file ends in .ply.

    Raises:
        ConfigError: one line naming --out.
    """
    path = Path(os.path.abspath(out))
    if folder:
        check_parent_exists(out, "--out")
        if path.exists() and not path.is_dir():
            raise ConfigError(f"--out {out} is a file; give a folder")
        return check_output_dir(path, "--out")
    if path.suffix.lower() != ".ply" and not path.is_dir():
        raise ConfigError(f"--out {out}: a point cloud is written as .ply")
    return check_output_file(path, "--out")


def cmd_export(argv: list[str]) -> int:
    from ..export.depth import export_depth
    from ..export.pointcloud import export_pointcloud
    from ..loaded_run import load_run

    if not argv or argv[0] not in ACTIONS:
        parser = OneLineParser(prog="enerf export", description="Exports from a NeRF checkpoint.")
        parser.add_argument("action", choices=tuple(ACTIONS), help="depth: depth maps of a set of cameras (depth "
                            "--help); pointcloud: a point cloud from them (pointcloud --help)")
        parser.parse_args(argv[:1])
    action = argv[0]
    cfg_cls, metavar, out_help, description = ACTIONS[action]
    parser = OneLineParser(prog=f"enerf export {action}", description=description)
    add_ckpt_flags(parser, datadir=True)
    parser.add_argument("--out", required=True, metavar=metavar, help=out_help)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(parser, cfg_cls)
    args = parser.parse_args(argv[1:])
    cfg = config_from_args(cfg_cls, args)
    out = check_out(args.out, folder=action == "depth")
    run = load_run(args.ckpt, DATA_ROOT, args.device, task="nerf", datadir=args.datadir, images=False)
    if action == "depth":
        info = export_depth(run, out, cfg, progress=not args.quiet)
        print(f"wrote depth, z-depth, accumulation and normals of {info['views']} {cfg.cameras} views "
              f"({info['width']}x{info['height']}, {cfg.frame} frame; {100 * info['hit_fraction']:.1f} % of the pixels "
              f"hit a surface) and transforms.json -> {info['out']}")
    else:
        info = export_pointcloud(run, out, cfg, progress=not args.quiet)
        print(f"wrote {info['points']} points (of {info['candidates']} kept pixels of the {cfg.cameras} views, "
              f"{cfg.frame} frame) -> {info['out']}")
    return 0
