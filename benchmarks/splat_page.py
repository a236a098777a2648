"""How fast the exported splat page (``enerf.splats.html``) follows a camera move in headless
Chromium with software WebGL (SwiftShader), in a 640 x 480 window.

    python -m benchmarks.splat_page --page scene.html --record benchmarks/splat_page.json
    python -m benchmarks.splat_page --synthetic 300000 --record benchmarks/splat_page.json

``--synthetic N`` writes a page of N random Gaussians first (centres in a unit ball, scales
log-normal around 0.01, i.e. about 1.7 px at the start camera 3 units away with a 50 degree fov,
random colours with SH band 1, opacities 0.2 to 0.95). The page's own start camera is then orbited
``--moves`` times around its target (360 / moves degrees each, by mouse drags, or with ``--input hook``
through the page's test hook); the first ``--full_frames`` moves wait for the full frame, the others follow at once. Per move: the time from the input event (its own time stamp, so the time it waited for the page counts;
with the hook, from setting the camera) to the end of the first frame drawn for it
(``window.enerfSplat.lastMoveMs``: the depth sort, the colour update, the draw and a 1-pixel read
that waits for it; on a slow renderer that frame is the page's preview, the most important splats at
half resolution sized to a 0.1 s budget, and the record says how many it drew), and to the end of the
full frame (``lastFullMs``; ``lastFullWorkMs`` is the work in it, without the pauses the page leaves
for input). The record: each move's times, their medians and maxima, the times from opening the page
to its first and first full frame, splat count, page size, Chromium's version and WebGL renderer, the
load average before and after. Target: a move answered within 0.2 s with about 300,000 splats.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import command_line, git_commit, load_average, machine, write_record

# what the record's figures depend on (benchmarks/pages: a later commit to these makes it stale)
DEPENDS = ["enerf/splats/html.py", "enerf/splats/pagepack.py", "enerf/splats/decode.js", "enerf/splats/page.js",
           "enerf/splats/renderer.js"]

__all__ = ["CHROMIUM", "CHROMEDRIVER", "open_chromium", "open_page", "move_and_wait", "input_and_wait", "drag_and_wait", "synthetic_splats"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
CHROMEDRIVER = shutil.which("chromedriver")
# SwiftShader, opted in explicitly (Chromium no longer falls back to software WebGL by itself)
GL_FLAGS = ("--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--ignore-gpu-blocklist")


def open_chromium(width: int = 640, height: int = 480):
    """Headless Chromium (selenium) whose page area is ``width`` x ``height`` CSS pixels at scale 1."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--force-device-scale-factor=1",
                f"--window-size={width},{height}", *GL_FLAGS):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    outer = driver.get_window_size()
    driver.set_window_size(outer["width"] + width - inner[0], outer["height"] + height - inner[1])
    return driver


def open_page(driver, page: Path, full: bool = True, timeout: float = 300.0) -> dict:
    """Open ``page`` (file://) and wait for its first frame and (``full``) its first full frame.

    Returns:
        dict: first_frame_s, full_frame_s (None without ``full``): seconds from opening the page
    """
    start = time.perf_counter()
    driver.get(Path(page).resolve().as_uri())
    out = {"first_frame_s": None, "full_frame_s": None}
    while time.perf_counter() - start < timeout:
        ready, fulls, error = driver.execute_script(
            "const h = window.enerfSplat; return h ? [h.ready, h.fullFrames, h.error] : [false, 0, null]")
        if error:
            raise RuntimeError(f"the page failed: {error}")
        if ready and out["first_frame_s"] is None:
            out["first_frame_s"] = time.perf_counter() - start
        if ready and (not full or fulls > 0):
            if full:
                out["full_frame_s"] = time.perf_counter() - start
            return out
        time.sleep(0.02)
    raise TimeoutError(f"no frame from {page} in {timeout} s")


_COUNTERS = ["lastMoveMs", "lastFrameMs", "lastFullMs", "lastFullWorkMs", "quality", "framesDrawn", "fullFrames",
             "moveId", "fullMoveId", "width", "height", "focal", "drawn", "previewSplats", "previewScale"]
_WAIT = """
    const h = window.enerfSplat, now = () => Object.fromEntries(names.map((k) => [k, h[k]]));
    let first = null;
    (function wait() {
      if (first === null && h.moveId > moveId) first = now();
      if (first !== null && (!full || h.fullMoveId >= first.moveId)) done(full ? {...first, full: now()} : first);
      else setTimeout(wait, 1);
    })();"""


def move_and_wait(driver, c2w: np.ndarray | int | None, full: bool = False, timeout: float = 300.0) -> dict:
    """Set the page's camera to ``c2w`` [4, 4] (an int: the page's camera of that index; None: leave
    it) and wait for the first frame drawn after it and, with ``full``, for the full frame. Returns the
    hook's counters at the first frame (lastMoveMs, lastFrameMs, quality, framesDrawn, width, height,
    focal, drawn, previewSplats, previewScale), with ``full``: and at the full frame under "full"
    (lastFullMs, lastFullWorkMs, ...)."""
    driver.set_script_timeout(timeout)
    camera = c2w if c2w is None or isinstance(c2w, int) else np.asarray(c2w, dtype=np.float64).reshape(-1).tolist()
    return driver.execute_async_script("""
        const [camera, full, names, done] = arguments, moveId = window.enerfSplat.moveId;
        if (typeof camera === "number") window.enerfSplat.goToCamera(camera);
        else if (camera !== null) window.enerfSplat.setCamera(camera);""" + _WAIT, camera, full, _COUNTERS)


def input_and_wait(driver, perform, full: bool = False, timeout: float = 300.0) -> dict:
    """Run ``perform()`` (selenium input actions on the page) and wait for the first frame drawn
    after the move it makes (and, with ``full``, the full frame), as ``move_and_wait`` does; the
    page times the move from the input event's own time stamp."""
    driver.set_script_timeout(timeout)
    move_id = driver.execute_script("return window.enerfSplat.moveId")
    perform()
    return driver.execute_async_script("""
        const [moveId, full, names, done] = arguments;""" + _WAIT, move_id, full, _COUNTERS)


def drag_and_wait(driver, dx: int, dy: int = 0, full: bool = False, timeout: float = 300.0) -> dict:
    """Drag the mouse across the page's canvas by (dx, dy) pixels, centred on it (an orbit, as a
    reader does it) and wait as ``input_and_wait`` does."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    canvas = driver.find_element(By.ID, "canvas")
    return input_and_wait(driver, lambda: ActionChains(driver, duration=0).move_to_element_with_offset(
        canvas, -(dx // 2), -(dy // 2)).click_and_hold().move_by_offset(dx, dy).release().perform(), full, timeout)


def synthetic_splats(n: int, seed: int = 0):
    """``n`` random Gaussians with SH band 1 in a unit ball (the benchmark's scene)."""
    import torch

    from enerf.splats.gaussians import Splats, rgb_to_sh0

    g = torch.Generator().manual_seed(seed)
    direction = torch.nn.functional.normalize(torch.randn(n, 3, generator=g), dim=-1)
    means = direction * torch.rand(n, 1, generator=g) ** (1 / 3)
    log_scales = np.log(0.01) + 0.5 * torch.randn(n, 3, generator=g)
    quats = torch.randn(n, 4, generator=g)
    opacity = 0.2 + 0.75 * torch.rand(n, generator=g)
    sh = torch.cat([rgb_to_sh0(torch.rand(n, 1, 3, generator=g)), 0.2 * torch.randn(n, 3, 3, generator=g)], 1)
    return Splats(means, log_scales, quats, torch.logit(opacity), sh)


def _rotation_about(axis: np.ndarray, angle: float) -> np.ndarray:
    k = axis / np.linalg.norm(axis)
    cross = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(angle) * cross + (1 - np.cos(angle)) * cross @ cross


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", type=Path, help="an exported page (enerf export html)")
    parser.add_argument("--synthetic", type=int, help="write a page of this many random splats first")
    parser.add_argument("--out", type=Path, default=Path("runs/splat_page/synthetic.html"),
                        help="where --synthetic writes its page")
    parser.add_argument("--moves", type=int, default=10)
    parser.add_argument("--input", choices=["drag", "hook"], default="drag",
                        help="drag: mouse drags (timed from the input event); hook: window.enerfSplat.setCamera")
    parser.add_argument("--full_frames", type=int, default=2,
                        help="after this many of the moves, wait for the full frame too (the others follow at once)")
    parser.add_argument("--record", type=Path, help="write the JSON record here")
    args = parser.parse_args(argv)
    if (args.page is None) == (args.synthetic is None):
        parser.error("give one of --page and --synthetic")
    if args.input == "drag" and 2 * np.pi / args.moves / 0.005 > 600:
        parser.error("--input drag needs --moves 3 or more (a drag of 360 / moves degrees fits the 640-pixel window)")
    if CHROMIUM is None or CHROMEDRIVER is None:
        parser.error("no headless browser: apt-get install -y chromium chromium-driver")
    load_before = load_average()
    page = args.page
    if args.synthetic is not None:
        from enerf.splats.html import write_html

        args.out.parent.mkdir(parents=True, exist_ok=True)
        c2w = np.eye(4)
        c2w[2, 3] = 3.0
        write_html(synthetic_splats(args.synthetic), args.out, f"{args.synthetic} random splats",
                   [{"c2w": c2w, "fov_y": 50.0, "width": 640, "height": 480}])
        page = args.out
    version = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True).stdout.strip()
    driver = open_chromium(640, 480)
    try:
        opened = open_page(driver, page)
        info = driver.execute_script(
            "const gl = document.createElement('canvas').getContext('webgl2');"
            "const ext = gl.getExtension('WEBGL_debug_renderer_info');"
            "return [window.enerfSplat.count, null, gl.getParameter(ext ? ext.UNMASKED_RENDERER_WEBGL : gl.RENDERER)]")
        c2w0 = np.array(driver.execute_script("return window.enerfSplat.getCamera()")).reshape(4, 4)
        header = driver.execute_script("return JSON.parse(document.getElementById('enerf-header').textContent)")
        up, distance = np.array(header["up"]), header["cameras"][0]["distance"]
        target = c2w0[:3, 3] - c2w0[:3, 2] * distance
        moves = []
        for i in range(1, args.moves + 1):
            rot = _rotation_about(up, 2 * np.pi * i / args.moves)
            c2w = np.eye(4)
            c2w[:3, :3] = rot @ c2w0[:3, :3]
            c2w[:3, 3] = target + rot @ (c2w0[:3, 3] - target)
            start = time.perf_counter()
            if args.input == "drag":  # the page orbits 0.005 rad a pixel
                got = drag_and_wait(driver, -round(2 * np.pi / args.moves / 0.005), full=i <= args.full_frames)
            else:
                got = move_and_wait(driver, c2w, full=i <= args.full_frames)
            full = got.get("full", {})
            moves.append({"move_s": got["lastMoveMs"] / 1000, "frame_s": got["lastFrameMs"] / 1000,
                          "round_trip_s": time.perf_counter() - start, "first_frame": got["quality"],
                          "preview_splats": got["previewSplats"], "full_frame_s": full.get("lastFullMs", 0) / 1000 or None,
                          "full_frame_work_s": full.get("lastFullWorkMs", 0) / 1000 or None})
        size = [got["width"], got["height"]]
    finally:
        driver.quit()
    times = [m["move_s"] for m in moves]
    fulls = [m["full_frame_s"] for m in moves if m["full_frame_s"] is not None]
    record = {
        "command": command_line(), "machine": machine(), "commit": git_commit(), "depends": DEPENDS, "chromium": version,
        "webgl_renderer": info[2], "page": str(page), "page_bytes": Path(page).stat().st_size, "splats": info[0],
        "input": args.input, "canvas": size, "open_to_first_frame_s": opened["first_frame_s"], "open_to_full_frame_s": opened["full_frame_s"],
        "move_s_median": statistics.median(times), "move_s_max": max(times), "target_move_s": 0.2,
        "full_frame_s_median": statistics.median(fulls) if fulls else None,
        "round_trip_s_median": statistics.median(m["round_trip_s"] for m in moves),
        "moves": moves, "load_before": load_before, "load_after": load_average(),
    }
    print(f"{record['splats']} splats, page {record['page_bytes'] / 1e6:.1f} MB, canvas {size[0]} x {size[1]}: "
          f"move -> first frame median {record['move_s_median']:.3f} s, max {record['move_s_max']:.3f} s; "
          f"-> full frame median {record['full_frame_s_median'] or float('nan'):.2f} s "
          f"(load {record['load_before']} -> {record['load_after']}; {version}; {info[2]})")
    if args.record:
        write_record(args.record, record)
    return record


if __name__ == "__main__":
    main()
