"""``enerf data synth|colmap``: write the embedded synthetic scene, or pose your own photos."""

from __future__ import annotations

from ..config import SynthConfig
from ..runfolder import check_output_dir
from .common import OneLineParser, add_config_flags, config_from_args

__all__ = ["cmd_data"]


def cmd_data(argv: list[str]) -> int:
    from ..data.synthetic import synth_main

    if argv and argv[0] == "colmap":
        from ..data.colmap import colmap_main

        return colmap_main(argv[1:])
    parser = OneLineParser(prog="enerf data", description="Dataset utilities.")
    parser.add_argument("action", choices=("synth", "colmap"),
                        help="synth: write the embedded synthetic scene; colmap: pose your own photos (colmap --help)")
    parser.add_argument("--out", required=True, help="output folder (LLFF layout)")
    add_config_flags(parser, SynthConfig)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    cfg = config_from_args(SynthConfig, args)
    check_output_dir(args.out, "--out")
    path = synth_main(args.out, cfg.views, cfg.width, cfg.height, cfg.seed, args.overwrite)
    print(f"wrote synthetic LLFF scene to {path}")
    return 0
