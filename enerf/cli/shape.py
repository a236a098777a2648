"""``enerf shape train|mesh|eval``: fit occupancy / SDF networks to meshes, extract and score them."""

from __future__ import annotations

from pathlib import Path

import configargparse

from ..config import ShapeMeshConfig, ShapeRunConfig
from ..errors import ConfigError
from .common import OneLineParser, add_ckpt_flags, add_config_flags, config_from_args
from .train import add_run_flags

__all__ = ["cmd_shape", "build_shape_train_parser"]

ACTIONS = ("train", "mesh", "eval")


def build_shape_train_parser() -> OneLineParser:
    """The ``enerf shape train`` parser: one flag per ShapeRunConfig field."""
    parser = OneLineParser(
        prog="enerf shape train", config_file_parser_class=configargparse.DefaultConfigFileParser,
        description="Fit an occupancy or SDF network to a mesh; writes metrics.json, mesh and checkpoint.")
    parser.add_argument("--config", is_config_file=True, help="configargparse file (key = value per line)")
    add_config_flags(parser, ShapeRunConfig)
    add_run_flags(parser)
    return parser


def _print_shape_metrics(m: dict, where: Path) -> None:
    fmt = {k: "n/a" if m.get(k) is None else f"{m[k]:.4f}" for k in ("iou", "normal_consistency", "fscore")}
    chamfer = "n/a" if m.get("chamfer_l1") is None else f"{m['chamfer_l1']:.5f}"
    print(f"IoU {fmt['iou']}  Chamfer-L1 {chamfer}  NC {fmt['normal_consistency']}  F-score {fmt['fscore']}"
          f"  ({m['steps']} steps, {m['train_seconds']:.0f} s) -> {where}")
    if m.get("mesh_error"):
        print(f"no surface: {m['mesh_error']}")


def cmd_shape(argv: list[str]) -> int:
    from ..shapes.train import evaluate_shape_checkpoint, mesh_from_checkpoint, train_shape

    if not argv or argv[0] not in ACTIONS:
        if argv and argv[0] not in ("-h", "--help"):
            raise ConfigError(f"enerf shape: unknown action {argv[0]!r}; choose one of: {', '.join(ACTIONS)}")
        print("usage: enerf shape {train,mesh,eval} [options]   (enerf shape ACTION --help for its options)")
        return 0
    action, argv = argv[0], argv[1:]
    if action == "train":
        args = build_shape_train_parser().parse_args(argv)
        cfg = config_from_args(ShapeRunConfig, args)
        m = train_shape(cfg, resume=args.resume, progress=not args.quiet)
        _print_shape_metrics(m, Path(cfg.basedir) / cfg.expname / "metrics.json")
        return 0
    parser = OneLineParser(prog=f"enerf shape {action}", description=(
        "Extract the surface of a shape checkpoint (marching cubes)." if action == "mesh"
        else "Recompute metrics.json of a shape checkpoint."))
    add_ckpt_flags(parser, "a checkpoint (.pt) from enerf shape train")
    if action == "mesh":
        add_config_flags(parser, ShapeMeshConfig)
        parser.add_argument("--out", default=None, help="mesh file (default <run>/mesh_<resolution>.ply)")
    args = parser.parse_args(argv)
    if action == "mesh":
        resolution = config_from_args(ShapeMeshConfig, args).resolution
        path, mesh, seconds = mesh_from_checkpoint(args.ckpt, resolution, args.out, args.device)
        print(f"wrote mesh with {len(mesh.vertices)} vertices, {len(mesh.faces)} faces "
              f"({resolution}^3 grid, {seconds:.1f} s) -> {path}")
        return 0
    m = evaluate_shape_checkpoint(args.ckpt, args.device)
    _print_shape_metrics(m, Path(args.ckpt).resolve().parent.parent / "metrics.json")
    return 0
