"""Scores of a mesh against surfaces known in closed form (``metrics.reference_metrics``,
``surface_distance.surface_closest``): an analytic sphere, and a scene of primitives checked against
a brute-force nearest-neighbour computation on dense samples (scipy cKDTree)."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh
from scipy.spatial import cKDTree

from enerf.synthetic.surface_distance import surface_closest, surface_distance
from enerf.metrics import reference_metrics

SPEC = {"primitives": [
    {"type": "sphere", "center": [0.0, 0.0, -5.0], "radius": 1.0},
    {"type": "box", "min": [1.5, -0.5, -5.5], "max": [2.5, 0.5, -4.5]},
    {"type": "quad", "corner": [-1.0, 1.5, -6.0], "edge_u": [2.0, 0.0, 0.0], "edge_v": [0.0, 0.0, 1.0],
     "normal": [0.0, 1.0, 0.0]},
]}


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _dense_reference(count: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Points on SPEC's surfaces with their normals, drawn here independently of the code tested."""
    sphere, box, quad = SPEC["primitives"]
    n = _unit(rng.normal(size=(count, 3)))
    pts, nrm = [np.asarray(sphere["center"]) + n], [n]
    lo, hi = np.asarray(box["min"]), np.asarray(box["max"])
    for axis in range(3):
        for side, sign in ((lo, -1.0), (hi, 1.0)):
            q = rng.uniform(lo, hi, size=(count // 6, 3))
            q[:, axis] = side[axis]
            normal = np.zeros(3)
            normal[axis] = sign
            pts.append(q), nrm.append(np.tile(normal, (len(q), 1)))
    ab = rng.uniform(0, 1, size=(count // 2, 2))
    pts.append(np.asarray(quad["corner"]) + ab[:, :1] * np.asarray(quad["edge_u"]) + ab[:, 1:] * np.asarray(quad["edge_v"]))
    nrm.append(np.tile([0.0, 1.0, 0.0], (len(ab), 1)))
    return np.concatenate(pts), np.concatenate(nrm)


def test_concentric_spheres_score_the_radius_gap():
    pred = trimesh.creation.icosphere(5, radius=1.1)
    gt = _unit(np.random.default_rng(0).normal(size=(3000, 3)))

    def unit_sphere(p):
        return np.abs(np.linalg.norm(p, axis=1) - 1.0), _unit(p)

    m = reference_metrics(pred, gt, gt, unit_sphere, n_points=20000, tau=0.05)
    assert m["accuracy"] == pytest.approx(0.1, abs=2e-3) and m["completeness"] == pytest.approx(0.1, abs=2e-3)
    assert m["chamfer_l1"] == pytest.approx(0.1, abs=2e-3) and m["normal_consistency"] > 0.999
    assert m["fscore"] == 0.0 and m["scored_fraction"] == 1.0
    half = reference_metrics(pred, gt, gt, unit_sphere, n_points=20000, region=lambda p: p[:, 2] > 0)
    assert half["scored_fraction"] == pytest.approx(0.5, abs=0.02)


def test_closest_points_of_the_primitives_agree_with_dense_samples():
    rng = np.random.default_rng(1)
    ref_pts, ref_n = _dense_reference(300000, rng)
    query = rng.uniform([-2, -2, -7], [3.5, 2.5, -3], size=(2000, 3))
    dist, normal = surface_closest(SPEC, query)
    np.testing.assert_allclose(dist, surface_distance(SPEC, query), atol=1e-12)
    d_bf, idx = cKDTree(ref_pts).query(query)
    assert np.all(dist <= d_bf + 1e-9) and np.abs(d_bf - dist).max() < 0.03
    # away from edges (where the nearest sample may sit on another face) the normals agree
    clear = np.abs(d_bf - dist) < 0.005
    cos = np.abs(np.einsum("ij,ij->i", normal[clear], ref_n[idx[clear]]))
    assert clear.mean() > 0.8 and np.median(cos) > 0.999


def test_scores_match_a_brute_force_nearest_sample_computation():
    rng = np.random.default_rng(2)
    pred = trimesh.util.concatenate([
        trimesh.creation.icosphere(4, radius=1.05).apply_translation([0.05, 0.0, -5.0]),
        trimesh.creation.box(extents=[1.1, 0.9, 1.0]).apply_translation([2.0, 0.0, -5.0]),
    ])
    gt_pts, gt_n = _dense_reference(600, rng)
    ours = reference_metrics(pred, gt_pts, gt_n, lambda p: surface_closest(SPEC, p), n_points=20000, tau=0.2)
    pred_pts, face = trimesh.sample.sample_surface(pred, 20000, seed=0)
    ref_pts, ref_n = _dense_reference(400000, rng)
    d_acc, i_acc = cKDTree(ref_pts).query(pred_pts)
    dense_pred, dense_face = trimesh.sample.sample_surface(pred, 400000, seed=5)
    d_comp, i_comp = cKDTree(dense_pred).query(gt_pts)
    nc = 0.5 * (np.abs(np.einsum("ij,ij->i", pred.face_normals[face], ref_n[i_acc])).mean()
                + np.abs(np.einsum("ij,ij->i", gt_n, pred.face_normals[dense_face[i_comp]])).mean())
    assert ours["accuracy"] == pytest.approx(d_acc.mean(), abs=0.005)
    assert ours["completeness"] == pytest.approx(d_comp.mean(), abs=0.005)
    assert ours["normal_consistency"] == pytest.approx(nc, abs=0.02)
    assert ours["recall"] == pytest.approx((d_comp < 0.2).mean(), abs=0.02)  # no distance lies near 0.2
