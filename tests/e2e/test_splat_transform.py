"""enerf's .spz, .ply and .splat read by the ecosystem's own tool, PlayCanvas' ``splat-transform``
(Niantic's SPZ code compiled to WebAssembly inside): each converted to a PLY by it and read back
with plyfile holds enerf's splats within the format's steps (the same axes: SPZ's RUB flipped
back), and an SPZ it writes (version 3) reads in enerf as the PLY it came from; its own viewer page
(SuperSplat's) shows a file of enerf's in headless Chromium, with the file's -y axis up.

The tool is looked for at $ENERF_SPLAT_TRANSFORM, then in the gitignored ``.npm/`` folder that
``.ci/run`` installs it into (``npm install --prefix .npm @playcanvas/splat-transform``), then on
PATH; without it (or without node) the test skips, saying so."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from enerf.splats import Splats
from enerf.splats.files import read_splat_file, write_splat_file

plyfile = pytest.importorskip("plyfile")
ROOT = Path(__file__).resolve().parents[2]


def _tool() -> str | None:
    for candidate in (os.environ.get("ENERF_SPLAT_TRANSFORM"), ROOT / ".npm" / "node_modules" / ".bin" / "splat-transform",
                      shutil.which("splat-transform")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


TOOL = _tool()
pytestmark = pytest.mark.skipif(TOOL is None or shutil.which("node") is None,
                                reason="splat-transform not found (npm install --prefix .npm @playcanvas/splat-transform, "
                                       "or set ENERF_SPLAT_TRANSFORM) or node missing")


def _convert(src: Path, dst: Path, *flags: str) -> None:
    done = subprocess.run([TOOL, "-q", "-w", str(src), *flags, str(dst)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and dst.is_file(), done.stderr[-2000:]


def _columns(path: Path, *names: str) -> np.ndarray:
    v = plyfile.PlyData.read(str(path))["vertex"].data
    return np.stack([np.asarray(v[n], np.float64) for n in names], 1)


def test_splat_transform_reads_what_enerf_writes(tmp_path):
    g = torch.Generator().manual_seed(2)
    n = 300
    splats = Splats(torch.randn(n, 3, generator=g) * 3, torch.randn(n, 3, generator=g) * 0.5 - 3,
                    torch.randn(n, 4, generator=g), torch.randn(n, generator=g), torch.randn(n, 4, 3, generator=g) * 0.3)
    for suffix in (".ply", ".spz", ".splat"):
        write_splat_file(tmp_path / f"e{suffix}", splats, "world")
        _convert(tmp_path / f"e{suffix}", tmp_path / f"from{suffix}.ply")
    ply = _columns(tmp_path / "from.ply.ply", "x", "y", "z")
    np.testing.assert_allclose(ply, splats.means.numpy(), atol=1e-6)
    spz = _columns(tmp_path / "from.spz.ply", "x", "y", "z", "f_dc_0", "f_rest_0", "f_rest_3", "scale_0")
    size = np.percentile(np.exp(splats.log_scales.double().numpy()).max(1), 25)  # SPZ's step: at most size / 8
    np.testing.assert_allclose(spz[:, :3], splats.means.numpy(), atol=size / 16 + 1e-6)  # y and z not flipped
    np.testing.assert_allclose(spz[:, 3], splats.sh[:, 0, 0].numpy(), atol=0.5 / 38.25 + 1e-4)
    np.testing.assert_allclose(spz[:, 4:6], splats.sh[:, 1, :2].numpy().clip(-1, 1), atol=4.5 / 128)  # f_rest_0, f_rest_3: red's, green's first
    np.testing.assert_allclose(spz[:, 6], splats.log_scales[:, 0].numpy(), atol=1 / 32 + 1e-4)
    dotsplat = _columns(tmp_path / "from.splat.ply", "x", "y", "z")
    assert sorted(map(tuple, dotsplat)) == sorted(map(tuple, splats.means.numpy().astype(np.float64)))

    _convert(tmp_path / "e.ply", tmp_path / "theirs.spz", "--spz-version", "3")
    theirs, frame = read_splat_file(tmp_path / "theirs.spz")
    assert frame is None and len(theirs) == n and theirs.degree == 1
    np.testing.assert_allclose(theirs.means.numpy(), splats.means.numpy(), atol=0.5 / 4096 + 1e-6)
    np.testing.assert_allclose(theirs.sh[:, 1:].numpy(), splats.sh[:, 1:].numpy().clip(-1, 1), atol=4.5 / 128)


def _red_over_blue(image: np.ndarray) -> tuple[float, float]:
    """Mean row of the red pixels and of the blue ones in an [H, W, 3] screenshot (0..255)."""
    rgb = image[..., :3].astype(np.float64)
    red = (rgb[..., 0] > 120) & (rgb[..., 0] > 2 * rgb[..., 1:].max(-1))
    blue = (rgb[..., 2] > 120) & (rgb[..., 2] > 2 * rgb[..., :2].max(-1))
    assert red.sum() > 50 and blue.sum() > 50, "both blobs should be in the picture"
    return float(np.nonzero(red)[0].mean()), float(np.nonzero(blue)[0].mean())


def test_supersplat_page_shows_the_file_with_minus_y_up(tmp_path):
    """splat-transform's own viewer page (``-g cpu F.ply F.html``: SuperSplat's viewer and the splats
    compressed as SOG, in one file) opened in headless Chromium draws a file of enerf's with the
    file's -y axis up, as 3DGS and COLMAP have it (docs/splats.md: which frame is upright where):
    a red blob at -y and a blue one at +y show red above blue, and enerf's own page, given a camera
    whose up is -y, shows them the same way."""
    splat_page = pytest.importorskip("benchmarks.splat_page")
    if splat_page.CHROMIUM is None or splat_page.CHROMEDRIVER is None:
        pytest.skip("no headless browser: apt-get install -y chromium chromium-driver")
    import imageio.v3 as iio

    from enerf.splats.gaussians import rgb_to_sh0
    from enerf.splats.html import write_html

    g = torch.Generator().manual_seed(5)
    n = 400
    means = torch.randn(n, 3, generator=g) * 0.15
    means[:, 1] += torch.where(torch.arange(n) < n // 2, -1.0, 1.0)  # red at -y, blue at +y
    rgb = torch.where((torch.arange(n) < n // 2)[:, None], torch.tensor([0.9, 0.1, 0.1]), torch.tensor([0.1, 0.1, 0.9]))
    splats = Splats(means, torch.full((n, 3), -2.5), torch.tensor([[1.0, 0, 0, 0]]).repeat(n, 1),
                    torch.full((n,), 3.0), rgb_to_sh0(rgb)[:, None])
    write_splat_file(tmp_path / "blobs.ply", splats, "world")
    _convert(tmp_path / "blobs.ply", tmp_path / "supersplat.html", "-g", "cpu")
    c2w = np.diag([1.0, -1.0, -1.0, 1.0])  # OpenGL axes: up -y, looking along +z
    c2w[:3, 3] = [0.0, 0.0, -6.0]
    write_html(splats, tmp_path / "enerf.html", "blobs", [{"c2w": c2w, "fov_y": 50.0}])

    driver = splat_page.open_chromium(640, 480)
    try:
        splat_page.open_page(driver, tmp_path / "enerf.html")
        driver.execute_script("window.enerfSplat.showHud(false)")
        red, blue = _red_over_blue(iio.imread(driver.get_screenshot_as_png()))
        assert red < blue - 50, f"enerf's page: red at row {red:.0f}, blue at row {blue:.0f}"
        driver.get((tmp_path / "supersplat.html").as_uri())
        for _ in range(120):  # its viewer loads and draws asynchronously: wait until both blobs show
            time.sleep(0.5)
            try:
                red, blue = _red_over_blue(iio.imread(driver.get_screenshot_as_png()))
                break
            except AssertionError:
                continue
        else:
            pytest.fail("SuperSplat's page drew neither blob in 60 s")
        assert red < blue - 50, f"SuperSplat's page: red at row {red:.0f}, blue at row {blue:.0f}"
    finally:
        driver.quit()
