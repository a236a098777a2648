"""The viewer's splats in a real browser (headless Chromium, as ``test_viewer_browser.py``):

* ``enerf view --splats small.ply`` (no checkpoint): a synthetic set of 300 splats written with
  numpy in the 3DGS layout, one of them red in front of the rest. The screenshot is not blank and
  the red splat sits where a numpy pinhole projection of its centre says; after each camera move
  set from Python the page draws it at its new place. Measured and printed: the time from
  setting the camera to the first frame the page draws with the red splat at its new pixel (read
  back from the page's WebGL context), and to the first screenshot that shows it (a 640 x 480
  page); the server renders nothing.
* ``enerf view --ckpt C --splats F.ply``: right after a camera move the page shows the splats
  (the red one at its projected pixel); once the camera rests, the field's exact frame, equal
  to the run's rendering of that camera (PSNR >= 35 dB), with the splats hidden.

Skips where viser, selenium, chromium or chromedriver is missing.
"""

from __future__ import annotations

import base64
import os
import shutil
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from enerf.cli import main

pytest.importorskip("viser", reason="the viewer extra (viser) is not installed: pip install -e '.[viewer]'")
pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")
pytest.importorskip("plyfile", reason="plyfile is not installed: pip install -e '.[test]'")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("no headless browser: apt-get install -y chromium chromium-driver", allow_module_level=True)

from enerf.config import ViewerConfig  # noqa: E402
from enerf.splats.gaussians import SH_C0  # noqa: E402
from enerf.viewer.app import open_view  # noqa: E402
from enerf.viewer.render import focal_from_fov, render_camera  # noqa: E402
from enerf.viewer.scene import viser_from_c2w  # noqa: E402
from browser_frames import as_shown, fills  # noqa: E402
from viewer_splat_files import splat_modules, write_3dgs_ply  # noqa: E402

PAGE = (640, 480)  # the page's size in CSS pixels (the canvas fills it)
FOV = np.radians(50.0)
# each frame the page draws with WebGL, the time and the colour at the probe pixel (CSS pixels, top-left origin)
PROBE = """
window.__frames = []; window.__probe = null;
const draw = WebGL2RenderingContext.prototype.drawElementsInstanced, px = new Uint8Array(4);
WebGL2RenderingContext.prototype.drawElementsInstanced = function(...args) {
  const out = draw.apply(this, args), p = window.__probe;
  if (p) {
    const c = this.canvas, s = c.width / c.clientWidth;
    this.readPixels(Math.round(p[0] * s), Math.round(c.height - 1 - p[1] * s), 1, 1, this.RGBA, this.UNSIGNED_BYTE, px);
    window.__frames.push([performance.timeOrigin + performance.now(), px[0], px[1], px[2]]);
  }
  return out;
};"""
HIDE_PANEL = ("for (const el of document.body.querySelectorAll('*')) {"
              "  if (el.tagName !== 'CANVAS' && !el.querySelector('canvas')) el.style.visibility = 'hidden'; }")


def _driver(page: tuple[int, int] | None = PAGE, window: tuple[int, int] = PAGE):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--force-device-scale-factor=1",
                f"--window-size={window[0]},{window[1]}"):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    if page is not None:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": page[0], "height": page[1], "deviceScaleFactor": 1, "mobile": False})
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PROBE})
    return driver


def _shot(driver) -> np.ndarray:
    """The page as float RGB [H, W, 3] (JPEG, captured for speed)."""
    data = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "jpeg", "quality": 95, "optimizeForSpeed": True})
    return iio.imread(base64.b64decode(data["data"]))[..., :3].astype(np.float32) / 255.0


def _red(image: np.ndarray):
    """Centre (x, y; pixel centres at .5) and count of the red pixels, or None."""
    mask = (image[..., 0] > 0.6) & (image[..., 1] < 0.35) & (image[..., 2] < 0.35)
    ys, xs = np.nonzero(mask)
    return (xs.mean() + 0.5, ys.mean() + 0.5, int(mask.sum())) if mask.any() else None


def _project(point, c2w: np.ndarray, fov: float, width: int, height: int) -> np.ndarray:
    """Pinhole projection of ``point`` by enerf's camera-to-world ``c2w`` ([right, up, back, t])
    with vertical field of view ``fov``: pixel (x, y), top-left origin."""
    rel = np.asarray(point, np.float64) - c2w[:3, 3]
    x, y, z = rel @ c2w[:3, 0], -(rel @ c2w[:3, 1]), -(rel @ c2w[:3, 2])
    f = 0.5 * height / np.tan(0.5 * fov)
    return np.array([f * x / z + 0.5 * width, f * y / z + 0.5 * height])


def _looking_along_y(position) -> np.ndarray:
    """A camera at ``position`` looking along +y, z up (enerf's [right, up, back, t])."""
    return np.array([[1.0, 0, 0, position[0]], [0, 0, -1, position[1]], [0, 1, 0, position[2]]])


def _aim(client, c2w: np.ndarray, fov: float = FOV) -> None:
    wxyz, position = viser_from_c2w(c2w)
    with client.atomic():
        client.camera.fov, client.camera.wxyz, client.camera.position = float(fov), wxyz, position


def _settle(client, c2w: np.ndarray, fov: float = FOV) -> None:
    """Aim the camera and wait until the page reports it back, and still does a moment later (the
    page's own first camera may arrive after ours)."""
    target = viser_from_c2w(c2w)[1]
    for _ in range(10):
        _aim(client, c2w, fov)
        try:
            _until(lambda: np.abs(np.asarray(client.camera.position) - target).max() < 1e-4, 5, "")
        except TimeoutError:
            continue
        time.sleep(1.0)
        if np.abs(np.asarray(client.camera.position) - target).max() < 1e-4:
            return
    raise TimeoutError("the page never took the camera the test set")


def _connected(viewer):
    """The first browser, once it has reported its camera (a camera set before that is overridden
    by the page's own first camera)."""
    return _until(lambda: next((b for b in viewer.browsers().values() if b.version > 0), None), 60,
                  "no browser reported its camera")


def _until(check, timeout: float, what: str):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"{what} within {timeout:.0f} s")


def _splat_set(n: int = 300, seed: int = 0) -> dict:
    """``n`` blue-green splats in [-1, 1]^3 and a red one (the first) in front of them (along -y)."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(-1.0, 1.0, size=(n, 3))
    colours = np.stack([np.full(n, 0.1), rng.uniform(0.3, 0.9, n), rng.uniform(0.4, 1.0, n)], axis=1)
    log_scales = np.log(np.full((n, 3), 0.05))
    means[0], colours[0], log_scales[0] = [0.4, -1.6, 0.25], [1.0, 0.0, 0.0], np.log(0.08)
    return {"means": means, "log_scales": log_scales, "quats": np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)),
            "opacity_logits": np.full(n, 3.0), "f_dc": (colours - 0.5) / SH_C0}


def test_splats_alone_follow_the_camera(tmp_path, monkeypatch):
    splat_modules(monkeypatch)  # enerf.splats.ply / frames, or the tests' stand-ins until they exist
    splats = _splat_set()
    path = write_3dgs_ply(tmp_path / "small.ply", **splats)
    red = splats["means"][0]
    viewer = open_view([], ViewerConfig(port=0), splats=path)
    driver = _driver()
    try:
        assert viewer.runs == [] and viewer._worker is None  # nothing renders on the server
        driver.get(viewer.url)
        browser = _connected(viewer)
        client = browser.client
        assert browser.showing_splats and browser.splats.visible
        poses = [_looking_along_y(p) for p in ((0.0, -4.0, 0.0), (0.6, -4.2, 0.3), (-0.3, -3.8, -0.2),
                                                (0.2, -4.5, 0.4), (0.0, -4.0, 0.0), (-0.4, -4.4, 0.3), (0.5, -3.9, -0.3))]
        _settle(client, poses[0])
        driver.execute_script(HIDE_PANEL)
        time.sleep(0.5)
        shot = _shot(driver)
        assert shot.shape[:2] == (PAGE[1], PAGE[0])
        assert shot.std() > 0.05 and (shot.min(axis=-1) < 0.8).mean() > 0.05  # splats, not a blank page
        found = _red(shot)
        assert found is not None and found[2] > 200
        np.testing.assert_allclose(found[:2], _project(red, poses[0], FOV, *PAGE), atol=3.0)
        rest = []
        for _ in range(5):
            tic = time.perf_counter()
            _shot(driver)
            rest.append(time.perf_counter() - tic)
        frame_times, shot_times, polls = [], [], []
        for c2w in poses[1:]:
            where = _project(red, c2w, FOV, *PAGE)
            driver.execute_script(f"window.__frames = []; window.__probe = [{where[0]}, {where[1]}];")
            t_set, tic = time.time(), time.perf_counter()
            _aim(client, c2w)
            polls.append([])

            def moved() -> bool:
                found = _red(_shot(driver))
                polls[-1].append(time.perf_counter() - tic)
                return found is not None and np.hypot(*(np.array(found[:2]) - where)) < 6

            _until(moved, 10, "the screenshot did not show the splat at its new place")
            shot_times.append(time.perf_counter() - tic)
            time.sleep(1.0)
            frames = driver.execute_script("return window.__frames;")
            drawn = [t for t, r, g, b in frames if r > 150 and g < 90 and b < 90]
            assert drawn, "no frame drew the red splat at its projected pixel"
            frame_times.append(drawn[0] / 1000.0 - t_set)
            found = _red(_shot(driver))
            np.testing.assert_allclose(found[:2], where, atol=3.0)
        frame, screen = float(np.median(frame_times)), float(np.median(shot_times))
        print(f"\nsplats follow a camera move ({PAGE[0]} x {PAGE[1]}): drawn by the page in {frame:.3f} s (median of "
              f"{len(frame_times)}: {', '.join(f'{t:.3f}' for t in frame_times)}), on a screenshot after {screen:.3f} s "
              f"({', '.join(f'{t:.3f}' for t in shot_times)}; a screenshot at rest takes {np.median(rest):.3f} s; the "
              f"screenshots of the first move returned at {', '.join(f'{t:.3f}' for t in polls[0])} s); "
              f"load average {os.getloadavg()[0]:.1f}")
        # the target (<= 0.2 s) is a timed figure for an idle machine; a test on a shared one checks the
        # page follows within a bound that load cannot break, and prints the time
        assert frame <= 2.0
        assert screen <= 2.0
        assert viewer.frames_sent == 0
    finally:
        driver.quit()
        viewer.close()


TINY = ["--preset", "none", "--factor", "1", "--netdepth", "2", "--netwidth", "16", "--N_samples", "8", "--N_rand", "64",
        "--no_lpips", "--quiet", "--kappa_every", "0", "--multires", "4", "--multires_views", "2", "--view_width", "8"]


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    return float(-10.0 * np.log10(max(np.mean((a - b) ** 2), 1e-12)))


def test_run_with_splats_shows_splats_then_the_exact_frame(tmp_path, monkeypatch):
    """One run and its splats (in the capture's frame): after a move the splats show at once (the
    red one where its centre projects), once the camera rests the field's exact frame replaces
    them (PSNR >= 35 dB against the run's rendering of that camera; a page with splats on it would
    fail that)."""
    from enerf.synthetic.scene import make_synthetic_scene

    splat_modules(monkeypatch)
    scene_dir = make_synthetic_scene(tmp_path / "scene", n_views=8, width=64, height=48, seed=1)
    assert main(["train", "--datadir", str(scene_dir), "--basedir", str(tmp_path / "runs"), "--expname", "r",
                 "--iters", "30", *TINY]) == 0
    ckpt = tmp_path / "runs" / "r" / "checkpoints" / "latest.pt"
    from enerf.loaded_run import load_run

    run = load_run(ckpt, Path("data"), task="nerf", images=False)
    pose = run.scene.poses[int(run.scene.i_test[0])].astype(np.float64)
    # splats in the scene frame: a red one ahead of the camera, blue-green ones behind it; written in the capture's frame
    depth = 2.0 * float(run.scene.bounds.min())
    right, up, back = (pose[:3, k] / np.linalg.norm(pose[:3, k]) for k in range(3))
    ahead = pose[:3, 3] - depth * back
    splats = _splat_set(n=40, seed=2)
    size = 0.03 * depth
    u = splats["means"]
    local = ahead + 10 * size * (u[:, :1] * right + u[:, 1:2] * up) - (1.5 + u[:, 2:]) * 5 * size * back
    local[0] = ahead
    m = np.asarray(run.scene.scene_to_world, np.float64)
    scale = np.cbrt(np.linalg.det(m[:3, :3]))
    splats["means"] = local @ m[:3, :3].T + m[:3, 3]
    splats["log_scales"] = np.log(np.full((40, 3), size * scale))
    splats["quats"] = np.tile([1.0, 0.0, 0.0, 0.0], (40, 1))  # isotropic: any rotation
    write_3dgs_ply(tmp_path / "runs" / "r" / "splats.ply", **splats)  # <run>/splats.ply: found without --splats
    viewer = open_view([ckpt], ViewerConfig(port=0, max_width=2048, rest_seconds=4.0))
    driver = _driver(page=None, window=(560, 360))
    try:
        assert viewer.splat_layer.splats is not None and viewer.splat_layer.note == ""
        driver.get(viewer.url)
        browser = _connected(viewer)
        viewer.cameras_root.visible = False
        time.sleep(1.0)
        driver.execute_script(HIDE_PANEL)
        for shift in (0.0, 0.3):  # a held-out camera, then one moved sideways
            c2w = pose[:3, :4].copy()
            c2w[:3, 3] += shift * depth * right
            fov = 2 * np.arctan(0.5 * run.scene.height / run.scene.focal)
            before = viewer.frames_sent
            _settle(browser.client, c2w, fov)  # within the rest time: the splats show
            shot = _shot(driver)
            assert viewer.frames_sent == before and browser.showing_splats
            h, w = shot.shape[:2]
            found = _red(shot)
            assert found is not None
            np.testing.assert_allclose(found[:2], _project(ahead, c2w, fov, w, h), atol=4.0)
            moving = shot
            info = _until(lambda: (b := browser.last) is not None and b.final and b.version == browser.version
                          and np.abs(b.c2w - c2w).max() < 1e-5 and b, 240, "no exact frame")
            time.sleep(1.5)
            shot = _shot(driver)
            assert not browser.showing_splats and not browser.splats.visible
            expected = render_camera(run, info.c2w, info.width, info.height, info.focal)
            expected = as_shown(expected, driver, shot.shape)  # a frame at the canvas' lowered resolution too
            assert fills(info.width, info.height, shot.shape)
            assert info.focal == pytest.approx(focal_from_fov(fov, info.height), rel=1e-3)
            keep = np.ones((h, w), bool)
            keep[-80:, :80] = False  # the axes gizmo
            assert _psnr(shot[keep], expected[keep]) >= 35.0
            assert _psnr(moving[keep], expected[keep]) < 25.0  # the comparison tells the splats from the field
    finally:
        driver.quit()
        viewer.close()
