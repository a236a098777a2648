"""``enerf export mesh --ckpt PATH`` (also ``enerf mesh``): a coloured or textured mesh from a NeRF
checkpoint's density."""

from __future__ import annotations

from ..config import DATA_ROOT, MeshConfig
from .common import parse_export_args

__all__ = ["cmd_mesh"]


def cmd_mesh(argv: list[str], prog: str = "enerf mesh") -> int:
    """The mesh export under ``prog``: its two names print the same."""
    import numpy as np

    from ..export.mesh_files import companion_files
    from ..export.nerf_mesh import distance_to_true_surfaces, mesh_from_checkpoint

    args, cfg = parse_export_args(prog, "Extract a coloured or textured mesh from a NeRF checkpoint.",
                                  "mesh file: .ply (vertex colours), .obj (with .mtl and .png when textured) or .glb "
                                  "(default <run>/mesh.ply, <run>/mesh.glb with --texture)", MeshConfig, argv)
    mesh, path, run = mesh_from_checkpoint(args.ckpt, cfg, DATA_ROOT, args.out, args.device, progress=not args.quiet,
                                           datadir=args.datadir)
    extra = [p.name for p in companion_files(path, cfg.texture)[:-1]]
    print(f"wrote mesh with {len(mesh.vertices)} vertices, {len(mesh.faces)} faces"
          + (f", a {cfg.texture_size}x{cfg.texture_size} texture" if cfg.texture else "")
          + f" -> {path}" + (f" (with {', '.join(extra)})" if extra else ""))
    dist = distance_to_true_surfaces(run, mesh, cfg.frame)
    if dist is not None:
        print(f"distance of the vertices to the scene's true surfaces (world units): median {np.median(dist):.4f}, "
              f"mean {np.mean(dist):.4f}, 90th percentile {np.percentile(dist, 90):.4f}")
    return 0
