"""The splat page's file (``enerf.splats.html``) without a browser: the embedded data decoded
(``decode_page_splats``) against the splats within each grid's step (rotations by scipy), which
splats are kept, the cameras' orbit targets and up vector, the page's self-containedness, and bad input."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from enerf.errors import ConfigError, DataError
from enerf.splats.gaussians import SH_C0, Splats
from enerf.splats.html import write_html
from splat_page_data import read_page


def _random_splats(n: int, degree: int = 1, seed: int = 0) -> Splats:
    g = torch.Generator().manual_seed(seed)
    return Splats(means=torch.randn(n, 3, generator=g) * 5, log_scales=torch.randn(n, 3, generator=g) - 3,
                  quats=torch.randn(n, 4, generator=g), opacity_logits=torch.randn(n, generator=g) * 2,
                  sh=torch.randn(n, (degree + 1) ** 2, 3, generator=g) * 0.3)


def test_the_embedded_data_decodes_to_the_splats(tmp_path):
    splats = _random_splats(300)
    band1 = torch.randn(10, 3, 3, generator=torch.Generator().manual_seed(1)) * 0.3
    splats.sh[:, 1:4] = band1[torch.arange(300) % 10]  # 10 distinct band-1 vectors: the codebook holds them all
    info = write_html(splats, tmp_path / "page.html", "a <scene> & more")
    text, header, got = read_page(tmp_path / "page.html")
    assert info["splats"] == header["count"] == 300 and header["sh_degree"] == 1
    assert info["bytes"] == (tmp_path / "page.html").stat().st_size
    # match each decoded splat to its own by its centre; each grid step bounds the error
    means = splats.means.numpy().astype(np.float64)
    index = [int(np.argmin(np.abs(means - m).sum(1))) for m in got["means"]]
    assert sorted(index) == list(range(300))
    pos = header["position"]
    assert pos["radius"] == pytest.approx(np.percentile(np.linalg.norm(means - np.median(means, 0), axis=1), 90))
    size = np.percentile(np.exp(splats.log_scales.numpy().astype(np.float64).max(1)), 25)  # the smaller splats' size
    assert pos["step"] == pytest.approx(size / 8 / pos["radius"]) and pos["bits"] <= 16
    # the grid of sign(x) log(1 + |x|), x = (m - c) / r: a centre moves by at most half a step times r (1 + |x|)
    x = np.abs(means[index] - pos["centre"]) / pos["radius"]
    np.testing.assert_array_less(np.abs(got["means"] - means[index]), pos["radius"] * (1 + x) * pos["step"] * 0.51 + 1e-9)
    # the page's order: largest opacity * volume first (as decoded)
    importance = got["alpha"] * np.exp(got["log_scales"].sum(1))
    assert np.all(np.diff(importance) <= 0)

    sc = header["scale"]
    s_step = (sc["hi"] - sc["lo"]) / (2 ** sc["bits"] - 1)
    assert s_step <= 0.25
    np.testing.assert_array_less(np.abs(got["log_scales"] - splats.log_scales.numpy()[index]), 0.51 * s_step)
    # the rotation: scipy's, from the quaternion given and from the one decoded, a few degrees apart
    q = splats.quats.numpy()[index]
    want = Rotation.from_quat(q[:, [1, 2, 3, 0]])  # scipy: x, y, z, w
    angle = np.degrees((Rotation.from_quat(got["quats"][:, [1, 2, 3, 0]]) * want.inv()).magnitude())
    assert angle.max() < 6.0 and np.median(angle) < 3.0

    sh = splats.sh.numpy()[index]
    rgb = np.clip(SH_C0 * sh[:, 0] + 0.5, 0, 1)
    np.testing.assert_array_less(np.abs(got["rgb"] - rgb), 0.51 / (2 ** header["color_bits"] - 1))
    opacity = 1 / (1 + np.exp(-splats.opacity_logits.numpy()[index]))
    np.testing.assert_array_less(np.abs(got["alpha"] - opacity), 0.51 / (2 ** header["alpha_bits"] - 1))
    np.testing.assert_allclose(got["sh1"], sh[:, 1:4], atol=0.51 / 127 * header["sh1_scale"])

    # self-contained: nothing loaded from elsewhere; the title escaped
    assert not re.search(r"\b(src|href)\s*=|fetch\(|XMLHttpRequest|import\(", text)
    assert "<title>a &lt;scene&gt; &amp; more</title>" in text
    assert list(tmp_path.iterdir()) == [tmp_path / "page.html"]  # no temp file left


def test_far_splats_get_more_position_bits(tmp_path):
    """A few splats 10^6 radii out (an unbounded scene's background) widen the grid; the bits follow."""
    near = _random_splats(200)
    far = _random_splats(200)
    far.means[:5] = torch.tensor([1e7, -1e7, 1e7])
    write_html(near, tmp_path / "n.html", "t")
    write_html(far, tmp_path / "f.html", "t")
    _, near_header, _ = read_page(tmp_path / "n.html")
    _, far_header, got = read_page(tmp_path / "f.html")
    assert far_header["position"]["bits"] > near_header["position"]["bits"]
    kept = np.abs(got["means"]).max(1) < 1e6
    assert kept.sum() == 195 and np.abs(got["means"][~kept]).min() > 9e6


def test_max_splats_keeps_the_largest_and_band_zero_only(tmp_path):
    splats = _random_splats(200, degree=2)
    info = write_html(splats, tmp_path / "p.html", "t", max_splats=50, sh_degree=0)
    _, header, got = read_page(tmp_path / "p.html")
    assert info == {**info, "splats": 50, "splats_in": 200, "sh_degree": 0} and "sh1" not in header["sections"]
    importance = (torch.sigmoid(splats.opacity_logits) * torch.exp(splats.log_scales.sum(-1))).numpy()
    top = np.sort(np.argsort(-importance)[:50])
    kept = np.sort([int(np.argmin(np.abs(splats.means.numpy() - m).sum(1))) for m in got["means"]])
    np.testing.assert_array_equal(kept, top)


def test_cameras_orbit_targets_and_up(tmp_path):
    splats = _random_splats(100)
    splats.means[:] = torch.tensor([0.0, 0.0, -2.0]) + 0.01 * splats.means  # a cloud 2 units in front
    tilt = Rotation.from_euler("x", 30, degrees=True).as_matrix()
    cams = []
    for roll in (-10, 10):  # opposite rolls: the mean up is the tilted camera's own up
        c2w = np.eye(4)
        c2w[:3, :3] = tilt @ Rotation.from_euler("z", roll, degrees=True).as_matrix()
        cams.append({"c2w": c2w, "fov_y": 35.0, "width": 64, "height": 48})
    write_html(splats, tmp_path / "c.html", "t", cams)
    _, header, _ = read_page(tmp_path / "c.html")
    np.testing.assert_allclose(header["up"], tilt[:, 1], atol=1e-6)
    for cam, want in zip(header["cameras"], cams):
        np.testing.assert_allclose(np.array(cam["c2w"]), want["c2w"], atol=1e-6)
        depth = (splats.means.numpy().astype(np.float64) - want["c2w"][:3, 3]) @ -want["c2w"][:3, 2]
        assert cam["fov_y"] == 35.0 and cam["distance"] == pytest.approx(np.median(depth), rel=1e-6)


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    splats = _random_splats(10)
    with pytest.raises(ConfigError, match="does not exist"):
        write_html(splats, tmp_path / "missing" / "p.html", "t")
    with pytest.raises(DataError, match="no splats"):
        write_html(splats.select(torch.zeros(10, dtype=torch.bool)), tmp_path / "p.html", "t")
    with pytest.raises(ConfigError, match="4 x 4"):
        write_html(splats, tmp_path / "p.html", "t", cameras=[{"c2w": np.eye(3), "fov_y": 40.0}])
    with pytest.raises(ConfigError, match="SH degree"):
        write_html(splats, tmp_path / "p.html", "t", sh_degree=2)
    assert list(tmp_path.iterdir()) == []


def test_the_shader_takes_the_rasterizers_numbers(tmp_path, monkeypatch):
    """renderer.js's constants are written into the page from enerf.splats.rasterize (no placeholder left),
    so a change to the Python image formation reaches the page."""
    from enerf.splats import html, rasterize

    assert html.SHADER_CONSTANTS == {"NEAR": rasterize.NEAR, "ALPHA_STEPS": rasterize.ALPHA_STEPS,
                                     "ALPHA_MAX": rasterize.ALPHA_MAX, "LOW_PASS": rasterize.LOW_PASS,
                                     "FOV_CLAMP": rasterize.FOV_CLAMP}
    assert rasterize.ALPHA_MIN == 1.0 / rasterize.ALPHA_STEPS
    out = tmp_path / "a.html"
    write_html(_random_splats(50), out, "t")
    text = out.read_text()
    assert not re.search(r"__[A-Z_]+__", text)
    assert "c2[0][0] + 0.3," in text and "min(0.99," in text and "cam.z < 0.01 " in text
    monkeypatch.setitem(html.SHADER_CONSTANTS, "LOW_PASS", 0.5)
    write_html(_random_splats(50), out, "t")
    assert "c2[0][0] + 0.5," in out.read_text()
