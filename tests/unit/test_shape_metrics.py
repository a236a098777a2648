"""Shape metrics against hand-built cases: identical meshes, concentric spheres, an extra part."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from enerf.metrics import shape_metrics, volumetric_iou

N = 20_000


@pytest.fixture(scope="module")
def spheres():
    return trimesh.creation.icosphere(5, radius=0.40), trimesh.creation.icosphere(5, radius=0.42)


def _chord_gap(mesh: trimesh.Trimesh, radius: float) -> float:
    """How far inside the true sphere the icosphere's faces dip (radius - smallest face-plane distance)."""
    plane = np.abs(np.einsum("ij,ij->i", mesh.face_normals, mesh.triangles[:, 0]))
    return radius - plane.min()


def test_volumetric_iou_of_hand_built_arrays():
    assert volumetric_iou([1, 1, 0, 0], [1, 0, 1, 0]) == pytest.approx(1 / 3)
    assert volumetric_iou([0, 0], [0, 0]) == 1.0
    with pytest.raises(ValueError):
        volumetric_iou([1, 0], [1, 0, 0])


def test_identical_meshes_score_perfectly(spheres):
    small, _ = spheres
    m = shape_metrics(small, small.copy(), n_points=N, tau=0.01, seed=3)
    assert m["chamfer_l1"] < 1e-5 and m["accuracy"] < 1e-5 and m["completeness"] < 1e-5
    assert m["normal_consistency"] > 0.9999
    assert m["fscore"] == 1.0 and m["precision"] == 1.0 and m["recall"] == 1.0
    points = np.random.default_rng(0).uniform(-0.55, 0.55, size=(50_000, 3))
    assert volumetric_iou(small.contains(points), small.contains(points)) == 1.0


def test_concentric_spheres_match_analytic_values(spheres):
    small, large = spheres
    gap = 0.42 - 0.40
    tol = _chord_gap(small, 0.40) + _chord_gap(large, 0.42) + 1e-5  # polygonal vs. true sphere
    m = shape_metrics(small, large, n_points=N, tau=0.01, seed=0)
    assert m["accuracy"] == pytest.approx(gap, abs=tol)
    assert m["completeness"] == pytest.approx(gap, abs=tol)
    assert m["chamfer_l1"] == pytest.approx(gap, abs=tol)
    assert m["normal_consistency"] > 0.999  # radial normals on both spheres
    assert m["fscore"] == 0.0  # every distance is ~0.02 > tau
    assert shape_metrics(small, large, n_points=N, tau=0.03, seed=0)["fscore"] == 1.0

    points = np.random.default_rng(1).uniform(-0.55, 0.55, size=(100_000, 3))
    iou = volumetric_iou(small.contains(points), large.contains(points))
    r = np.linalg.norm(points, axis=1)
    exact_on_points = volumetric_iou(r < 0.40, r < 0.42)  # same points, analytic spheres
    assert iou == pytest.approx(exact_on_points, abs=0.005)
    assert iou == pytest.approx((0.40 / 0.42) ** 3, abs=0.015)  # volume ratio, up to sampling noise


def test_fscore_counts_an_extra_part_against_precision_only(spheres):
    small, _ = spheres
    extra = trimesh.creation.box(extents=(0.1, 0.1, 0.1))
    extra.apply_translation((0.0, 0.0, 0.48 + 0.05 + 0.02))  # 0.15 above the sphere: far beyond tau
    pred = trimesh.util.concatenate([small, extra])
    m = shape_metrics(pred, small, n_points=N, tau=0.01, seed=5)
    expected_precision = small.area / (small.area + extra.area)
    assert m["recall"] == 1.0
    assert m["precision"] == pytest.approx(expected_precision, abs=0.01)
    p, r = m["precision"], m["recall"]
    assert m["fscore"] == pytest.approx(2 * p * r / (p + r))
    assert m["completeness"] < 1e-5 < m["accuracy"]
