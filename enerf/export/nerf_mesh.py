"""Meshes from a trained NeRF: density on a grid, marching cubes, coloured vertices, clean-up
(``--method tsdf``: fused rendered depth instead, ``enerf.export.tsdf``).

``enerf mesh --ckpt PATH`` queries the density ``sigma`` on a ``resolution``^3 grid (chunked),
runs marching cubes at ``threshold`` (``enerf.export.isosurface``), keeps the connected
components with at least ``min_component`` faces, optionally simplifies to ``faces`` faces
(``enerf.export.simplify``), colours every vertex with the radiance branch looking at it along
its inverted normal, or with ``texture`` bakes that colour into a UV texture
(``enerf.export.texture``), and writes ``.ply``, ``.obj`` or ``.glb``
(``enerf.export.mesh_files``).

The grid lives in the field's own coordinates. For NDC (forward-facing) scenes these are NDC
coordinates (x, y in [-1, 1] across the reference frustum, z = -1 at the near plane and
z -> 1 at infinity); vertices are mapped back with ``ndc_to_world`` and then, with
``frame = "world"``, by ``Scene.scene_to_world`` into the frame of ``poses_bounds.npy``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import torch
import trimesh
from torch import Tensor

from ..config import MeshConfig
from ..cameras.paths import focus_box
from ..data.scene import Scene
from ..errors import ConfigError, EnerfError
from ..loaded_run import LoadedRun, load_run
from .isosurface import isosurface, query_grid
from .mesh_geometry import PointMap, field_to_scene, keep_large_components, reverses_orientation, scene_to_field
from .mesh_files import MESH_FORMATS, check_mesh_output, textured_mesh, write_mesh_files
from .simplify import decimate
from .texture import bake_texture, check_pairs_fit, require_xatlas, unwrap, unwrap_method
from .tsdf import tsdf_mesh, tsdf_surface

__all__ = [
    "MESH_FORMATS",
    "default_bbox",
    "extract_mesh",
    "finish_mesh",
    "write_mesh",
    "mesh_from_run",
    "mesh_from_checkpoint",
    "distance_to_true_surfaces",
]

DensityFn = Callable[[Tensor], Tensor]  # points [n, 3] -> sigma [n]
ColorFn = Callable[[Tensor, Tensor], Tensor]  # points [n, 3], unit dirs [n, 3] -> rgb [n, 3]


def default_bbox(scene: Scene, unbounded: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The field-coordinate box a mesh is extracted from when ``--bbox`` is not given.

    NDC scenes: x, y in [-1, 1]; z from the near plane (-1) to the farthest bound
    (z' = 1 - 2 / far, far = 1.05 x the largest scene bound). ``unbounded`` (a field with a
    scene contraction: a capture around an object, the room behind it): a cube around the point
    the training cameras look at, of half-size half their median distance to it
    (``camera_paths.focus_box``). Scenes with a content box (Blender): that box. Other
    scenes: a cube of half-size ``far`` around the scene origin.

    Raises:
        ConfigError: ``unbounded`` with cameras whose optical axes are parallel (give --bbox).
    """
    if unbounded and not scene.use_ndc:
        try:
            return focus_box(scene.poses[scene.i_train])
        except ValueError as err:
            raise ConfigError(f"{err}; give the mesh's box with --bbox", ("bbox",)) from None
    if scene.aabb is not None:
        return np.asarray(scene.aabb[:3], dtype=np.float64), np.asarray(scene.aabb[3:], dtype=np.float64)
    far = 1.05 * float(scene.bounds.max())
    if scene.use_ndc:
        return np.array([-1.0, -1.0, -1.0]), np.array([1.0, 1.0, 1.0 - 2.0 / far])
    return np.full(3, -far), np.full(3, far)


@torch.no_grad()
def _colors(color_fn: ColorFn, points: np.ndarray, dirs: np.ndarray, chunk: int, device) -> np.ndarray:
    out = []
    for lo in range(0, len(points), chunk):
        p = torch.as_tensor(points[lo : lo + chunk], dtype=torch.float32, device=device)
        d = torch.as_tensor(dirs[lo : lo + chunk], dtype=torch.float32, device=device)
        out.append(color_fn(p, d).clamp(0.0, 1.0).float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 3), np.float32)


def extract_mesh(
    density_fn: DensityFn,
    color_fn: ColorFn | None,
    bbox_min,
    bbox_max,
    cfg: MeshConfig,
    to_scene: PointMap | None = None,
    to_output: PointMap | None = None,
    device: torch.device | str = "cpu",
    progress: bool = False,
    to_field: PointMap | None = None,
) -> trimesh.Trimesh:
    """Isosurface ``density = cfg.threshold`` of a field, simplified, coloured or textured
    (``finish_mesh``).

    Args:
        density_fn, color_fn: the field's callables in field coordinates; ``color_fn`` gets
            unit directions in scene space (the view directions the field was trained with).
        bbox_min, bbox_max: [3] the grid's box in field coordinates.
        to_scene: field coordinates -> scene space (identity by default; inverse NDC).
        to_output: scene space -> the coordinates written (identity by default).
        progress: a bar over the density grid's points (``enerf.progress``; on a terminal).
        to_field: scene space -> field coordinates (the inverse of ``to_scene``), needed to colour
            the new vertices of ``cfg.faces`` and the texels of ``cfg.texture`` when ``to_scene`` is given.

    Returns:
        trimesh.Trimesh with outward-wound faces and RGBA uint8 vertex colours, or a UV texture.
    """
    values = query_grid(density_fn, bbox_min, bbox_max, cfg.resolution, cfg.chunk, device, progress,
                        desc=f"density {cfg.resolution}^3")
    if not np.isfinite(values).all():
        raise EnerfError("the field returned non-finite densities on the grid; the checkpoint may have diverged")
    verts_field, faces = isosurface(values, bbox_min, bbox_max, cfg.threshold, inside="above")
    index, faces = keep_large_components(verts_field, faces, cfg.min_component)
    if len(faces) == 0:
        raise EnerfError(f"no connected component has {cfg.min_component} faces or more; lower --min_component")
    verts_field = verts_field[index]
    if to_scene is not None:
        verts_scene = to_scene(verts_field)
        if reverses_orientation(to_scene, verts_field[0]):
            faces = np.ascontiguousarray(faces[:, ::-1])
    else:
        verts_scene = verts_field
    if to_field is None and to_scene is not None and (cfg.faces or cfg.texture):
        raise ValueError("extract_mesh: to_field is needed with to_scene to colour new vertices or texels")
    return finish_mesh(verts_scene, faces, color_fn, cfg, to_field, to_output, device, progress,
                       field_points=verts_field)


def finish_mesh(
    vertices: np.ndarray,
    faces: np.ndarray,
    color_fn: ColorFn | None,
    cfg: MeshConfig,
    to_field: PointMap | None = None,
    to_output: PointMap | None = None,
    device: torch.device | str = "cpu",
    progress: bool = False,
    field_points: np.ndarray | None = None,
) -> trimesh.Trimesh:
    """Simplify (``cfg.faces``), colour the vertices or bake a texture (``cfg.texture``), and map
    to the output frame: what every surface extractor's mesh goes through.

    Args:
        vertices: [V, 3] scene space; faces: [F, 3] wound outwards.
        color_fn: points in field coordinates [n, 3], unit scene-space directions [n, 3] -> rgb;
            None: no colour (a texture is then not possible).
        to_field: scene space -> field coordinates (identity when None).
        field_points: [V, 3] the vertices in field coordinates if already known (exact; used
            while the vertices are unchanged).

    Returns:
        trimesh.Trimesh in the output frame: RGBA uint8 vertex colours, or a UV texture
        (``mesh_files.textured_mesh``) when ``cfg.texture``.
    """
    vertices, faces = np.asarray(vertices, np.float64), np.asarray(faces, np.int64)
    field_fn = to_field if to_field is not None else (lambda p: p)
    if cfg.faces and len(faces) > cfg.faces:
        vertices, faces = decimate(vertices, faces, cfg.faces)
        field_points = None
    mesh = trimesh.Trimesh(vertices, faces, process=False)
    normals = np.asarray(mesh.vertex_normals)
    if color_fn is not None and cfg.texture:
        index, faces, uv = unwrap(vertices, faces, cfg.texture_size, cfg.unwrap)

        def color_at(points: np.ndarray, dirs: np.ndarray) -> np.ndarray:
            return _colors(color_fn, field_fn(points), dirs, cfg.chunk, device)

        image = bake_texture(vertices[index], normals[index], faces, uv, color_at, cfg.texture_size,
                             chunk=cfg.chunk, progress=progress)
        mesh = textured_mesh(vertices[index], faces, uv, image)
    elif color_fn is not None:
        points = field_points if field_points is not None else field_fn(vertices)
        rgb = _colors(color_fn, points, -normals, cfg.chunk, device)
        alpha = np.ones((len(rgb), 1))
        mesh.visual.vertex_colors = (np.concatenate([rgb, alpha], 1) * 255.0 + 0.5).astype(np.uint8)
    if to_output is not None:
        flip = reverses_orientation(to_output, vertices[0])
        mesh.vertices = to_output(np.asarray(mesh.vertices))
        if flip:
            mesh.faces = np.ascontiguousarray(np.asarray(mesh.faces)[:, ::-1])
    return mesh


def write_mesh(mesh: trimesh.Trimesh, path: Path) -> list[Path]:
    """Write ``.ply`` (binary), ``.obj`` (vertex colours, or .mtl + .png) or ``.glb`` atomically;
    returns the files written (``mesh_files.write_mesh_files``)."""
    return write_mesh_files(mesh, Path(path))


def _similarity(matrix: np.ndarray) -> PointMap:
    return lambda p: p @ matrix[:3, :3].T + matrix[:3, 3]


def mesh_from_run(run: LoadedRun, cfg: MeshConfig, progress: bool = False) -> trimesh.Trimesh:
    """Extract the mesh of a loaded run (see the module docstring). ``cfg`` has checked its own
    values (field, frame, bbox, resolution, chunk); what depends on the scene is checked here."""
    scene = run.scene
    unbounded = run.cfg.field.contraction != "none"
    lo, hi = (np.asarray(cfg.bbox[:3]), np.asarray(cfg.bbox[3:])) if cfg.bbox else default_bbox(scene, unbounded)
    if scene.use_ndc and hi[2] >= 1.0:
        raise ConfigError(f"bbox zmax {hi[2]} must be below 1 in NDC (z = 1 is infinitely far)", ("bbox",))
    to_output = _similarity(scene.scene_to_world) if cfg.frame == "world" else None
    field = run.fields.get(cfg.field) or run.fields["coarse"]

    def density_fn(points: Tensor) -> Tensor:
        return field.density(points)[0]

    def color_fn(points: Tensor, dirs: Tensor) -> Tensor:
        return field(points, dirs)[0]

    if cfg.method == "tsdf":
        if not (cfg.faces or cfg.texture):  # the fused colours of the views
            return tsdf_mesh(run, lo, hi, cfg, to_output, progress)
        verts, faces, _ = tsdf_surface(run, lo, hi, cfg, progress)  # simplified / textured: colours from the field
        return finish_mesh(verts, faces, color_fn, cfg, scene_to_field(scene), to_output, run.device, progress)
    return extract_mesh(
        density_fn, color_fn, lo, hi, cfg, to_scene=field_to_scene(scene), to_output=to_output, device=run.device,
        progress=progress, to_field=scene_to_field(scene),
    )


def mesh_from_checkpoint(
    ckpt_path: str | Path, cfg: MeshConfig, data_root: Path, out: str | Path | None = None,
    device_name: str | None = None, progress: bool = True, datadir: str | Path | None = None,
) -> tuple[trimesh.Trimesh, Path, LoadedRun]:
    """``enerf mesh``: load (``datadir``: the scene folder instead of the recorded one), extract (a
    bar over the density grid on a terminal), write ``out`` (default ``<run>/mesh.ply``,
    ``<run>/mesh.glb`` with a texture). Bad output paths and a missing xatlas are refused before
    any work."""
    if out is not None:
        check_mesh_output(out, cfg.texture)
    if cfg.texture and cfg.unwrap == "xatlas":
        require_xatlas()
    if cfg.texture and cfg.faces and unwrap_method(cfg.unwrap, cfg.faces) == "pairs":
        check_pairs_fit(cfg.faces, cfg.texture_size)  # the size is known before any work
    run = load_run(ckpt_path, data_root, device_name, task="nerf", datadir=datadir, images=False)
    path = Path(out) if out else run.folder / ("mesh.glb" if cfg.texture else "mesh.ply")
    check_mesh_output(path, cfg.texture)
    mesh = mesh_from_run(run, cfg, progress)
    write_mesh(mesh, path)
    return mesh, path, run


def distance_to_true_surfaces(run: LoadedRun, mesh: trimesh.Trimesh, frame: str) -> np.ndarray | None:
    """Distance of every vertex to the exact surfaces of a synthetic scene (None for other scenes,
    and where the scene folder is not reachable).

    Vertices are taken to the world frame of poses_bounds.npy first when ``frame == "scene"``.
    """
    import json

    from ..synthetic.surface_distance import surface_distance

    if run.scene_dir is None:
        return None
    scene_json = run.scene_dir / "scene.json"
    if not scene_json.is_file():
        return None
    spec = json.loads(scene_json.read_text()).get("geometry")
    if not spec:
        return None
    verts = np.asarray(mesh.vertices)
    if frame == "scene":
        verts = _similarity(run.scene.scene_to_world)(verts)
    return surface_distance(spec, verts)
