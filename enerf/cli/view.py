"""``enerf view --ckpt PATH [--ckpt PATH2] [--splats F.ply | --field]``: a trained run (or two, side by
side), its splats (by default ``<run>/splats.ply`` when it exists), or splats alone, in the browser."""

from __future__ import annotations

import sys
import time

from ..config import DATA_ROOT, DEVICES, ViewerConfig
from .common import DATADIR_HELP, OneLineParser, add_config_flags, add_splats_flag, config_from_args

__all__ = ["cmd_view", "add_viewer_flags"]


def add_viewer_flags(parser, prefix: str = "") -> None:
    """The ``ViewerConfig`` flags (``enerf train --viewer`` names them ``--viewer_<field>``)."""
    if not prefix:
        add_config_flags(parser, ViewerConfig)
        return
    group = OneLineParser(add_help=False)
    add_config_flags(group, ViewerConfig)
    for action in group._actions:
        parser.add_argument(*(f"--{prefix}{opt[2:]}" for opt in action.option_strings), dest=f"{prefix}{action.dest}",
                            type=action.type, nargs=action.nargs, const=action.const, default=None,
                            help=action.help, metavar=action.metavar)


def cmd_view(argv: list[str]) -> int:
    from ..viewer.app import open_view

    parser = OneLineParser(prog="enerf view", description="Show a checkpoint in the browser, or two of one scene "
                           "side by side, or Gaussian splats (needs the viewer extra: pip install -e \".[viewer]\").")
    parser.add_argument("--ckpt", action="append", default=[],
                        help="a NeRF checkpoint (.pt); give it twice to compare two runs of one scene")
    add_splats_flag(parser, "a splat file, .ply (3DGS), .spz or .splat (enerf export splats): alone, the splats only; with one --ckpt, drawn by the "
                    "browser while the camera moves (default: <run>/splats.ply when it exists)",
                    "the field only: no splats, not even the run's splats.ply")
    parser.add_argument("--device", choices=DEVICES, default=None,
                        help="auto (CUDA if available), cpu or cuda (default: the run's device setting)")
    parser.add_argument("--datadir", default=None, help=DATADIR_HELP)
    add_viewer_flags(parser)
    args = parser.parse_args(argv)
    cfg = config_from_args(ViewerConfig, args)
    viewer = open_view(args.ckpt, cfg, DATA_ROOT, args.device, datadir=args.datadir, splats=args.splats,
                       field=args.field, announce=lambda line: print(f"enerf view: {line}", flush=True))
    print(f"enerf view: open {viewer.url} in a browser (Ctrl+C stops the viewer)", flush=True)
    if cfg.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"enerf view: note: listening on {cfg.host}, reachable from other machines", file=sys.stderr)
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        viewer.close()
    return 0
