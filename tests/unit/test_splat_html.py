"""The splat page's file (``enerf.splats.html``) without a browser: the embedded data decoded with
numpy against the splats (covariance from scipy's rotation, activations), which splats are kept,
the cameras' orbit targets and up vector, the page's self-containedness, and bad input."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from enerf.errors import ConfigError, DataError
from enerf.splats.gaussians import SH_C0, Splats
from enerf.splats.html import write_html


def _random_splats(n: int, degree: int = 1, seed: int = 0) -> Splats:
    g = torch.Generator().manual_seed(seed)
    return Splats(means=torch.randn(n, 3, generator=g) * 5, log_scales=torch.randn(n, 3, generator=g) - 3,
                  quats=torch.randn(n, 4, generator=g), opacity_logits=torch.randn(n, generator=g) * 2,
                  sh=torch.randn(n, (degree + 1) ** 2, 3, generator=g) * 0.3)


def _read_page(path):
    text = path.read_text(encoding="utf-8")
    header = json.loads(re.search(r'<script type="application/json" id="enerf-header">(.*?)</script>', text).group(1))
    data = base64.b64decode(re.search(r'id="enerf-data">([A-Za-z0-9+/=]*)</script>', text).group(1))
    n = header["count"]

    def section(name, dtype, shape):
        offset, size = header["sections"][name]
        assert offset % 4 == 0 and size == n * np.dtype(dtype).itemsize * int(np.prod(shape))
        return np.frombuffer(data, dtype, n * int(np.prod(shape)), offset).reshape(n, *shape)

    out = {"means": section("means", "<f4", (3,)), "cov": section("cov", "<f2", (6,)),
           "rgba": section("rgba", "u1", (4,))}
    if header["sh_degree"] == 1:
        out["sh1"] = section("sh1", "i1", (3, 3))
    return text, header, out


def test_the_embedded_data_decodes_to_the_splats(tmp_path):
    splats = _random_splats(300)
    info = write_html(splats, tmp_path / "page.html", "a <scene> & more")
    text, header, got = _read_page(tmp_path / "page.html")
    assert info["splats"] == header["count"] == 300 and header["sh_degree"] == 1
    assert info["bytes"] == (tmp_path / "page.html").stat().st_size
    # the page stores them by opacity * volume, largest first: match each row to its splat by its centre
    means = splats.means.numpy()
    index = [int(np.argmin(np.abs(means - m).sum(1))) for m in got["means"]]
    assert sorted(index) == list(range(300))
    np.testing.assert_array_equal(got["means"], means[index])
    importance = torch.sigmoid(splats.opacity_logits) * torch.exp(splats.log_scales.sum(-1))
    assert np.all(np.diff(importance.numpy()[index]) <= 0)

    q = splats.quats.numpy()[index]
    rot = Rotation.from_quat(q[:, [1, 2, 3, 0]]).as_matrix()  # scipy: x, y, z, w
    sigma = np.exp(splats.log_scales.numpy()[index])
    cov = np.einsum("nij,nj,nkj->nik", rot, sigma**2, rot)
    want6 = cov[:, [0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]
    got6 = got["cov"].astype(np.float64) * 2.0 ** header["cov_exponent"]
    scale = np.abs(want6).max(1, keepdims=True)
    np.testing.assert_allclose(got6 / scale, want6 / scale, atol=2e-3)
    assert 2**14 <= np.abs(got["cov"]).max() <= 2**15  # the largest variance uses float16's range

    sh = splats.sh.numpy()[index]
    rgb = np.clip(SH_C0 * sh[:, 0] + 0.5, 0, 1)
    np.testing.assert_allclose(got["rgba"][:, :3] / 255, rgb, atol=0.5 / 255 + 1e-6)
    opacity = 1 / (1 + np.exp(-splats.opacity_logits.numpy()[index]))
    np.testing.assert_allclose(got["rgba"][:, 3] / 255, opacity, atol=0.5 / 255 + 1e-6)
    band = np.clip(sh[:, 1:4], -header["sh1_scale"], header["sh1_scale"])
    np.testing.assert_allclose(got["sh1"] / 127 * header["sh1_scale"], band, atol=0.5 / 127 * header["sh1_scale"] + 1e-6)

    # self-contained: nothing loaded from elsewhere; the title escaped
    assert not re.search(r"\b(src|href)\s*=|fetch\(|XMLHttpRequest|import\(", text)
    assert "<title>a &lt;scene&gt; &amp; more</title>" in text
    assert list(tmp_path.iterdir()) == [tmp_path / "page.html"]  # no temp file left


def test_max_splats_keeps_the_largest_and_band_zero_only(tmp_path):
    splats = _random_splats(200, degree=2)
    info = write_html(splats, tmp_path / "p.html", "t", max_splats=50, sh_degree=0)
    _, header, got = _read_page(tmp_path / "p.html")
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
    _, header, got = _read_page(tmp_path / "c.html")
    np.testing.assert_allclose(header["up"], tilt[:, 1], atol=1e-6)
    for cam, want in zip(header["cameras"], cams):
        np.testing.assert_allclose(np.array(cam["c2w"]), want["c2w"], atol=1e-6)
        depth = (got["means"] - want["c2w"][:3, 3]) @ -want["c2w"][:3, 2]
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
