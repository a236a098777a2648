"""Held-out evaluation on a regular subset of the pixels (``--eval_stride``)."""

from __future__ import annotations

import imageio.v3 as iio
import numpy as np
import torch
from skimage.metrics import peak_signal_noise_ratio

from enerf.config import FieldConfig, RenderConfig
from enerf.data.scene import Scene
from enerf.render.build import build_fields
from enerf.train.evaluate import evaluate_views


def _scene(height: int = 40, width: int = 31) -> Scene:
    rng = np.random.default_rng(0)
    poses = np.tile(np.eye(4, dtype=np.float32)[:3], (2, 1, 1))
    poses[:, :3, 3] = [[0.0, 0.0, 2.5], [0.3, -0.2, 2.4]]
    return Scene(name="stride", images=rng.random((2, height, width, 3)).astype(np.float32), poses=poses,
                 height=height, width=width, focal=36.0, bounds=np.tile([[1.0, 4.0]], (2, 1)).astype(np.float32),
                 near=1.0, far=4.0, use_ndc=False, i_train=np.array([0]), i_test=np.array([1]),
                 render_poses=poses, scene_to_world=np.eye(4))


def test_a_strided_evaluation_scores_every_sth_pixel_of_the_full_rendering(tmp_path):
    torch.manual_seed(0)
    scene, fields = _scene(), build_fields(FieldConfig(netdepth=2, netwidth=16, multires=2),
                                          torch.device("cpu"))
    cfg = RenderConfig(n_samples=16, perturb=False)
    (full,) = evaluate_views(scene, [1], fields, cfg, torch.device("cpu"), image_dir=tmp_path / "full", progress=False)
    (strided,) = evaluate_views(scene, [1], fields, cfg, torch.device("cpu"), image_dir=tmp_path / "s3",
                                progress=False, stride=3)
    pred_full = iio.imread(tmp_path / "full" / "view_001.png")
    pred_strided = iio.imread(tmp_path / "s3" / "view_001.png")
    # ceil(40 / 3) x ceil(31 / 3) pixels: rows and columns 0, 3, 6, ... of the full rendering
    assert pred_strided.shape == (14, 11, 3)
    np.testing.assert_array_equal(pred_strided, pred_full[::3, ::3])
    # its PSNR is skimage's on those pixels of the full rendering (saved in 8 bits)
    gt = scene.images[1][::3, ::3]
    expected = peak_signal_noise_ratio(gt.astype(np.float64), pred_full[::3, ::3] / 255.0, data_range=1.0)
    assert abs(strided["psnr"] - expected) < 0.05  # the PNG rounds the prediction to 8 bits
    assert abs(full["psnr"] - strided["psnr"]) > 1e-6  # a different set of pixels
