"""Mesh loading, normalisation, point labels (vs analytic SDFs), sampling mix, cache, bunny."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from enerf.shapes.builtin import bunny_scan_path, load_shape, make_shape
from enerf.shapes.mesh import (
    cached_samples,
    label_points,
    load_mesh_file,
    normalize_mesh,
    sample_training_points,
    volume_box,
)
from enerf.errors import DataError


def _box_sdf(points: np.ndarray, half: np.ndarray) -> np.ndarray:
    """Exact signed distance of an axis-aligned box centred at 0 (inside negative)."""
    q = np.abs(points) - half
    outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
    inside = np.minimum(q.max(axis=1), 0.0)
    return outside + inside


def test_normalize_centres_and_scales_to_the_unit_cube():
    mesh = trimesh.creation.box(extents=(4.0, 2.0, 1.0))
    mesh.apply_translation((10.0, -3.0, 7.0))
    out = normalize_mesh(mesh)
    np.testing.assert_allclose(out.bounds, [[-0.5, -0.25, -0.125], [0.5, 0.25, 0.125]], atol=1e-12)
    np.testing.assert_allclose(volume_box(0.1)[1], [0.55, 0.55, 0.55])


def test_box_labels_match_the_analytic_sdf_near_and_far():
    mesh = normalize_mesh(make_shape("box"))  # extents (1, 0.7, 0.5)
    half = np.array([0.5, 0.35, 0.25])
    rng = np.random.default_rng(0)
    surface, _ = trimesh.sample.sample_surface(mesh, 3000, seed=1)
    points = np.concatenate([rng.uniform(-0.55, 0.55, (3000, 3)), surface + rng.normal(scale=0.01, size=surface.shape)])
    inside, sdf = label_points(mesh, points)
    expected = _box_sdf(points, half)
    np.testing.assert_allclose(sdf, expected, atol=1e-5)
    np.testing.assert_array_equal(inside, expected < 0)


def test_sphere_labels_are_within_the_polygon_gap_of_the_analytic_sphere():
    mesh = trimesh.creation.icosphere(4, radius=0.5)
    gap = 0.5 - np.abs(np.einsum("ij,ij->i", mesh.face_normals, mesh.triangles[:, 0])).min()
    s = sample_training_points(mesh, n_uniform=2000, n_near=4000, near_sigmas=(0.01,), padding=0.1, seed=2)
    r = np.linalg.norm(s.points, axis=1)
    near = np.abs(r - 0.5) < 0.03
    assert np.abs(s.sdf[near] - (r[near] - 0.5)).max() <= gap + 1e-5
    clear = np.abs(r - 0.5) > gap
    np.testing.assert_array_equal(s.occupancy[clear] > 0.5, r[clear] < 0.5)
    np.testing.assert_array_equal(s.occupancy > 0.5, s.sdf < 0)
    # the near-surface points' distance to the surface is |N(0, sigma^2)| along the normal
    offsets = np.abs(s.sdf[2000:])
    assert offsets.mean() == pytest.approx(0.01 * np.sqrt(2 / np.pi), rel=0.06)
    assert np.all(np.abs(s.points) <= 0.55 + 1e-6)


def test_open_mesh_is_refused_unless_allowed():
    sphere = trimesh.creation.icosphere(3, radius=0.5)
    keep = sphere.triangles_center[:, 2] < 0.45  # cut a cap off the top
    open_mesh = trimesh.Trimesh(sphere.vertices, sphere.faces[keep])
    points = np.array([[0.0, 0.0, 0.0], [0.0, 0.3, -0.2], [0.0, 0.0, -0.6], [0.4, 0.4, 0.0]])
    with pytest.raises(DataError, match="--allow_open"):
        label_points(open_mesh, points)
    inside, sdf = label_points(open_mesh, points, allow_open=True)
    np.testing.assert_array_equal(inside, np.linalg.norm(points, axis=1) < 0.5)
    assert np.all((sdf < 0) == inside)


@pytest.mark.parametrize("suffix", [".obj", ".ply", ".off", ".stl", ".glb"])
def test_mesh_files_load_in_every_format(tmp_path, suffix):
    box = trimesh.creation.box(extents=(1.0, 2.0, 3.0))
    path = tmp_path / f"box{suffix}"
    box.export(path)
    loaded = load_mesh_file(path)
    assert loaded.volume == pytest.approx(6.0, rel=1e-6)
    assert loaded.is_watertight


def test_bad_mesh_files_are_data_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        load_mesh_file(tmp_path / "missing.obj")
    (tmp_path / "x.xyz").write_text("1 2 3\n")
    with pytest.raises(DataError, match="unsupported"):
        load_mesh_file(tmp_path / "x.xyz")
    (tmp_path / "bad.ply").write_bytes(b"not a ply at all")
    with pytest.raises(DataError):
        load_mesh_file(tmp_path / "bad.ply")
    with pytest.raises(DataError, match="built-in"):
        load_shape("no_such_shape")


def test_cache_is_keyed_by_mesh_and_settings(tmp_path):
    mesh = trimesh.creation.icosphere(2, radius=0.4)
    calls = []

    def make(seed):
        def run():
            calls.append(seed)
            return sample_training_points(mesh, 500, 0, (), 0.1, seed)
        return run

    a = cached_samples(tmp_path, mesh, {"seed": 0}, make(0))
    b = cached_samples(tmp_path, mesh, {"seed": 0}, make(0))
    np.testing.assert_array_equal(a.points, b.points)
    np.testing.assert_array_equal(a.sdf, b.sdf)
    assert calls == [0]
    c = cached_samples(tmp_path, mesh, {"seed": 1}, make(1))
    other = mesh.copy()
    other.apply_scale(1.1)
    cached_samples(tmp_path, other, {"seed": 0}, make(2))
    assert calls == [0, 1, 2] and not np.array_equal(a.points, c.points)
    assert len(list(tmp_path.glob("*.npz"))) == 3


def test_bunny_comes_from_the_pymeshfix_wheel_and_is_closed():
    path = bunny_scan_path()
    assert path.name == "StanfordBunny.ply" and path.parent.parent.name == "pymeshfix"
    raw = trimesh.load(path, force="mesh")
    assert not raw.is_watertight  # the scan has holes ...
    bunny = make_shape("bunny")
    assert bunny.is_watertight and bunny.volume > 0  # ... which MeshFix closes
    assert bunny.volume == pytest.approx(raw.convex_hull.volume, rel=0.5)
