"""The exported splat page (``enerf.splats.html``) in a real browser: headless Chromium (software
WebGL, SwiftShader) opens the page as file:// in a 640 x 480 window; the test moves the camera
through the page's hook (``window.enerfSplat``) and reads its screenshots and frame times.

Checked against independent computations: where a pinhole projection in numpy puts two coloured
blobs (before and after a camera move), and a 3DGS splatting of a few Gaussians written here in
numpy (EWA projection, +0.3 px low-pass, alpha clamp, front-to-back compositing, SH band 1) of the
splats as the page quantises them (read back from the page's file with ``decode_page_splats``).

Skips (with the reason) where selenium, chromium or chromedriver is missing:
``apt-get install -y chromium chromium-driver`` and ``pip install -e ".[test]"``.
"""

from __future__ import annotations

import math

import imageio.v3 as iio
import numpy as np
import pytest
import torch

pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")

from benchmarks.splat_page import (CHROMEDRIVER, CHROMIUM, drag_and_wait, input_and_wait, move_and_wait,  # noqa: E402
                                   open_chromium, open_page)

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("no headless browser: apt-get install -y chromium chromium-driver", allow_module_level=True)

from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402

from enerf.splats.gaussians import SH_C0, Splats, rgb_to_sh0  # noqa: E402
from enerf.splats.html import write_html  # noqa: E402
from splat_page_data import read_page  # noqa: E402

W, H = 640, 480
FOV_Y = 40.0
C1 = 0.4886025119029199


@pytest.fixture(scope="module")
def browser():
    driver = open_chromium(W, H)
    yield driver
    driver.quit()


def _c2w(position, yaw_deg: float = 0.0) -> np.ndarray:
    """OpenGL camera-to-world at ``position``, turned ``yaw_deg`` about +y (0: looking down -z)."""
    a = math.radians(yaw_deg)
    c2w = np.eye(4)
    c2w[:3, :3] = [[math.cos(a), 0, math.sin(a)], [0, 1, 0], [-math.sin(a), 0, math.cos(a)]]
    c2w[:3, 3] = position
    return c2w


def _project(point, c2w: np.ndarray) -> np.ndarray:
    """Pixel (x right, y down; edges at 0) of a world point in the W x H pinhole of fov FOV_Y."""
    cam = np.linalg.inv(c2w) @ np.append(point, 1.0)  # OpenGL: x right, y up, z back
    f = 0.5 * H / math.tan(math.radians(FOV_Y) / 2)
    return np.array([W / 2 + f * cam[0] / -cam[2], H / 2 - f * cam[1] / -cam[2]])


def _screenshot(driver) -> np.ndarray:
    driver.execute_script("window.enerfSplat.showHud(false)")
    return iio.imread(driver.get_screenshot_as_png())[..., :3].astype(np.float64) / 255.0


def _blob(centre, rgb) -> dict:
    """125 Gaussians on a 5 x 5 x 5 lattice (spacing 0.04) around ``centre``: symmetric about it."""
    g = np.arange(-2, 3) * 0.04
    means = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3) + np.asarray(centre)
    return {"means": means, "rgb": np.tile(rgb, (len(means), 1))}


def _splats(means, sigmas, quats, opacity, rgb, sh1=None) -> Splats:
    t = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float32)  # noqa: E731
    sh = rgb_to_sh0(t(rgb))[:, None]
    if sh1 is not None:
        sh = torch.cat([sh, t(sh1)], 1)
    return Splats(t(means), torch.log(t(sigmas)), t(quats), torch.logit(t(opacity)), sh)


RED, BLUE = np.array([-1.0, 0.5, 0.0]), np.array([1.0, 0.0, 0.0])


def _centroid(image: np.ndarray, channel: int) -> np.ndarray:
    """Mean pixel centre (x, y) of the pixels whose ``channel`` dominates."""
    other = np.delete(image, channel, axis=-1).max(-1)
    mask = (image[..., channel] > 0.3) & (other < 0.5 * image[..., channel])
    assert mask.sum() > 50, "the blob is not in the picture"
    ys, xs = np.nonzero(mask)
    return np.array([xs.mean() + 0.5, ys.mean() + 0.5])


def test_blobs_land_where_the_projection_puts_them_and_follow_the_camera(browser, tmp_path):
    red, blue = _blob(RED, [1.0, 0.0, 0.0]), _blob(BLUE, [0.0, 0.0, 1.0])
    means = np.concatenate([red["means"], blue["means"]])
    n = len(means)
    splats = _splats(means, np.full((n, 3), 0.03), np.tile([1.0, 0, 0, 0], (n, 1)), np.full(n, 0.9),
                     np.concatenate([red["rgb"], blue["rgb"]]))
    start = _c2w([0.0, 0.0, 4.0])
    out = write_html(splats, tmp_path / "blobs.html", "two blobs",
                     [{"c2w": start, "fov_y": FOV_Y, "width": W, "height": H}])
    assert out["splats"] == n and out["bytes"] > 0
    open_page(browser, tmp_path / "blobs.html")
    state = browser.execute_script("return [enerfSplat.width, enerfSplat.height, enerfSplat.error]")
    assert state == [W, H, None]
    before = _screenshot(browser)
    assert before.shape == (H, W, 3)
    assert (before.max(-1) > 0.1).mean() > 0.005, "the page is blank"
    np.testing.assert_allclose(_centroid(before, 0), _project(RED, start), atol=2.0)  # left and up
    np.testing.assert_allclose(_centroid(before, 2), _project(BLUE, start), atol=2.0)
    assert _project(RED, start)[0] < W / 2 < _project(BLUE, start)[0]

    behind = _c2w([0.0, 0.0, -4.0], yaw_deg=180.0)  # looking back at the blobs: red goes right
    got = move_and_wait(browser, behind, full=True)
    after = _screenshot(browser)
    assert _project(RED, behind)[0] > W / 2
    np.testing.assert_allclose(_centroid(after, 0), _project(RED, behind), atol=2.0)
    np.testing.assert_allclose(_centroid(after, 2), _project(BLUE, behind), atol=2.0)
    assert np.abs(after - before).mean() > 0.005
    assert 0 < got["lastFrameMs"] <= got["lastMoveMs"] <= got["full"]["lastFullMs"] < 60_000
    assert got["full"]["fullFrames"] >= 2 and got["full"]["drawn"] == n
    np.testing.assert_allclose(browser.execute_script("return enerfSplat.getCamera()"), behind.reshape(-1), atol=1e-6)

    # a mouse drag of dx pixels orbits by -0.005 dx radians about the up vector (+y, the cameras'),
    # through the target the page keeps at the median splat depth ahead of the camera: dragging
    # left, the camera goes round to its right
    got = drag_and_wait(browser, -100)
    assert got["lastMoveMs"] >= got["lastFrameMs"] > 0
    orbit = _c2w([0.0, 0.0, 0.0], yaw_deg=math.degrees(0.5))  # 100 px * 0.005 rad
    target = behind[:3, 3] - behind[:3, 2] * np.median(np.abs(means[:, 2] + 4.0))
    want = orbit @ behind
    want[:3, 3] = target + orbit[:3, :3] @ (behind[:3, 3] - target)
    np.testing.assert_allclose(browser.execute_script("return enerfSplat.getCamera()"), want.reshape(-1), atol=1e-5)


def _reference(splats: dict, c2w: np.ndarray) -> np.ndarray:
    """3DGS splatting in numpy: [H, W, 3] on black."""
    f = 0.5 * H / math.tan(math.radians(FOV_Y) / 2)
    w2c = np.diag([1.0, -1.0, -1.0]) @ np.linalg.inv(c2w)[:3]  # OpenCV axes: x right, y down, z forward
    px = np.stack(np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5), -1)  # [H, W, 2] pixel centres
    image, trans = np.zeros((H, W, 3)), np.ones((H, W))
    cams = [w2c @ np.append(m, 1.0) for m in splats["means"]]
    for i in np.argsort([c[2] for c in cams]):  # front to back
        x, y, z = cams[i]
        w, qx, qy, qz = np.asarray(splats["quats"][i]) / np.linalg.norm(splats["quats"][i])
        rot = np.array([[1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - w * qz), 2 * (qx * qz + w * qy)],
                        [2 * (qx * qy + w * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - w * qx)],
                        [2 * (qx * qz - w * qy), 2 * (qy * qz + w * qx), 1 - 2 * (qx * qx + qy * qy)]])
        m = rot @ np.diag(splats["sigmas"][i])
        jac = np.array([[f / z, 0, -f * x / z**2], [0, f / z, -f * y / z**2]])
        cov2 = jac @ w2c[:, :3] @ m @ m.T @ w2c[:, :3].T @ jac.T + 0.3 * np.eye(2)
        d = px - [W / 2 + f * x / z, H / 2 + f * y / z]
        power = -0.5 * np.einsum("hwi,ij,hwj->hw", d, np.linalg.inv(cov2), d)
        alpha = np.minimum(0.99, splats["opacity"][i] * np.exp(power))
        alpha[alpha < 1 / 255] = 0
        direction = splats["means"][i] - c2w[:3, 3]
        dx, dy, dz = direction / np.linalg.norm(direction)
        sh = splats["sh1"][i]  # [3, 3]
        rgb = np.maximum(splats["rgb"][i] + C1 * (-dy * sh[0] + dz * sh[1] - dx * sh[2]), 0)
        image += (trans * alpha)[..., None] * rgb
        trans *= 1 - alpha
    return image


@pytest.mark.parametrize("horizon", [False, True])
def test_pixels_match_a_numpy_3dgs_splatting(browser, tmp_path, horizon):
    """``horizon``: one more splat 10^6 out and 10^5 wide (as a forward-facing bake leaves at its horizon),
    too faint to draw: the small splats' covariances keep their precision beside its 10^10 (each splat's
    float16 covariance has its own power of two)."""
    rng = np.random.default_rng(3)
    n = 12
    scene = {
        "means": np.stack([rng.uniform(-1.2, 1.2, n), rng.uniform(-0.8, 0.8, n), rng.uniform(-0.8, 0.8, n)], -1),
        "sigmas": rng.uniform(0.03, 0.3, (n, 3)) * np.array([1.0, 0.4, 0.15]),  # anisotropic
        "quats": rng.normal(size=(n, 4)),
        "opacity": rng.uniform(0.3, 0.97, n),
        "rgb": rng.uniform(0.15, 0.85, (n, 3)),
        "sh1": rng.uniform(-0.15, 0.15, (n, 3, 3)),
    }
    if horizon:
        far = {"means": [[0.0, 0.0, -1e6]], "sigmas": [[1e5, 1e5, 1e5]], "quats": [[1.0, 0.0, 0.0, 0.0]],
               "opacity": [0.001], "rgb": [[0.5, 0.5, 0.5]], "sh1": np.zeros((1, 3, 3))}
        scene = {k: np.concatenate([v, np.asarray(far[k], dtype=float)]) for k, v in scene.items()}
    splats = _splats(scene["means"], scene["sigmas"], scene["quats"], scene["opacity"], scene["rgb"], scene["sh1"])
    np.testing.assert_allclose(SH_C0 * splats.sh[:, 0].numpy() + 0.5, scene["rgb"], atol=1e-6)
    cameras = [{"c2w": _c2w([0.3, 0.2, 4.0], yaw_deg=5.0), "fov_y": FOV_Y, "width": W, "height": H},
               {"c2w": _c2w([-3.2, 0.4, -2.4], yaw_deg=-127.0), "fov_y": FOV_Y, "width": W, "height": H}]
    write_html(splats, tmp_path / "few.html", "a few Gaussians", cameras)
    _, _, page = read_page(tmp_path / "few.html")  # the splats as quantised into the page: the reference draws them
    drawn = {"means": page["means"], "sigmas": np.exp(page["log_scales"]), "quats": page["quats"],
             "opacity": page["alpha"], "rgb": page["rgb"], "sh1": page["sh1"]}
    open_page(browser, tmp_path / "few.html")
    for i, cam in enumerate(cameras):
        if i:  # the page's own camera list, by its key
            input_and_wait(browser, lambda: ActionChains(browser).send_keys("n").perform(), full=True)
        got = _screenshot(browser)
        want = _reference(drawn, cam["c2w"])
        psnr = -10 * np.log10(np.mean((got - want) ** 2))
        assert psnr > 45.0, f"camera {i}: PSNR {psnr:.1f} dB against the numpy splatting"
        assert np.abs(got - want).max() < 6 / 255
        assert (want.max(-1) > 0.05).mean() > 0.05  # the Gaussians fill part of the view
