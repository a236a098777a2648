"""Where the time of ``enerf mesh --faces N --texture`` goes on a capture checkpoint: the density
grid, marching cubes and decimation (``enerf.export``'s own functions, timed one by one), the
pieces and charts of the decimated mesh, and the UV layout by xatlas (its charts, at a few face
counts: its time grows with the number of charts) and by face pairs (``--unwrap pairs``).

    python -m studies.texture_probe --ckpt runs/bench_proposal/fox-s0/checkpoints/latest.pt

Run it with nothing else on the machine: the figures are wall times (one torch thread by default).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from enerf.config import DATA_ROOT, MeshConfig
from enerf.export import nerf_mesh
from enerf.export.simplify import decimate
from enerf.export.texture import texel_samples, unwrap, unwrap_pairs
from enerf.loaded_run import load_run

from benchmarks.harness import load_average


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True, help="a NeRF checkpoint (a capture's, for the case this probes)")
    parser.add_argument("--faces", type=int, default=200_000, help="the decimated mesh's face count")
    parser.add_argument("--xatlas_faces", type=int, nargs="*", default=[5_000, 10_000, 20_000, 40_000],
                        help="face counts (the mesh decimated further) to unwrap with xatlas")
    parser.add_argument("--texture_size", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"load average before {load_average()}", flush=True)
    run = load_run(args.ckpt, DATA_ROOT, "cpu", task="nerf", images=False)
    times: dict[str, float] = {}
    kept: dict[str, tuple] = {}

    def timed(name, fn):
        def wrapper(*a, **k):
            tic = time.perf_counter()
            out = fn(*a, **k)
            times[name] = time.perf_counter() - tic
            return out
        return wrapper

    class Stop(Exception):
        pass

    def stop_at_unwrap(vertices, faces, *a, **k):
        kept["mesh"] = (vertices, faces)
        raise Stop

    originals = {n: getattr(nerf_mesh, n) for n in ("query_grid", "isosurface", "decimate", "unwrap")}
    for name in ("query_grid", "isosurface", "decimate"):
        setattr(nerf_mesh, name, timed(name, originals[name]))
    nerf_mesh.unwrap = stop_at_unwrap
    try:
        nerf_mesh.mesh_from_run(run, MeshConfig(faces=args.faces, texture=True))
    except Stop:
        pass
    finally:
        for name, fn in originals.items():
            setattr(nerf_mesh, name, fn)
    vertices, faces = kept["mesh"]
    print(", ".join(f"{k} {v:.1f} s" for k, v in times.items()) + f"; {len(faces):,} faces", flush=True)
    import trimesh

    mesh = trimesh.Trimesh(vertices, faces, process=False)
    sizes = np.bincount(trimesh.graph.connected_component_labels(mesh.face_adjacency, node_count=len(faces)))
    print(f"{len(sizes):,} connected pieces, {int((sizes < 100).sum()):,} under 100 faces, the largest {sizes.max():,} faces",
          flush=True)
    tic = time.perf_counter()
    _, pair_faces, uv = unwrap_pairs(faces, args.texture_size)
    t_layout = time.perf_counter() - tic
    tic = time.perf_counter()
    rows, _, _, _ = texel_samples(uv, pair_faces, args.texture_size)
    print(f"pairs, {len(faces):,} faces: layout {t_layout:.2f} s, {len(rows):,} texels found in "
          f"{time.perf_counter() - tic:.2f} s", flush=True)
    for n in args.xatlas_faces:
        v, f = decimate(vertices, faces, n)
        tic = time.perf_counter()
        index, _, _ = unwrap(v, f, args.texture_size, "xatlas")
        print(f"xatlas, {len(f):,} faces: {time.perf_counter() - tic:.1f} s, {len(index):,} vertices after the cuts",
              flush=True)
    print(f"load average after {load_average()}")


if __name__ == "__main__":
    main()
