"""``enerf eval --ckpt PATH [--splats F.ply]``: recompute a NeRF run's metrics.json from its checkpoint,
or score splats baked from it on the same held-out views (metrics_splats.json)."""

from __future__ import annotations

from pathlib import Path

from ..config import DATA_ROOT
from .common import OneLineParser, add_ckpt_flags, add_splats_flag
from .train import print_metrics

__all__ = ["cmd_eval"]


def cmd_eval(argv: list[str]) -> int:
    from ..train.eval_run import EVAL_OUTPUTS, evaluate_checkpoint

    parser = OneLineParser(prog="enerf eval", description="Recompute metrics.json from a checkpoint, or score its "
                           "splats (--splats: metrics_splats.json, test_views_splats/).")
    add_ckpt_flags(parser, datadir=True)
    add_splats_flag(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    metrics = evaluate_checkpoint(args.ckpt, data_root=DATA_ROOT, device_name=args.device, progress=not args.quiet,
                                  datadir=args.datadir, splats=args.splats)
    name = EVAL_OUTPUTS["field" if args.splats is None else "splats"][0]
    print_metrics(metrics, Path(args.ckpt).resolve().parent.parent / name)
    return 0
