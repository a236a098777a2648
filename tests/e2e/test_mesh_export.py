"""`enerf mesh --faces / --texture / --out .ply|.obj|.glb`: decimation against an analytic sphere,
a texture baked from an analytic colour field read back through trimesh, every suffix round-tripped,
the NDC map's inverse, and bad inputs refused with nothing written."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import trimesh

from enerf.atomic import atomic_write_files
from enerf.cli import main
from enerf.config import MeshConfig
from enerf.data.llff import load_llff
from enerf.errors import ConfigError
from enerf.export.mesh_geometry import field_to_scene, scene_to_field
from enerf.export.nerf_mesh import finish_mesh, write_mesh
from enerf.export.simplify import decimate
from enerf.export.texture import dilate, texel_samples, unwrap_method, unwrap_pairs

pytest.importorskip("xatlas")
pytest.importorskip("fast_simplification")


def _color(points: torch.Tensor, dirs: torch.Tensor) -> torch.Tensor:
    """An analytic colour field: the position, squeezed into [0, 1]; independent of direction."""
    return ((points + 1.0) / 2.0).clamp(0.0, 1.0)


def _bilinear(image: np.ndarray, uv: np.ndarray) -> np.ndarray:
    """Sample an [H, W, 3] image at uv [n, 2] (v up, texel centres at (k + 0.5) / size)."""
    height, width = image.shape[:2]
    x = np.clip(uv[:, 0] * width - 0.5, 0, width - 1)
    y = np.clip((1.0 - uv[:, 1]) * height - 0.5, 0, height - 1)
    x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
    x1, y1 = np.minimum(x0 + 1, width - 1), np.minimum(y0 + 1, height - 1)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    img = image.astype(np.float64) / 255.0
    top = img[y0, x0] * (1 - fx) + img[y0, x1] * fx
    bottom = img[y1, x0] * (1 - fx) + img[y1, x1] * fx
    return top * (1 - fy) + bottom * fy


def test_decimation_reaches_the_face_count_and_stays_on_the_sphere():
    sphere = trimesh.creation.icosphere(5)  # 20480 faces, radius 1
    vertices, faces = decimate(sphere.vertices, sphere.faces, 800)
    mesh = trimesh.Trimesh(vertices, faces, process=False)
    assert 700 <= len(faces) <= 800 and len(np.unique(faces)) == len(vertices)
    # Hausdorff distance to the analytic unit sphere, both ways: mesh samples -> sphere in closed
    # form, sphere samples -> mesh by trimesh's closest-point query.
    on_mesh, _ = trimesh.sample.sample_surface(mesh, 20000, seed=0)
    on_sphere = np.random.default_rng(1).normal(size=(5000, 3))
    on_sphere /= np.linalg.norm(on_sphere, axis=1, keepdims=True)
    _, to_mesh, _ = trimesh.proximity.closest_point(mesh, on_sphere)
    hausdorff = max(np.abs(np.linalg.norm(on_mesh, axis=1) - 1.0).max(), to_mesh.max())
    assert hausdorff < 0.02
    assert mesh.is_watertight and mesh.volume == pytest.approx(4 / 3 * np.pi, rel=0.02)
    same_v, same_f = decimate(sphere.vertices, sphere.faces, 10**6)  # already small enough: unchanged
    assert len(same_f) == len(sphere.faces) and np.allclose(same_v, sphere.vertices)


def test_decimated_vertices_are_coloured_from_the_field_at_their_new_places():
    sphere = trimesh.creation.icosphere(4, radius=0.8)
    mesh = finish_mesh(sphere.vertices, sphere.faces, _color, MeshConfig(faces=300))
    assert len(mesh.faces) <= 300
    expected = np.clip((mesh.vertices + 1.0) / 2.0, 0, 1)
    assert np.abs(mesh.visual.vertex_colors[:, :3] / 255.0 - expected).max() <= 0.5 / 255 + 1e-6


@pytest.mark.parametrize("suffix,unwrap", [(".obj", "xatlas"), (".glb", "xatlas"), (".glb", "pairs")])
def test_baked_texture_read_back_matches_the_field_at_every_vertex(tmp_path, suffix, unwrap):
    sphere = trimesh.creation.icosphere(3, radius=0.8)
    mesh = finish_mesh(sphere.vertices, sphere.faces, _color, MeshConfig(texture=True, texture_size=256, unwrap=unwrap))
    files = write_mesh(mesh, tmp_path / f"m{suffix}")
    expected_files = {"m.obj", "m.mtl", "m.png"} if suffix == ".obj" else {"m.glb"}
    assert {f.name for f in files} == expected_files and {p.name for p in tmp_path.iterdir()} == expected_files
    back = trimesh.load(tmp_path / f"m{suffix}", force="mesh", process=False)
    assert len(back.faces) == len(sphere.faces)
    uv = np.asarray(back.visual.uv)
    assert uv.shape == (len(back.vertices), 2) and uv.min() >= 0.0 and uv.max() <= 1.0
    material = back.visual.material
    image = material.image if suffix == ".obj" else material.baseColorTexture
    image = np.asarray(image.convert("RGB"))
    assert image.shape == (256, 256, 3)
    sampled = _bilinear(image, uv)
    expected = np.clip((np.asarray(back.vertices) + 1.0) / 2.0, 0.0, 1.0)
    err = np.abs(sampled - expected)
    assert err.mean() < 0.01 and err.max() < 0.04, (err.mean(), err.max())


def test_face_pairs_keep_every_triangle_in_its_own_half_cell():
    """unwrap_pairs: each face's UV triangle is a right isosceles triangle inside its own half of
    its cell (checked in texel units against the cell grid), no texel centre lies in two of them,
    every face covers texels, and the corners map back to the input faces' vertices."""
    faces = np.random.default_rng(0).integers(0, 50, size=(37, 3))
    size = 64
    index, new_faces, uv = unwrap_pairs(faces, size)
    assert index.shape == (111,) and np.array_equal(index[new_faces], faces)
    per_side = 5  # ceil(sqrt(19 cells))
    cell = size // per_side
    xy = np.stack([uv[:, 0] * size, (1.0 - uv[:, 1]) * size], axis=1)[new_faces]  # [F, 3, 2] texel units
    for k, tri in enumerate(xy):
        x0, y0 = (k // 2 % per_side) * cell, (k // 2 // per_side) * cell
        local = tri - [x0, y0]
        assert local.min() >= 0.5 - 1e-9 and local.max() <= cell - 0.5 + 1e-9  # inside its cell
        s = local.sum(axis=1)  # x + y: the first face lies below the cell's anti-diagonal, the second above
        assert (s.max() <= cell - 1 + 1e-9) if k % 2 == 0 else (s.min() >= cell + 1 - 1e-9)
        legs = tri[1:] - tri[0]
        assert abs(legs[0] @ legs[1]) < 1e-9 and np.allclose(np.abs(legs).sum(1), cell - 2)
    rows, cols, face, _ = texel_samples(uv, new_faces, size)
    assert len(np.unique(rows * size + cols)) == len(rows) and set(face) == set(range(37))
    assert np.bincount(face).min() == (cell - 1) * cell // 2  # texel centres with a + b <= cell - 2
    with pytest.raises(ConfigError, match="--texture_size 20 or more"):
        unwrap_pairs(faces, 19)  # 4 texels per cell at the least: 5 cells a side need 20
    assert unwrap_method("auto", 10) == "xatlas" and unwrap_method("auto", 10**6) == "pairs"


def test_texels_cover_each_triangle_once_with_barycentrics_that_rebuild_the_centre():
    uv = np.array([[0.1, 0.1], [0.9, 0.1], [0.1, 0.9], [0.9, 0.9]])
    faces = np.array([[0, 1, 2], [1, 3, 2]])
    rows, cols, face, bary = texel_samples(uv, faces, 20)
    assert len(np.unique(rows * 20 + cols)) == len(rows)  # each texel once
    # texel centres from the barycentrics equal the pixel centres
    centre = np.einsum("tk,tkd->td", bary, uv[faces[face]])
    np.testing.assert_allclose(centre[:, 0], (cols + 0.5) / 20, atol=1e-9)
    np.testing.assert_allclose(centre[:, 1], 1.0 - (rows + 0.5) / 20, atol=1e-9)
    assert len(rows) == 16 * 16  # the square [0.1, 0.9]^2 holds centres 2.5 .. 17.5 on each axis
    image = np.zeros((5, 5, 1))
    mask = np.zeros((5, 5), bool)
    image[2, 2], mask[2, 2] = 1.0, True
    grown = dilate(image, mask, 1)
    assert (grown[1:4, 1:4] == 1.0).all() and grown[0].sum() == 0  # one ring


@pytest.mark.parametrize("suffix", [".ply", ".obj", ".glb"])
def test_every_suffix_round_trips_vertices_faces_and_colours(tmp_path, suffix):
    sphere = trimesh.creation.icosphere(2, radius=0.5)
    mesh = finish_mesh(sphere.vertices, sphere.faces, _color, MeshConfig())
    write_mesh(mesh, tmp_path / f"m{suffix}")
    back = trimesh.load(tmp_path / f"m{suffix}", force="mesh", process=False)
    assert (len(back.vertices), len(back.faces)) == (len(sphere.vertices), len(sphere.faces))
    np.testing.assert_allclose(back.vertices, mesh.vertices, atol=1e-6)
    assert np.abs(back.visual.vertex_colors.astype(int) - mesh.visual.vertex_colors).max() <= 1


def test_scene_to_field_inverts_field_to_scene(scene_dir):
    scene = load_llff(scene_dir, factor=1, llffhold=4)
    ndc = np.random.default_rng(0).uniform([-1, -1, -1], [1, 1, 0.9], size=(100, 3))
    np.testing.assert_allclose(scene_to_field(scene)(field_to_scene(scene)(ndc)), ndc, atol=1e-9)


def test_a_failed_write_leaves_none_of_the_files(tmp_path):
    blocker = tmp_path / "m.mtl"
    blocker.mkdir()  # a folder where the .mtl goes: its rename fails after the .png's succeeded
    with pytest.raises(OSError):
        atomic_write_files({tmp_path / "m.png": b"png", blocker: b"mtl", tmp_path / "m.obj": b"obj"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.mtl"]


@pytest.mark.parametrize("flags", [["--faces", "0"], ["--faces", "-5"], ["--out", "{out}/m.xyz"],
                                   ["--texture", "--out", "{out}/m.ply"], ["--out", "{out}/m"],
                                   ["--texture_size", "8", "--texture"],
                                   ["--faces", "200000", "--texture", "--texture_size", "64"]])
def test_bad_mesh_flags_give_one_line_exit_2_and_write_nothing(tmp_path, capsys, flags):
    out = tmp_path / "out"
    out.mkdir()
    argv = ["mesh", "--ckpt", str(tmp_path / "any.pt"), *[f.format(out=out) for f in flags]]
    if "--out" not in flags:
        argv += ["--out", str(out / "m.glb")]
    assert main(argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0]
    assert not any(out.iterdir())


def test_texture_without_xatlas_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "xatlas", None)  # import xatlas -> ImportError
    assert main(["mesh", "--ckpt", str(tmp_path / "any.pt"), "--texture", "--unwrap", "xatlas",
                 "--out", str(tmp_path / "m.glb")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and '.[mesh]' in err and not any(tmp_path.iterdir())
    assert unwrap_method("auto", 10) == "pairs"  # --unwrap auto does without it


def test_vertex_clustering_reaches_the_face_count_and_stays_on_the_surface():
    """The last resort of decimate (one piece the collapses cannot bring under the count): the
    finest clustering grid that fits, its vertices on the unit sphere to within a cell, and the
    sphere covered (every point of a dense sample near the result)."""
    from enerf.export.simplify import _clustered

    sphere = trimesh.creation.icosphere(5)  # 20,480 faces
    vertices, faces = _clustered(np.asarray(sphere.vertices), np.asarray(sphere.faces, np.int64), 500)
    assert 300 < len(faces) <= 500
    cell = np.sqrt(np.pi * 4 / len(faces) * 2)  # about the side of a face of this many
    assert np.abs(np.linalg.norm(vertices, axis=1) - 1).max() < cell
    sample = trimesh.sample.sample_surface_even(sphere, 2000, seed=0)[0]
    _, distance, _ = trimesh.proximity.closest_point(trimesh.Trimesh(vertices, faces), sample)
    assert distance.max() < cell


def test_a_mesh_of_many_tiny_pieces_still_reaches_the_face_count():
    """300 separate tetrahedra (1,200 faces) cannot collapse below 4 faces each: the smallest pieces go."""
    tet = trimesh.creation.icosahedron().convex_hull  # 20 faces
    rng = np.random.default_rng(0)
    pieces = [trimesh.Trimesh(tet.vertices * 0.01 + rng.uniform(-1, 1, 3), tet.faces) for _ in range(60)]
    big = trimesh.creation.icosphere(4)  # 5,120 faces
    mesh = trimesh.util.concatenate([big, *pieces])
    vertices, faces = decimate(mesh.vertices, mesh.faces, 200)
    assert 0 < len(faces) <= 200
    kept = trimesh.Trimesh(vertices, faces)
    assert np.abs(np.linalg.norm(kept.vertices, axis=1) - 1.0).max() < 0.1  # the sphere stays, pieces go first
