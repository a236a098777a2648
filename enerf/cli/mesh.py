"""``enerf mesh --ckpt PATH``: a coloured mesh from a NeRF checkpoint's density."""

from __future__ import annotations

from ..config import MeshConfig
from .common import DATA_ROOT, OneLineParser, add_ckpt_flags, add_config_flags, config_from_args

__all__ = ["cmd_mesh"]


def cmd_mesh(argv: list[str]) -> int:
    import numpy as np

    from ..export.nerf_mesh import distance_to_true_surfaces, mesh_from_checkpoint

    parser = OneLineParser(prog="enerf mesh", description="Extract a coloured mesh from a NeRF checkpoint.")
    add_ckpt_flags(parser)
    parser.add_argument("--out", default=None, help="mesh file, .ply or .obj (default <run>/mesh.ply)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(parser, MeshConfig)
    args = parser.parse_args(argv)
    cfg = config_from_args(MeshConfig, args)
    mesh, path, run = mesh_from_checkpoint(args.ckpt, cfg, DATA_ROOT, args.out, args.device, progress=not args.quiet)
    print(f"wrote mesh with {len(mesh.vertices)} vertices, {len(mesh.faces)} faces -> {path}")
    dist = distance_to_true_surfaces(run, mesh, cfg.frame, DATA_ROOT)
    if dist is not None:
        print(f"distance of the vertices to the scene's true surfaces (world units): median {np.median(dist):.4f}, "
              f"mean {np.mean(dist):.4f}, 90th percentile {np.percentile(dist, 90):.4f}")
    return 0
