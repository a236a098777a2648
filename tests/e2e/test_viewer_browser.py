"""The viewer in a real browser: headless Chromium (Debian's chromium + chromium-driver, driven
by selenium) opens the page, the test sets the camera from Python, waits for the finest frame and
takes a screenshot, then compares it with ``enerf render --path`` of the same camera; split
view; ``enerf train --viewer`` with a browser that connects and leaves, against the same run
without a viewer.

Skips (with the reason) where viser, selenium, chromium or chromedriver is missing:
``apt-get install -y chromium chromium-driver`` and ``pip install -e ".[viewer,test]"``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from enerf.cli import main

pytest.importorskip("viser", reason="the viewer extra (viser) is not installed: pip install -e '.[viewer]'")
pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.skip("no headless browser: apt-get install -y chromium chromium-driver", allow_module_level=True)

from enerf.config import ViewerConfig  # noqa: E402
from helpers import camera_path_dict  # noqa: E402
from enerf.loaded_run import load_run  # noqa: E402
from enerf.viewer.app import open_view  # noqa: E402
from enerf.viewer.render import fov_from_focal, render_camera  # noqa: E402
from enerf.viewer.scene import initial_view, viser_from_c2w  # noqa: E402
from browser_frames import as_shown, fills  # noqa: E402

WINDOW = (560, 360)  # headless Chromium's canvas is then 560 x ~220 pixels
GIZMO = 80  # the axes gizmo in the canvas' bottom-left corner, left out of comparisons
SCREENSHOT_DIR = os.environ.get("ENERF_VIEWER_SCREENSHOTS")  # keep the screenshots there (docs/img)

TINY = ["--preset", "none", "--factor", "1", "--netdepth", "2", "--netwidth", "16", "--N_samples", "8", "--N_rand", "64", "--no_lpips",
        "--quiet", "--kappa_every", "0", "--multires", "4", "--multires_views", "2", "--view_width", "8"]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    return float(-10.0 * np.log10(max(np.mean((a - b) ** 2), 1e-12)))


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--force-device-scale-factor=1",
                f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two tiny runs (vanilla, row) of one synthetic forward-facing scene, 64 x 48 pixels."""
    from enerf.synthetic.scene import make_synthetic_scene

    root = tmp_path_factory.mktemp("viewer_browser")
    scene = make_synthetic_scene(root / "scene", n_views=8, width=64, height=48, seed=1)
    out = {"root": root, "scene": scene}
    for name, cond in (("vanilla", "none"), ("row", "row")):
        argv = ["train", "--datadir", str(scene), "--basedir", str(root / "runs"), "--expname", name, "--iters", "30",
                "--conditioning", cond, *TINY]
        assert main(argv) == 0
        out[name] = root / "runs" / name / "checkpoints" / "latest.pt"
    return out


@pytest.fixture(scope="module")
def browser():
    driver = _browser()
    yield driver
    driver.quit()


def _screenshot(driver, hide_panel: bool = True) -> np.ndarray:
    """The page as float RGB [H, W, 3]; with ``hide_panel`` everything but the 3D canvas is hidden."""
    if hide_panel:
        driver.execute_script("for (const el of document.body.querySelectorAll('*')) {"
                              "  if (el.tagName !== 'CANVAS' && !el.querySelector('canvas'))"
                              "    el.style.visibility = 'hidden'; }")
    time.sleep(0.5)
    return iio.imread(driver.get_screenshot_as_png())[..., :3].astype(np.float32) / 255.0


def _show(viewer, driver, c2w: np.ndarray, cameras: bool):
    """Point the browser's camera at ``c2w`` and wait for the finest frame of that camera. The page's
    own first camera may reach the server after ours and replace it: the camera is set again
    whenever the page reports another one."""
    first = viewer.wait_for_frame(final=False, timeout=120)
    viewer.cameras_root.visible = cameras
    browser = next(iter(viewer.browsers().values()))
    wxyz, position = viser_from_c2w(c2w)
    aimed = -np.inf
    deadline = time.perf_counter() + 240
    while time.perf_counter() < deadline:
        info = browser.last
        if info is not None and info.final and info.version > first.version and info.version == browser.version \
                and np.abs(info.c2w - np.asarray(c2w)[:3, :4]).max() < 1e-5:
            time.sleep(1.5)  # the browser draws the frame
            return info
        away = np.abs(np.asarray(browser.client.camera.position) - position).max() > 1e-4
        if time.perf_counter() - aimed > 5.0 and (away or aimed == -np.inf):
            browser.client.camera.wxyz, browser.client.camera.position = wxyz, position
            aimed = time.perf_counter()
        time.sleep(0.1)
    raise TimeoutError("the viewer never rendered the camera the test set")


def _offline(ckpt: Path, info, folder: Path, path: Path | None = None) -> np.ndarray:
    """``enerf render --path FILE`` of ``path``, or of the camera and frame size the viewer showed."""
    if path is None:
        path = folder / "camera.json"
        path.write_text(json.dumps(camera_path_dict(info.c2w[None], 1, info.width, info.height,
                                                    float(np.degrees(fov_from_focal(info.focal, info.height))))))
    argv = ["render", "--ckpt", str(ckpt), "--path", str(path), "--png", "--quiet", "--out", str(folder / "v")]
    assert main(argv) == 0
    return iio.imread(folder / "v" / "frames" / "rgb_0000.png").astype(np.float32) / 255.0


def _keep(name: str, image: np.ndarray) -> None:
    if SCREENSHOT_DIR:
        Path(SCREENSHOT_DIR).mkdir(parents=True, exist_ok=True)
        iio.imwrite(Path(SCREENSHOT_DIR) / name, (np.clip(image, 0, 1) * 255 + 0.5).astype(np.uint8))


def test_browser_frame_equals_offline_render(runs, browser, tmp_path):
    viewer = open_view([runs["vanilla"]], ViewerConfig(port=0, max_width=2048))
    try:
        browser.get(viewer.url)
        scene = viewer.runs[0].scene
        pose = scene.poses[int(scene.i_test[0])]
        info = _show(viewer, browser, pose, cameras=False)
        shot = _screenshot(browser)
        assert fills(info.width, info.height, shot.shape)  # the finest frame fills the canvas (1:1 unless viser lowered its resolution)
        # the panel's keyframe buttons: this view as a one-keyframe camera path, rendered by enerf render
        viewer.add_keyframe(next(iter(viewer.browsers().values())).client.camera)
        saved = viewer.save_path("browser_view.json", frames=1)
        assert saved == runs["vanilla"].parent.parent / "camera_paths" / "browser_view.json"
        expected = _offline(runs["vanilla"], info, tmp_path, saved)
        assert expected.shape[:2] == (info.height, info.width)
        expected = as_shown(expected, browser, shot.shape)
        keep = np.ones(shot.shape[:2], bool)
        keep[-GIZMO:, :GIZMO] = False
        assert shot[keep].std() > 0.01  # a picture, not a blank page
        matched = psnr(shot[keep], expected[keep])
        assert matched >= 35.0
        # the other run's field from the same camera does not match: the comparison can tell fields apart
        other = load_run(runs["row"], Path("data"), task="nerf")
        control = as_shown(render_camera(other, info.c2w, info.width, info.height, info.focal), browser, shot.shape)
        assert psnr(shot[keep], control[keep]) < matched - 3.0
    finally:
        viewer.close()


def test_frustums_are_drawn(runs, browser):
    viewer = open_view([runs["vanilla"]], ViewerConfig(port=0, max_width=256))
    try:
        browser.get(viewer.url)
        n_images = len(list((runs["scene"] / "images").glob("*.png")))
        scene = viewer.runs[0].scene
        assert len(viewer.frustum_handles) == n_images == 8
        assert sum("/test/" in h.name for h in viewer.frustum_handles) == len(scene.i_test)
        back = scene.poses[int(scene.i_train[0])].astype(np.float64).copy()
        back[:3, 3] += 3.0 * back[:3, 2]  # step back along the camera's back axis: the cameras come into view
        _show(viewer, browser, back, cameras=True)
        with_cameras = _screenshot(browser)
        viewer.cameras_root.visible = False
        time.sleep(1.0)
        without = _screenshot(browser)
        changed = np.abs(with_cameras - without).max(axis=-1) > 0.1
        assert changed.mean() > 0.002  # frustum lines are on the page
        _keep("frustums.png", with_cameras)
    finally:
        viewer.close()


def test_split_view_shows_two_fields(runs, browser):
    viewer = open_view([runs["vanilla"], runs["row"]], ViewerConfig(port=0, max_width=2048, layout="split"))
    try:
        browser.get(viewer.url)
        a, b = (load_run(runs[k], Path("data"), task="nerf") for k in ("vanilla", "row"))
        pose = a.scene.poses[int(a.scene.i_test[0])]
        info = _show(viewer, browser, pose, cameras=False)
        shot = _screenshot(browser)
        _keep("split.png", shot)
        assert fills(info.width, info.height, shot.shape)
        img_a = as_shown(render_camera(a, info.c2w, info.width, info.height, info.focal), browser, shot.shape)
        img_b = as_shown(render_camera(b, info.c2w, info.width, info.height, info.focal), browser, shot.shape)
        h, w = shot.shape[:2]
        cut = w // 2
        rows = slice(20, h - GIZMO)  # below the labels, above the gizmo
        left, right = (slice(0, cut - 3), slice(cut + 3, w))
        assert psnr(img_a[rows, left], img_b[rows, left]) < 30.0  # the two fields differ here
        assert psnr(shot[rows, left], img_a[rows, left]) >= 35.0
        assert psnr(shot[rows, right], img_b[rows, right]) >= 35.0
        assert psnr(shot[rows, left], img_b[rows, left]) < psnr(shot[rows, left], img_a[rows, left]) - 3.0
    finally:
        viewer.close()


def _by_label(driver, label: str):
    """The input a panel label names (the first after it)."""
    from selenium.webdriver.common.by import By

    return driver.find_element(By.XPATH, f"//label[normalize-space(.)='{label}']/following::input[1]")


def _click(driver, text: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.XPATH, f"//button[normalize-space(.)='{text}']").click()


def _type(driver, label: str, value: str) -> None:
    from selenium.webdriver.common.keys import Keys

    box = _by_label(driver, label)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(value, Keys.TAB)


def _choose(driver, label: str, option: str) -> None:
    from selenium.webdriver.common.by import By

    _by_label(driver, label).click()
    time.sleep(0.2)
    driver.find_element(By.XPATH, f"//*[@role='option' and normalize-space(.)='{option}']").click()


def _until(check, timeout: float = 60.0, what: str = "the page") -> None:
    deadline = time.perf_counter() + timeout
    while not check():
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{what} did not answer within {timeout:.0f} s")
        time.sleep(0.05)


def _aim(viewer, c2w: np.ndarray, fov_deg: float):
    """Point the browser's camera at ``c2w`` with field of view ``fov_deg`` and wait until the
    browser reports that camera back."""
    camera = next(iter(viewer.browsers().values())).client.camera
    wxyz, position = viser_from_c2w(c2w)
    camera.fov, camera.wxyz, camera.position = float(np.radians(fov_deg)), wxyz, position
    _until(lambda: np.abs(np.asarray(camera.position) - position).max() < 1e-4
           and abs(camera.fov - np.radians(fov_deg)) < 1e-4, what="the camera")
    time.sleep(0.3)


def test_camera_path_editor(runs, browser):
    """The panel's camera-path controls, clicked and typed in the page: three keyframes added from
    known cameras, the second deleted, the last moved up, a field of view and a duration typed,
    the smoothness set, saved in both formats and loaded back; the files hold exactly those
    cameras (an independent computation: the poses set, the typed values), nerfstudio's frames
    are the enerf path's frames, and the preview flies the browser's camera to the last keyframe."""
    from enerf.cameras.paths import keyframe_path

    viewer = open_view([runs["vanilla"]], ViewerConfig(port=0, max_width=64))
    try:
        browser.get(viewer.url)
        viewer.wait_for_frame(final=False, timeout=120)
        from selenium.webdriver.common.by import By

        browser.find_element(By.XPATH, "//*[normalize-space(text())='Camera path']").click()
        scene = viewer.runs[0].scene
        # the first view: just behind the first training camera, looking at the scene; that camera's frustum hidden
        start = initial_view(viewer.runs[0])
        camera = next(iter(viewer.browsers().values())).client.camera
        np.testing.assert_allclose(camera.position, start["position"], atol=1e-4)
        hidden = [h.name for h in viewer.frustum_handles if not h.visible]
        assert hidden == [f"/cameras/train/{int(scene.i_train[0]):03d}"]
        poses = []
        for k, fov in enumerate((40.0, 50.0, 60.0)):
            pose = scene.poses[int(scene.i_train[k + 1])].astype(np.float64)[:3, :4].copy()
            pose[:3, 3] += 0.5 * pose[:3, 2]  # behind that training camera
            poses.append(pose)
            _aim(viewer, pose, fov)
            _click(browser, "Add keyframe (this view)")
            _until(lambda: len(viewer.editor.keys) == k + 1, what="Add keyframe")
        _choose(browser, "Keyframe", "2")
        _until(lambda: viewer.editor.selected == 1, what="the keyframe list")
        _click(browser, "Delete keyframe")  # keyframes 1, 3 (3 chosen)
        _until(lambda: len(viewer.editor.keys) == 2, what="Delete")
        _click(browser, "Move up")  # 3, 1
        _until(lambda: np.allclose(viewer.editor.keys.keys[0].c2w, poses[2], atol=1e-4), what="Move up")
        _type(browser, "FOV (deg)", "72.5")
        _type(browser, "Seconds to next", "0.75")
        _until(lambda: viewer.editor.keys.keys[0].seconds == 0.75 and viewer.editor.keys.keys[0].fov == 72.5,
               what="the keyframe's fields")
        _type(browser, "FPS", "8")
        _until(lambda: viewer.editor.keys.fps == 8.0, what="FPS")
        expected_poses, expected_fovs = np.stack([poses[2], poses[0]]), np.array([72.5, 40.0])
        folder = runs["vanilla"].parent.parent / "camera_paths"
        for fmt, name in (("nerfstudio", "ns.json"), ("enerf", "mine.json")):
            _choose(browser, "Format", fmt)
            _type(browser, "File name", name)
            _click(browser, "Save camera path")
            _until(lambda: (folder / name).is_file(), what="Save")
        mine = json.loads((folder / "mine.json").read_text())
        np.testing.assert_allclose([k["c2w"] for k in mine["keyframes"]], expected_poses, atol=1e-4)
        np.testing.assert_allclose([k["fov_y"] for k in mine["keyframes"]], expected_fovs, atol=1e-4)
        assert mine["keyframes"][0]["seconds"] == 0.75 and mine["frames"] == 0.75 * 8 + 1
        ns = json.loads((folder / "ns.json").read_text())
        np.testing.assert_allclose([np.reshape(k["matrix"], (4, 4))[:3] for k in ns["keyframes"]], expected_poses,
                                   atol=1e-4)
        assert [k["fov"] for k in ns["keyframes"]] == pytest.approx(expected_fovs.tolist())
        frames, fovs = keyframe_path(expected_poses, 7, [0.75, 1.0], expected_fovs, 1.0)
        np.testing.assert_allclose([np.reshape(c["camera_to_world"], (4, 4))[:3] for c in ns["camera_path"]], frames,
                                   atol=1e-4)
        np.testing.assert_allclose([c["fov"] for c in ns["camera_path"]], fovs, atol=1e-4)
        assert np.linspace(72.5, 40.0, 7) == pytest.approx(fovs, abs=15)  # the fov runs from one keyframe's to the other's
        # loading the nerfstudio file into a cleared editor gives the same keyframes back
        _click(browser, "Clear keyframes")
        _until(lambda: len(viewer.editor.keys) == 0, what="Clear")
        _type(browser, "File name", "ns.json")
        _click(browser, "Load camera path")
        _until(lambda: len(viewer.editor.keys) == 2, what="Load")
        loaded = viewer.editor.keys
        np.testing.assert_allclose([k.c2w for k in loaded.keys], expected_poses, atol=1e-4)
        assert [k.fov for k in loaded.keys] == pytest.approx(expected_fovs.tolist())
        assert loaded.keys[0].seconds == 0.75 and loaded.fps == 8.0
        # the preview flies the browser's camera along the path, to the last keyframe
        sent = viewer.frames_sent
        _click(browser, "Preview path")
        _until(lambda: np.abs(np.asarray(camera.position) - expected_poses[-1][:3, 3]).max() < 1e-4,
               what="the preview")
        assert abs(np.degrees(camera.fov) - 40.0) < 1e-3
        _until(lambda: viewer.frames_sent > sent, what="rendering during the preview")
    finally:
        viewer.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_training_with_a_browser_watching_gives_the_same_run(runs, tmp_path, capsys):
    """``enerf train --viewer`` with a browser that connects, watches and disconnects mid-run ends
    with the same held-out PSNR (to the last digit) and weights as the run without a viewer."""
    import torch

    port = _free_port()
    # long enough that the browser (started once the port answers) connects while the run trains
    argv = ["train", "--datadir", str(runs["scene"]), "--basedir", str(tmp_path), "--iters", "1500", *TINY]
    watched: dict = {}

    def watch() -> None:
        deadline = time.perf_counter() + 120
        while time.perf_counter() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        driver = _browser()
        try:
            driver.get(f"http://127.0.0.1:{port}")
            time.sleep(8.0)
        finally:
            driver.quit()  # the browser leaves while the run trains on
        watched["left"] = True

    thread = threading.Thread(target=watch)
    thread.start()
    assert main([*argv, "--expname", "watched", "--viewer", "--viewer_port", str(port),
                 "--viewer_render_share", "0.5"]) == 0
    thread.join()
    out = capsys.readouterr().out
    sent = int(out.split("the viewer sent ")[1].split(" frames")[0])
    assert watched.get("left") and sent >= 1
    assert main([*argv, "--expname", "plain"]) == 0
    m_watched = json.loads((tmp_path / "watched" / "metrics.json").read_text())
    m_plain = json.loads((tmp_path / "plain" / "metrics.json").read_text())
    assert m_watched["psnr"] == m_plain["psnr"]
    wa = torch.load(tmp_path / "watched" / "checkpoints" / "latest.pt", weights_only=False)["fields"]
    wb = torch.load(tmp_path / "plain" / "checkpoints" / "latest.pt", weights_only=False)["fields"]
    assert all(torch.equal(wa[n][k], wb[n][k]) for n in wa for k in wa[n])
