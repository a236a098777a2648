"""LLFF loader vs a line-by-line numpy copy of nerf-pytorch's load_llff_data; resizing; bad input."""

from __future__ import annotations

from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from skimage.transform import downscale_local_mean, resize

from enerf.data import resolve
from enerf.data.llff import load_llff
from enerf.data.resolve import resolve_scene_dir
from enerf.errors import DataError
from nerf_pytorch_llff import reference_llff

# ------------------------------------------------------------------ fixtures


def _poses_bounds(n: int, seed: int, height: int, width: int, focal: float) -> np.ndarray:
    """Forward-facing LLFF rows: cameras near the origin looking down -z, stored [down, right, back, t, hwf]."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        rot = Rotation.from_euler("xyz", rng.uniform(-8, 8, 3), degrees=True).as_matrix()  # [right, up, back]
        pos = np.array([rng.uniform(-1, 1), rng.uniform(-0.7, 0.7), rng.uniform(-0.2, 0.2)]) + [3.0, -2.0, 1.0]
        mat = np.stack([-rot[:, 1], rot[:, 0], rot[:, 2], pos, [height, width, focal]], 1)
        near, far = rng.uniform(2.0, 3.0), rng.uniform(20.0, 40.0)
        rows.append(np.concatenate([mat.ravel(), [near, far]]))
    return np.array(rows)


def _write_scene(root: Path, n=6, height=12, width=16, seed=0, images=None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    imgs = rng.integers(0, 256, size=(n, height, width, 3), dtype=np.uint8) if images is None else images
    for k, img in enumerate(imgs):
        iio.imwrite(root / "images" / f"IMG_{k:03d}.png", img)
    arr = _poses_bounds(n, seed, height, width, focal=0.9 * width)
    np.save(root / "poses_bounds.npy", arr)
    return arr, imgs


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("recenter", [True, False])
def test_matches_nerf_pytorch_reference(tmp_path, recenter):
    arr, imgs = _write_scene(tmp_path / "s", n=9)
    scene = load_llff(tmp_path / "s", factor=1, recenter=recenter, llffhold=4, use_ndc=False)
    poses, bds, render_poses, focal = reference_llff(arr.copy(), imgs, recenter=recenter)
    np.testing.assert_allclose(scene.poses, poses, atol=2e-5)
    np.testing.assert_allclose(scene.bounds, bds, rtol=1e-6)
    np.testing.assert_allclose(scene.render_poses, render_poses, atol=2e-5)
    np.testing.assert_array_equal(scene.images, imgs.astype(np.float32) / 255.0)
    assert scene.images.dtype == np.float32 and scene.poses.dtype == np.float32
    assert (scene.height, scene.width) == (12, 16) and scene.focal == pytest.approx(focal)
    assert scene.near == pytest.approx(0.9 * bds.min()) and scene.far == pytest.approx(bds.max())
    assert scene.bounds.min() == pytest.approx(1 / 0.75)
    ndc = load_llff(tmp_path / "s", factor=1, recenter=recenter, llffhold=4)
    assert (ndc.near, ndc.far, ndc.use_ndc) == (0.0, 1.0, True)


def test_spherify_matches_reference_and_maps_back(tmp_path):
    arr, imgs = _write_scene(tmp_path / "s", n=8)
    scene = load_llff(tmp_path / "s", factor=1, spherify=True, use_ndc=False)
    poses, bds, _, _ = reference_llff(arr.copy(), imgs, spherify=True)
    np.testing.assert_allclose(scene.poses, poses, atol=5e-5)
    np.testing.assert_allclose(scene.bounds, bds, rtol=1e-5)
    _check_scene_to_world(scene, arr)


def _check_scene_to_world(scene, arr):
    """Camera centres and axes mapped through scene_to_world equal those in poses_bounds.npy."""
    raw = arr[:, :15].reshape(-1, 3, 5)
    world_rot = np.stack([raw[:, :, 1], -raw[:, :, 0], raw[:, :, 2]], 2)  # [right, up, back]
    S = scene.scene_to_world
    scale = np.cbrt(np.linalg.det(S[:3, :3]))
    np.testing.assert_allclose(S[:3, :3].T @ S[:3, :3], scale**2 * np.eye(3), atol=1e-9)  # similarity
    np.testing.assert_array_equal(S[3], [0, 0, 0, 1])
    centres = scene.poses[:, :, 3].astype(np.float64) @ S[:3, :3].T + S[:3, 3]
    np.testing.assert_allclose(centres, raw[:, :, 3], atol=1e-5)
    np.testing.assert_allclose(S[:3, :3] @ scene.poses[:, :, :3] / scale, world_rot, atol=1e-5)
    # bounds are depths: they scale by the same factor
    np.testing.assert_allclose(scene.bounds * scale, arr[:, 15:], rtol=1e-5)


def test_scene_to_world_undoes_rescale_and_recenter(tmp_path):
    arr, _ = _write_scene(tmp_path / "s", n=7)
    _check_scene_to_world(load_llff(tmp_path / "s", factor=1), arr)
    _check_scene_to_world(load_llff(tmp_path / "s", factor=1, recenter=False), arr)


def test_factor_uses_images_folder_when_present(tmp_path):
    arr, _ = _write_scene(tmp_path / "s", n=3, height=12, width=16)
    small = np.random.default_rng(5).integers(0, 256, size=(3, 6, 8, 3), dtype=np.uint8)
    (tmp_path / "s" / "images_2").mkdir()
    for k, img in enumerate(small):
        iio.imwrite(tmp_path / "s" / "images_2" / f"IMG_{k:03d}.png", img)
    scene = load_llff(tmp_path / "s", factor=2, llffhold=0)
    np.testing.assert_array_equal(scene.images, small / np.float32(255))
    assert (scene.height, scene.width) == (6, 8) and scene.focal == pytest.approx(arr[0, 14] / 2)


@pytest.mark.parametrize("shape", [(12, 16), (13, 17)])
def test_factor_resizes_in_process(tmp_path, shape):
    h, w = shape
    yy, xx = np.mgrid[0:h, 0:w]
    smooth = np.stack([np.sin(xx / 3.0), np.cos(yy / 4.0), np.sin((xx + yy) / 5.0)], -1) * 0.5 + 0.5
    imgs = np.round(np.stack([smooth, smooth[::-1]]) * 255).astype(np.uint8)
    arr, _ = _write_scene(tmp_path / "s", n=2, height=h, width=w, images=imgs)
    scene = load_llff(tmp_path / "s", factor=2, llffhold=0)
    assert (scene.height, scene.width) == (h // 2, w // 2)
    assert scene.focal == pytest.approx(arr[0, 14] / 2)
    top, left = (h % 2) // 2, (w % 2) // 2  # centred crop to a multiple of the factor
    for k, img in enumerate(imgs.astype(np.float64) / 255):
        crop = img[top : top + h // 2 * 2, left : left + w // 2 * 2]
        np.testing.assert_allclose(scene.images[k], downscale_local_mean(crop, (2, 2, 1)), atol=1e-6)
        # close to scikit-image's anti-aliased resize on smooth content
        ref = resize(crop, (h // 2, w // 2), anti_aliasing=True)
        assert np.abs(scene.images[k] - ref).mean() < 0.03


def test_llffhold_split(tmp_path):
    _write_scene(tmp_path / "s", n=10)
    scene = load_llff(tmp_path / "s", factor=1, llffhold=3)
    np.testing.assert_array_equal(scene.i_test, [0, 3, 6, 9])
    np.testing.assert_array_equal(scene.i_train, [1, 2, 4, 5, 7, 8])
    none = load_llff(tmp_path / "s", factor=1, llffhold=0)
    assert none.i_test.size == 0 and none.i_train.tolist() == list(range(10))


def test_scene_rays_use_scene_camera(tmp_path):
    _write_scene(tmp_path / "s", n=3)
    scene = load_llff(tmp_path / "s", factor=1, use_ndc=False)
    rays = scene.rays(1)
    assert rays.origins.shape == (12, 16, 3)
    np.testing.assert_allclose(rays.origins[0, 0].numpy(), scene.poses[1, :, 3], atol=1e-6)
    centre = rays.directions[6, 8].numpy()  # pixel (8.5, 6.5): just off the optical axis
    expected = scene.poses[1, :, :3] @ np.array([0.5 / scene.focal, -0.5 / scene.focal, -1.0])
    np.testing.assert_allclose(centre, expected, atol=1e-6)
    assert float(rays.near.min()) == pytest.approx(scene.near, rel=1e-6)
    np.testing.assert_array_equal(scene.image(1), scene.images[1])


# ------------------------------------------------------------------ bad input


def _bad_cases(root: Path):
    def missing_folder():
        return root / "nope", "nope"

    def missing_images():
        _write_scene(root)
        (root / "images").rename(root / "pics")
        return root, "images"

    def empty_images():
        _write_scene(root)
        for p in (root / "images").iterdir():
            p.unlink()
        return root, "images"

    def missing_poses():
        _write_scene(root)
        (root / "poses_bounds.npy").unlink()
        return root, "poses_bounds.npy"

    def wrong_shape():
        arr, _ = _write_scene(root)
        np.save(root / "poses_bounds.npy", arr[:, :15])
        return root, "poses_bounds.npy"

    def corrupt_npy():
        _write_scene(root)
        (root / "poses_bounds.npy").write_bytes(b"not numpy at all")
        return root, "poses_bounds.npy"

    def count_mismatch():
        arr, _ = _write_scene(root)
        np.save(root / "poses_bounds.npy", arr[:-1])
        return root, "poses_bounds.npy"

    def unreadable_image():
        _write_scene(root)
        (root / "images" / "IMG_002.png").write_bytes(b"\x89PNG garbage")
        return root, "IMG_002.png"

    def differing_sizes():
        _write_scene(root)
        iio.imwrite(root / "images" / "IMG_004.png", np.zeros((10, 16, 3), np.uint8))
        return root, "IMG_004.png"

    def nan_pose():
        arr, _ = _write_scene(root)
        arr[2, 3] = np.nan
        np.save(root / "poses_bounds.npy", arr)
        return root, "poses_bounds.npy"

    def zero_bound():
        arr, _ = _write_scene(root)
        arr[1, 15] = 0.0
        np.save(root / "poses_bounds.npy", arr)
        return root, "poses_bounds.npy"

    def negative_bound():
        arr, _ = _write_scene(root)
        arr[3, 16] = -4.0
        np.save(root / "poses_bounds.npy", arr)
        return root, "poses_bounds.npy"

    return [missing_folder, missing_images, empty_images, missing_poses, wrong_shape, corrupt_npy,
            count_mismatch, unreadable_image, differing_sizes, nan_pose, zero_bound, negative_bound]  # fmt: skip


@pytest.mark.parametrize("case", range(12))
def test_bad_input_raises_one_line_data_error(tmp_path, case):
    make = _bad_cases(tmp_path / "scene")[case]
    datadir, named = make()
    with pytest.raises(DataError) as info:
        load_llff(datadir, factor=1)
    message = str(info.value)
    assert named in message and "\n" not in message and len(message) < 300, message
    assert info.value.__cause__ is None and info.value.__suppress_context__ or info.value.__context__ is None


# ------------------------------------------------------------------ resolve_scene_dir


def test_resolve_scene_dir(tmp_path, monkeypatch):
    (tmp_path / "mine").mkdir()
    assert resolve_scene_dir("fern", str(tmp_path / "mine"), tmp_path) == tmp_path / "mine"
    with pytest.raises(DataError, match="missing"):
        resolve_scene_dir("fern", str(tmp_path / "missing"), tmp_path)
    with pytest.raises(DataError) as info:
        resolve_scene_dir("fern", "", tmp_path / "data")
    message = str(info.value)
    assert "nerf_llff_data/fern" in message and "drive.google.com" in message and "--datadir" in message
    assert "\n" not in message
    (tmp_path / "data" / "nerf_llff_data" / "fern").mkdir(parents=True)
    assert resolve_scene_dir("fern", "", tmp_path / "data") == tmp_path / "data" / "nerf_llff_data" / "fern"

    made = []

    def fake_make(path):
        made.append(path)
        Path(path).mkdir(parents=True)
        return path

    monkeypatch.setattr(resolve, "make_synthetic_scene", fake_make)
    assert resolve_scene_dir("demo", "", tmp_path / "data") == tmp_path / "data" / "demo"
    assert resolve_scene_dir("demo", "", tmp_path / "data") == tmp_path / "data" / "demo"
    assert made == [tmp_path / "data" / "demo"]  # made once, on first use
