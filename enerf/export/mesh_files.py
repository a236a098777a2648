"""Mesh files by suffix: ``.ply`` (vertex colours), ``.obj`` (+ ``.mtl`` and ``.png`` when
textured), ``.glb`` (binary glTF, textured or vertex-coloured); all files of one output are
written together or not at all (``enerf.atomic.atomic_write_files``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import trimesh
from PIL import Image

from ..atomic import atomic_write_files
from ..errors import ConfigError
from ..runfolder import check_output_file

__all__ = ["MESH_FORMATS", "TEXTURE_FORMATS", "check_mesh_output", "companion_files", "textured_mesh",
           "mesh_file_contents", "write_mesh_files"]

MESH_FORMATS = (".ply", ".obj", ".glb")
TEXTURE_FORMATS = (".obj", ".glb")


def companion_files(path: Path, textured: bool) -> list[Path]:
    """Every file an output ``path`` consists of, the one that names the others last."""
    path = Path(path)
    if textured and path.suffix.lower() == ".obj":
        return [path.with_suffix(".png"), path.with_suffix(".mtl"), path]
    return [path]


def check_mesh_output(path: str | Path, textured: bool, flag: str = "--out") -> Path:
    """``path`` names a mesh format enerf writes (a texture: .obj or .glb) and every file of the
    output can be written. Raises ConfigError (one line) otherwise."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in MESH_FORMATS:
        raise ConfigError(f"{flag} {path}: mesh format {suffix or '(none)'} is not one of {', '.join(MESH_FORMATS)}")
    if textured and suffix not in TEXTURE_FORMATS:
        raise ConfigError(f"{flag} {path}: a textured mesh is written as {' or '.join(TEXTURE_FORMATS)}, not {suffix} "
                          "(a .ply holds vertex colours; drop --texture)")
    for file in companion_files(path, textured):
        check_output_file(file, flag)
    return path


def _material_name(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem) or "texture"


def textured_mesh(vertices: np.ndarray, faces: np.ndarray, uv: np.ndarray, image: np.ndarray) -> trimesh.Trimesh:
    """A trimesh mesh with a UV texture: vertices [V, 3], faces [F, 3], uv [V, 2] in [0, 1]
    (v up), image uint8 [H, W, 3] (row 0 at the top). Its material is matte and non-metallic
    (the baked colour already holds the lighting)."""
    material = trimesh.visual.material.PBRMaterial(
        name="texture", baseColorTexture=Image.fromarray(image), metallicFactor=0.0, roughnessFactor=1.0)
    return trimesh.Trimesh(vertices, faces, visual=trimesh.visual.TextureVisuals(uv=uv, material=material),
                           process=False)


def _is_textured(mesh: trimesh.Trimesh) -> bool:
    return isinstance(mesh.visual, trimesh.visual.TextureVisuals) and mesh.visual.uv is not None


def mesh_file_contents(mesh: trimesh.Trimesh, path: Path) -> dict[Path, bytes]:
    """The bytes of every file of the output ``path`` (ordered as ``companion_files``)."""
    path = Path(path)
    suffix = path.suffix.lower()
    textured = _is_textured(mesh)
    check_mesh_output(path, textured)
    if suffix == ".obj" and textured:
        from trimesh.exchange.obj import export_obj

        name = _material_name(path)
        material = trimesh.visual.material.SimpleMaterial(
            image=mesh.visual.material.baseColorTexture, name=name, diffuse=[255, 255, 255, 255],
            ambient=[255, 255, 255, 255], specular=[0, 0, 0, 255])
        plain = trimesh.Trimesh(mesh.vertices, mesh.faces, process=False,
                                visual=trimesh.visual.TextureVisuals(uv=mesh.visual.uv, material=material))
        text, extra = export_obj(plain, include_normals=False, include_texture=True, return_texture=True,
                                 mtl_name=f"{name}.mtl")
        png, mtl = extra[f"{name}.png"], extra[f"{name}.mtl"]
        mtl = mtl.replace(f"map_Kd {name}.png".encode(), f"map_Kd {path.with_suffix('.png').name}".encode())
        text = text.replace(f"mtllib {name}.mtl", f"mtllib {path.with_suffix('.mtl').name}", 1)
        return {path.with_suffix(".png"): png, path.with_suffix(".mtl"): mtl, path: text.encode("utf-8")}
    data = mesh.export(file_type=suffix.lstrip("."))
    return {path: data.encode("utf-8") if isinstance(data, str) else data}


def write_mesh_files(mesh: trimesh.Trimesh, path: str | Path) -> list[Path]:
    """Write ``mesh`` in the format of ``path``'s suffix, with its companion files, atomically
    as a set; returns the files written."""
    files = mesh_file_contents(mesh, Path(path))
    atomic_write_files(files)
    return list(files)

