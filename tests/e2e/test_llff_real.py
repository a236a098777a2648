"""The LLFF loader on the real release's fern (``../shared/data``; skipped when absent).

Expected values come from the release itself (poses_bounds.npy's hwf column, the image
files) and from the nerf-pytorch reimplementation in ``test_llff.py``, not from enerf.
"""

from __future__ import annotations

import imageio.v3 as iio
import numpy as np
import pytest
from skimage.transform import downscale_local_mean

from enerf.data.llff import load_llff
from enerf.data.resolve import resolve_scene_dir
from nerf_pytorch_llff import reference_llff


def _release(fern_dir):
    arr = np.load(fern_dir / "poses_bounds.npy")
    height, width, focal = arr[0, :15].reshape(3, 5)[:, 4]
    return arr, int(height), int(width), float(focal)


@pytest.mark.parametrize("factor", [4, 8])
def test_release_folders_load_with_their_size_and_focal(fern_dir, factor):
    arr, height, width, focal = _release(fern_dir)
    scene = load_llff(fern_dir, factor=factor)
    files = sorted((fern_dir / f"images_{factor}").glob("*.png"))
    assert scene.n_views == len(files) == arr.shape[0] == 20
    assert (scene.height, scene.width) == (height // factor, width // factor)
    assert scene.focal == pytest.approx(focal / factor)
    first = iio.imread(files[0]).astype(np.float32)[..., :3] / 255
    np.testing.assert_array_equal(scene.images[0], first)


def test_missing_factor_folder_is_resized_from_the_closest_one(fern_dir):
    """Factor 16 has no folder: the loader averages 2 x 2 blocks of images_8/."""
    _, height, width, focal = _release(fern_dir)
    scene = load_llff(fern_dir, factor=16, llffhold=0)
    assert (scene.height, scene.width) == (height // 16, width // 16)
    assert scene.focal == pytest.approx(focal / 16)
    eighth = iio.imread(fern_dir / "images_8" / "image005.png").astype(np.float64)[..., :3] / 255
    np.testing.assert_allclose(scene.images[5], downscale_local_mean(eighth, (2, 2, 1)), atol=1e-6)


def test_every_eighth_view_is_held_out(fern_dir):
    scene = load_llff(fern_dir, factor=8)
    np.testing.assert_array_equal(scene.i_test, [0, 8, 16])
    np.testing.assert_array_equal(scene.i_train, [i for i in range(20) if i % 8])


def test_poses_bounds_and_spiral_match_nerf_pytorch(fern_dir):
    arr, _, _, _ = _release(fern_dir)
    scene = load_llff(fern_dir, factor=8)
    ref_poses, ref_bounds, ref_render, ref_focal = reference_llff(arr.copy(), scene.images, factor=8)
    np.testing.assert_allclose(scene.poses, ref_poses, atol=1e-5)
    np.testing.assert_allclose(scene.bounds, ref_bounds, rtol=1e-5)
    np.testing.assert_allclose(scene.render_poses, ref_render[:, :3, :4], atol=1e-4)
    assert scene.focal == pytest.approx(float(ref_focal), rel=1e-6)


def test_ndc_range_as_nerf_pytorch(fern_dir):
    """NDC rays sample t in [0, 1] from the plane z = -1; LLFF's bd_factor = 0.75 puts the
    closest bound at 1 / 0.75, so every bound lies beyond that plane."""
    scene = load_llff(fern_dir, factor=8)
    assert scene.use_ndc and (scene.near, scene.far) == (0.0, 1.0)
    assert scene.bounds.min() == pytest.approx(1 / 0.75, rel=1e-5)
    rays = scene.rays(int(scene.i_test[0]))
    assert float(rays.near.max()) == 0.0 and float(rays.far.min()) == 1.0
    # A ray's NDC origin lies on the near plane's image, z_ndc = -1 (nerf-pytorch ndc_rays, near = 1).
    np.testing.assert_allclose(rays.origins[..., 2].numpy(), -1.0, atol=1e-5)


def test_scene_name_resolves_under_the_data_root(shared_data):
    assert resolve_scene_dir("fern", "", shared_data) == shared_data / "nerf_llff_data" / "fern"
