"""Lens models against OpenCV and an independent inversion, and undistorted images of a known pattern: the
photo of a capture through an OPENCV or OPENCV_FISHEYE lens loads as the pinhole image of that pattern."""

from __future__ import annotations

import imageio.v3 as iio
import numpy as np
import pytest

from enerf.cameras.lens import Camera, Resampler, pinhole_canvas, source_pixels
from enerf.data.nerfstudio import load_nerfstudio
from helpers import write_capture


# ----------------------------------------------------------------------------- lens models


def _grid_directions(camera: Camera, focal: float, width: int, height: int) -> np.ndarray:
    """Normalised undistorted coordinates [H * W, 2] of the centred pinhole's pixel centres (hand-made)."""
    cols, rows = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    return np.stack([(cols - width / 2) / focal, (rows - height / 2) / focal], -1).reshape(-1, 2)


@pytest.mark.parametrize("coefficients", [dict(k1=0.0578421, k2=-0.0805099, p1=-0.000980296, p2=0.00015575),
                                          dict(k1=-0.21, k2=0.05, k3=-0.004, p1=0.002, p2=-0.001)])
def test_opencv_map_matches_cv2_project_points(coefficients):
    cv2 = pytest.importorskip("cv2")
    camera = Camera("OPENCV", 120, 90, 100.0, 98.0, 61.3, 44.2, **coefficients)
    u, v, _ = source_pixels(camera, 99.0, 120, 90)
    xy = _grid_directions(camera, 99.0, 120, 90)
    points = np.concatenate([xy, np.ones((len(xy), 1))], 1)
    k = np.array([[camera.fx, 0, camera.cx], [0, camera.fy, camera.cy], [0, 0, 1]])
    dist = np.array([camera.k1, camera.k2, camera.p1, camera.p2, camera.k3])
    projected, _ = cv2.projectPoints(points, np.zeros(3), np.zeros(3), k, dist)
    np.testing.assert_allclose(np.stack([u.ravel(), v.ravel()], 1), projected[:, 0], atol=1e-4)


def test_fisheye_map_matches_cv2_fisheye_project_points():
    cv2 = pytest.importorskip("cv2")
    camera = Camera("OPENCV_FISHEYE", 160, 120, 70.0, 71.0, 80.5, 59.0, k1=0.05, k2=-0.01, k3=0.003, k4=-0.0005)
    u, v, _ = source_pixels(camera, 60.0, 160, 120)
    xy = _grid_directions(camera, 60.0, 160, 120)
    points = np.concatenate([xy, np.ones((len(xy), 1))], 1)[:, None]
    k = np.array([[camera.fx, 0, camera.cx], [0, camera.fy, camera.cy], [0, 0, 1]])
    projected, _ = cv2.fisheye.projectPoints(points, np.zeros(3), np.zeros(3), k,
                                             np.array([camera.k1, camera.k2, camera.k3, camera.k4]))
    np.testing.assert_allclose(np.stack([u.ravel(), v.ravel()], 1), projected[:, 0], atol=1e-4)


def test_opencv_map_with_nerfstudio_k4_against_a_power_series():
    """nerfstudio's k4 (an r^8 term, which OpenCV does not have): the radial factor as a numpy
    polynomial in r^2, the tangential part written out separately."""
    camera = Camera("OPENCV", 64, 48, 50.0, 52.0, 31.0, 25.0, k1=0.1, k2=-0.02, k3=0.01, k4=-0.003, p1=0.001, p2=0.002)
    xy = _grid_directions(camera, 50.0, 64, 48)
    x, y = xy[:, 0], xy[:, 1]
    r2 = x**2 + y**2
    radial = np.polynomial.polynomial.polyval(r2, [1.0, camera.k1, camera.k2, camera.k3, camera.k4])
    xd = radial * x + 2 * camera.p1 * x * y + camera.p2 * (r2 + 2 * x**2)
    yd = radial * y + camera.p1 * (r2 + 2 * y**2) + 2 * camera.p2 * x * y
    u, v, _ = source_pixels(camera, 50.0, 64, 48)
    np.testing.assert_allclose(u.ravel(), camera.fx * xd + camera.cx, atol=1e-9)
    np.testing.assert_allclose(v.ravel(), camera.fy * yd + camera.cy, atol=1e-9)


def _undistort_points(camera: Camera, xd: np.ndarray, yd: np.ndarray, iters: int = 200):
    """Invert the OPENCV model by fixed-point iteration (as OpenCV's undistortPoints does)."""
    x, y = xd.copy(), yd.copy()
    for _ in range(iters):
        r2 = x * x + y * y
        radial = 1 + camera.k1 * r2 + camera.k2 * r2**2 + camera.k3 * r2**3
        dx = 2 * camera.p1 * x * y + camera.p2 * (r2 + 2 * x * x)
        dy = camera.p1 * (r2 + 2 * y * y) + 2 * camera.p2 * x * y
        x, y = (xd - dx) / radial, (yd - dy) / radial
    return x, y


def _pattern(x, y):
    """A smooth colour pattern of normalised undistorted coordinates: [..., 3] in [0, 1]."""
    return np.stack([0.5 + 0.4 * np.sin(3 * x + 1), 0.5 + 0.4 * np.cos(2 * y - 0.5), 0.5 + 0.3 * np.sin(2 * x * y + 2)],
                    -1).astype(np.float32)


def _distorted_photo(camera: Camera) -> np.ndarray:
    """What ``camera`` photographs of ``_pattern``: [H, W, 3] float32."""
    cols, rows = np.meshgrid(np.arange(camera.width) + 0.5, np.arange(camera.height) + 0.5)
    x, y = _undistort_points(camera, (cols - camera.cx) / camera.fx, (rows - camera.cy) / camera.fy)
    return _pattern(x, y)


def test_canvas_is_the_largest_centred_rectangle_inside_the_photo():
    camera = Camera("OPENCV", 90, 160, 115.0, 114.9, 46.2, 80.4, k1=0.0578, k2=-0.0805, p1=-0.00098, p2=0.00016)
    width, height = pinhole_canvas([camera], camera.fx)
    assert width % 2 == 0 and height % 2 == 0 and (width, height) != (0, 0)
    _, _, valid = source_pixels(camera, camera.fx, width, height)
    assert valid.all()
    for w, h in ((width + 2, height), (width, height + 2)):  # one more pixel on each side leaves the photo
        assert not source_pixels(camera, camera.fx, w, h)[2].all()
    assert pinhole_canvas([camera], camera.fx, multiple=4)[0] % 4 == 0


def test_undistorted_photo_shows_the_pattern_at_pinhole_directions(tmp_path):
    camera = Camera("OPENCV", 90, 160, 115.0, 114.9, 46.2, 80.4, k1=0.0578, k2=-0.0805, p1=-0.00098, p2=0.00016)
    photo = _distorted_photo(camera)
    width, height = pinhole_canvas([camera], camera.fx)
    u, v, _ = source_pixels(camera, camera.fx, width, height)
    out = Resampler(u, v, camera.width, camera.height)(photo)
    expected = _pattern(*_grid_directions(camera, camera.fx, width, height).T).reshape(height, width, 3)
    assert np.abs(out - expected).max() < 2e-3  # bilinear reads of a smooth pattern


def test_resampler_is_scipy_bilinear():
    from scipy.ndimage import map_coordinates

    rng = np.random.default_rng(0)
    image = rng.random((13, 17, 3)).astype(np.float32)
    u, v = rng.uniform(0.5, 16.5, (5, 7)), rng.uniform(0.5, 12.5, (5, 7))
    out = Resampler(u, v, 17, 13)(image)
    for c in range(3):
        np.testing.assert_allclose(out[..., c], map_coordinates(image[..., c], [v - 0.5, u - 0.5], order=1), atol=1e-5)


def test_distorted_capture_is_undistorted_to_its_pinhole(tmp_path):
    """A photo of the smooth pattern through an OPENCV lens with an off-centre principal point and
    fx != fy loads as the centred pinhole image of that pattern."""
    camera = Camera("OPENCV", 90, 160, 115.0, 114.9, 46.2, 80.4, k1=0.0578, k2=-0.0805, p1=-0.00098, p2=0.00016)
    scene_dir = write_capture(tmp_path / "cap", n=2, size=(90, 160), meta_extra={
        "camera_model": "OPENCV", "fl_x": camera.fx, "fl_y": camera.fy, "cx": camera.cx, "cy": camera.cy,
        "k1": camera.k1, "k2": camera.k2, "p1": camera.p1, "p2": camera.p2})
    iio.imwrite(scene_dir / "images" / "f_00.png", np.round(_distorted_photo(camera) * 255).astype(np.uint8))
    scene = load_nerfstudio(scene_dir, llffhold=0)
    assert scene.focal == camera.fx and (scene.width, scene.height) == pinhole_canvas([camera], camera.fx)
    expected = _pattern(*_grid_directions(camera, camera.fx, scene.width, scene.height).T)
    assert np.abs(scene.images[0] - expected.reshape(scene.images[0].shape)).max() < 4e-3  # + 8-bit rounding


def test_fisheye_capture_is_undistorted_to_its_pinhole(tmp_path):
    """The same with OPENCV_FISHEYE: the photo made by inverting theta_d(theta) with Newton steps."""
    camera = Camera("OPENCV_FISHEYE", 120, 90, 70.0, 70.5, 61.0, 44.0, k1=0.04, k2=-0.01, k3=0.002, k4=-0.0003)
    cols, rows = np.meshgrid(np.arange(120) + 0.5, np.arange(90) + 0.5)
    xd, yd = (cols - camera.cx) / camera.fx, (rows - camera.cy) / camera.fy
    theta_d = np.hypot(xd, yd)
    theta = theta_d.copy()
    for _ in range(50):
        t2 = theta**2
        f = theta * (1 + camera.k1 * t2 + camera.k2 * t2**2 + camera.k3 * t2**3 + camera.k4 * t2**4) - theta_d
        df = 1 + 3 * camera.k1 * t2 + 5 * camera.k2 * t2**2 + 7 * camera.k3 * t2**3 + 9 * camera.k4 * t2**4
        theta -= f / df
    ratio = np.tan(theta) / np.maximum(theta_d, 1e-12)
    scene_dir = write_capture(tmp_path / "cap", n=2, size=(120, 90), meta_extra={
        "camera_model": "OPENCV_FISHEYE", "fl_x": camera.fx, "fl_y": camera.fy, "cx": camera.cx, "cy": camera.cy,
        "k1": camera.k1, "k2": camera.k2, "k3": camera.k3, "k4": camera.k4})
    iio.imwrite(scene_dir / "images" / "f_00.png", np.round(_pattern(xd * ratio, yd * ratio) * 255).astype(np.uint8))
    scene = load_nerfstudio(scene_dir, llffhold=0)
    assert scene.focal == camera.fx and scene.width * scene.height > 0.5 * 120 * 90
    expected = _pattern(*_grid_directions(camera, camera.fx, scene.width, scene.height).T)
    assert np.abs(scene.images[0] - expected.reshape(scene.images[0].shape)).max() < 4e-3

