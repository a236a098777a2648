"""Built-in shapes (no download): trimesh primitives and the Stanford bunny scan.

``--mesh NAME`` picks one of ``SHAPES``; anything else is read as a mesh file path.

The bunny is ``StanfordBunny.ply`` shipped inside the ``pymeshfix`` wheel
(``pymeshfix/examples/StanfordBunny.ply``; 50,000 vertices, 99,785 faces, with holes in its
base as scanned). It is the Stanford 3D Scanning Repository's bunny (Turk & Levoy, 1994,
http://graphics.stanford.edu/data/3Dscanrep/), which Stanford lets anyone use for research
and asks to be credited; pymeshfix itself is GPL-3.0 (the scan is data read at run time,
enerf does not copy it). It is closed with ``pymeshfix.clean_from_arrays`` (MeshFix:
hole filling + removal of self-intersections), which makes it watertight.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import trimesh

from ..errors import DataError

__all__ = ["SHAPES", "bunny_scan_path", "make_shape", "load_shape"]


def bunny_scan_path() -> Path:
    """Where the pymeshfix wheel keeps the raw bunny scan (pymeshfix.examples.bunny_scan;
    not imported from there because ``pymeshfix.examples`` needs pyvista)."""
    try:
        import pymeshfix
    except ImportError:
        raise DataError("the bunny needs the pymeshfix package: pip install pymeshfix") from None
    path = Path(pymeshfix.__file__).parent / "examples" / "StanfordBunny.ply"
    if not path.is_file():
        raise DataError(f"{path}: the bunny scan is missing from this pymeshfix install; reinstall pymeshfix")
    return path


@contextlib.contextmanager
def _quiet_stdout():
    """Silence file descriptor 1 (output written by C code, which sys.stdout does not see)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            try:
                yield
            finally:
                ctypes.CDLL(None).fflush(None)  # C's stdio buffer, before fd 1 is restored
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _bunny() -> trimesh.Trimesh:
    import pymeshfix

    raw = trimesh.load(bunny_scan_path(), force="mesh")
    with _quiet_stdout():  # MeshFix prints "could not fix everything" from C; the result is watertight
        vertices, faces = pymeshfix.clean_from_arrays(
            np.asarray(raw.vertices, dtype=np.float64), np.asarray(raw.faces, dtype=np.int32)
        )
    mesh = trimesh.Trimesh(vertices, faces, process=True)
    mesh.fix_normals()
    return mesh


SHAPES: dict[str, Callable[[], trimesh.Trimesh]] = {
    "sphere": lambda: trimesh.creation.icosphere(subdivisions=5, radius=1.0),
    "torus": lambda: trimesh.creation.torus(major_radius=1.0, minor_radius=0.35, major_sections=128, minor_sections=64),
    "box": lambda: trimesh.creation.box(extents=(1.0, 0.7, 0.5)),
    "capsule": lambda: trimesh.creation.capsule(height=1.0, radius=0.4, count=(64, 64)),
    "bunny": _bunny,
}


def make_shape(name: str) -> trimesh.Trimesh:
    """A built-in shape by name (not normalised)."""
    if name not in SHAPES:
        raise DataError(f"unknown built-in shape {name!r}; choose one of {', '.join(SHAPES)} or give a mesh file path")
    return SHAPES[name]()


def load_shape(name_or_path: str) -> trimesh.Trimesh:
    """``--mesh`` resolution: a built-in name, else a mesh file (see ``enerf.shapes.mesh``)."""
    from .mesh import load_mesh_file

    if name_or_path in SHAPES:
        return make_shape(name_or_path)
    path = Path(name_or_path)
    if not path.exists() and not path.suffix:
        raise DataError(
            f"--mesh {name_or_path!r} is neither a built-in shape ({', '.join(SHAPES)}) nor an existing file"
        )
    return load_mesh_file(path)
