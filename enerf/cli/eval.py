"""``enerf eval --ckpt PATH``: recompute a NeRF run's metrics.json from its checkpoint."""

from __future__ import annotations

from pathlib import Path

from ..config import DATA_ROOT
from .common import OneLineParser, add_ckpt_flags
from .train import print_metrics

__all__ = ["cmd_eval"]


def cmd_eval(argv: list[str]) -> int:
    from ..train.evaluate import evaluate_checkpoint

    parser = OneLineParser(prog="enerf eval", description="Recompute metrics.json from a checkpoint.")
    add_ckpt_flags(parser, datadir=True)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    metrics = evaluate_checkpoint(args.ckpt, data_root=DATA_ROOT, device_name=args.device, progress=not args.quiet,
                                  datadir=args.datadir)
    print_metrics(metrics, Path(args.ckpt).resolve().parent.parent / "metrics.json")
    return 0
