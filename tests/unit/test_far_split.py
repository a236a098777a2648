"""``--holdout far``: the held-out views are the cameras farthest from the point the cameras look at
(``enerf.data.loaders.far_split``), checked on rings of cameras of known radii."""

from __future__ import annotations

import numpy as np
import pytest

from enerf.config import DataConfig
from enerf.data.loaders import far_split, load_scene
from enerf.data.scene import Scene
from enerf.errors import ConfigError
from enerf.synthetic.scene import make_synthetic_scene


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_synthetic_scene(tmp_path_factory.mktemp("s") / "tiny", n_views=8, width=20, height=15, seed=2)


def _looking_at(centres: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Camera-to-world [n, 3, 4] (OpenGL axes: the camera looks along -z) at ``centres``, aimed at ``target``."""
    poses = []
    for c in centres:
        back = (c - target) / np.linalg.norm(c - target)
        right = np.cross([0.0, 0.0, 1.0], back)
        right /= np.linalg.norm(right)
        poses.append(np.stack([right, np.cross(back, right), back, c], axis=1))
    return np.asarray(poses)


def _scene(poses: np.ndarray, i_test: np.ndarray) -> Scene:
    n = len(poses)
    return Scene(name="rings", images=np.zeros((n, 2, 2, 3), np.float32), poses=poses.astype(np.float32), height=2,
                 width=2, focal=2.0, bounds=np.tile([[0.5, 10.0]], (n, 1)).astype(np.float32), near=0.05, far=100.0,
                 use_ndc=False, i_train=np.setdiff1d(np.arange(n), i_test), i_test=i_test,
                 render_poses=poses[:2].astype(np.float32), scene_to_world=np.eye(4))


def test_far_split_holds_out_the_outer_ring():
    """16 cameras on a ring of radius 2 and 4 on a ring of radius 3.5 (shuffled), all aimed at a
    point off the origin: with 4 views held out every 5th, the far split holds out the 4 outer ones."""
    rng = np.random.default_rng(0)
    target = np.array([0.3, -0.2, 0.1])
    angles = rng.uniform(0, 2 * np.pi, 20)
    radius = np.array([2.0] * 16 + [3.5] * 4)
    height = rng.uniform(0.5, 1.0, 20)
    centres = target + np.stack([radius * np.cos(angles), radius * np.sin(angles), height], axis=1)
    order = rng.permutation(20)
    scene = _scene(_looking_at(centres[order], target), np.arange(0, 20, 5))
    split = far_split(scene)
    outer = np.sort(np.nonzero(radius[order] == 3.5)[0])
    np.testing.assert_array_equal(split.i_test, outer)
    np.testing.assert_array_equal(split.i_train, np.setdiff1d(np.arange(20), outer))
    assert split.i_test.dtype == np.int64 and split.i_train.dtype == np.int64
    np.testing.assert_array_equal(scene.i_test, np.arange(0, 20, 5))  # the loaded scene is not changed


def test_far_split_of_parallel_cameras_uses_their_mean_centre():
    """A forward-facing rig (parallel axes: no point they look at): the views farthest from the
    mean camera centre, the corners of a 3 x 3 grid."""
    xs, ys = np.meshgrid([-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0])
    poses = np.tile(np.eye(4)[:3], (9, 1, 1))
    poses[:, 0, 3], poses[:, 1, 3] = xs.ravel() + 5.0, ys.ravel() - 2.0
    split = far_split(_scene(poses, np.array([1, 4, 5, 7])))
    np.testing.assert_array_equal(split.i_test, [0, 2, 6, 8])


def test_far_split_needs_held_out_views():
    poses = np.tile(np.eye(4)[:3], (3, 1, 1))
    with pytest.raises(ConfigError, match="--llffhold 0"):
        far_split(_scene(poses, np.zeros(0, np.int64)))
    with pytest.raises(ConfigError, match="holdout"):
        DataConfig(holdout="near")


def test_load_scene_applies_the_far_split(tiny_dir):
    """Through ``load_scene`` on the tiny LLFF fixture: as many held-out views as every-8th, the
    farthest cameras from their centre."""
    every = load_scene(DataConfig(datadir=str(tiny_dir), llffhold=4), tiny_dir.parent)
    far = load_scene(DataConfig(datadir=str(tiny_dir), llffhold=4, holdout="far"), tiny_dir.parent)
    assert len(far.i_test) == len(every.i_test) and len(far.i_train) == len(every.i_train)
    np.testing.assert_array_equal(far.i_test, far_split(every).i_test)
