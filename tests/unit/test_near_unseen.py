"""studies/near_unseen.py's pick against the pinhole geometry done by hand."""

from __future__ import annotations

import numpy as np
import torch

from studies.near_unseen import near_unseen


def test_a_gaussian_no_photo_frames_close_to_a_camera_is_picked():
    """Two cameras at x = ±1 looking down -z (90° field of view); framed points on a wall 2..3 in front, one
    unframed point just beside a camera (picked) and one unframed far behind the cameras (not picked)."""
    poses = np.zeros((2, 3, 4), np.float32)
    poses[:, :3, :3] = np.eye(3)
    poses[:, 0, 3] = [-1.0, 1.0]
    rng = np.random.default_rng(0)
    wall = np.stack([rng.uniform(-1.5, 1.5, 200), rng.uniform(-1, 1, 200), -rng.uniform(2, 3, 200)], 1)
    beside = np.array([[1.0, 0.0, 0.4]])  # behind camera 1's image plane, 0.4 from it
    behind = np.array([[0.0, 0.0, 6.0]])
    means = np.concatenate([wall, beside, behind]).astype(np.float32)
    # by hand: framed when some camera has it in front (z < 0 in its frame) within |x|, |y| <= -z
    local = means[:, None] - poses[None, :, :, 3]  # [N, 2, 3] (identity rotations)
    framed = ((local[..., 2] < 0) & (np.abs(local[..., 0]) <= -local[..., 2])
              & (np.abs(local[..., 1]) <= -local[..., 2])).any(1)
    nearest = np.linalg.norm(local, axis=-1).min(1)
    expected = ~framed & (nearest < np.quantile(nearest[framed], 0.01))
    got = near_unseen(torch.as_tensor(means), torch.as_tensor(poses), 100, 100, 50.0, 0.01).numpy()
    np.testing.assert_array_equal(got, expected)
    assert got[-2] and not got[-1] and got.sum() == 1
