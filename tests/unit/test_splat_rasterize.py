"""The pure-torch splat rasterizer against an independent numpy one: the projected covariance from a
numerical Jacobian of the pinhole projection (not the analytic one), then each pixel composited in
a plain loop over the Gaussians sorted by depth (the reference's per-pixel loop)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.splats import Splats, sh_basis
from enerf.cameras.pinhole import Pinhole
from enerf.splats.rasterize import rasterize


def _random_splats(n: int, degree: int, seed: int = 0) -> Splats:
    g = torch.Generator().manual_seed(seed)
    means = torch.rand(n, 3, generator=g) * torch.tensor([2.0, 1.5, 1.0]) - torch.tensor([1.0, 0.75, 3.0])
    return Splats(means=means, log_scales=torch.log(0.02 + 0.1 * torch.rand(n, 3, generator=g)),
                  quats=torch.randn(n, 4, generator=g), opacity_logits=torch.randn(n, generator=g) + 1.0,
                  sh=0.5 * torch.randn(n, (degree + 1) ** 2, 3, generator=g))


def _camera(width: int = 40, height: int = 30) -> Pinhole:
    c2w = torch.tensor([[1.0, 0.0, 0.0, 0.1], [0.0, 1.0, 0.0, -0.05], [0.0, 0.0, 1.0, 0.2]])
    angle = 0.15  # a small turn about y, so that no axis is trivially aligned
    rot = torch.tensor([[np.cos(angle), 0.0, np.sin(angle)], [0.0, 1.0, 0.0], [-np.sin(angle), 0.0, np.cos(angle)]],
                       dtype=torch.float32)
    c2w[:3, :3] = rot
    return Pinhole(c2w, width, height, 35.0)


def _reference(splats: Splats, cam: Pinhole, bg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Numpy: projection of a point p -> pixel (u, v) (OpenGL camera, principal point at the centre)."""
    c2w = cam.c2w.double().numpy()
    rot, t = c2w[:3, :3], c2w[:3, 3]
    f, w, h = cam.focal, cam.width, cam.height

    def to_pixel(p):
        q = rot.T @ (p - t)  # OpenGL camera: looks down -z, y up
        return np.array([w / 2 + f * q[0] / -q[2], h / 2 - f * q[1] / -q[2]]), -q[2]

    means = splats.means.double().numpy()
    quats = splats.quats.double().numpy()
    scales = np.exp(splats.log_scales.double().numpy())
    opac = 1 / (1 + np.exp(-splats.opacity_logits.double().numpy()))
    items = []
    for i in range(len(means)):
        uv, z = to_pixel(means[i])
        if z <= 0.01:
            continue
        jac = np.zeros((2, 3))
        for k in range(3):  # central differences: the Jacobian of the projection at the centre
            e = np.zeros(3)
            e[k] = 1e-6
            jac[:, k] = (to_pixel(means[i] + e)[0] - to_pixel(means[i] - e)[0]) / 2e-6
        qw, qx, qy, qz = quats[i] / np.linalg.norm(quats[i])
        r = np.array([[1 - 2 * (qy**2 + qz**2), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy)],
                      [2 * (qx * qy + qw * qz), 1 - 2 * (qx**2 + qz**2), 2 * (qy * qz - qw * qx)],
                      [2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx**2 + qy**2)]])
        cov3 = r @ np.diag(scales[i] ** 2) @ r.T
        cov2 = jac @ cov3 @ jac.T + 0.3 * np.eye(2)
        d = (means[i] - t) / np.linalg.norm(means[i] - t)
        basis = sh_basis(torch.tensor(d[None]), splats.degree).numpy()[0]
        color = np.maximum(basis @ splats.sh[i].double().numpy() + 0.5, 0.0)
        items.append((z, uv, np.linalg.inv(cov2), opac[i], color))
    items.sort(key=lambda it: it[0])
    img, acc = np.zeros((h, w, 3)), np.zeros((h, w))
    for y in range(h):
        for x in range(w):
            trans, c = 1.0, np.zeros(3)
            for z, uv, conic, o, color in items:
                dpix = np.array([x + 0.5, y + 0.5]) - uv
                a = min(0.99, o * np.exp(-0.5 * dpix @ conic @ dpix))
                if a < 1 / 255:
                    continue
                c += trans * a * color
                trans *= 1 - a
            img[y, x] = c + trans * bg
            acc[y, x] = 1 - trans
    return img, acc


@pytest.mark.parametrize("degree", [0, 1, 3])
def test_rasterize_matches_numpy_loop(degree):
    splats = _random_splats(60, degree, seed=degree)
    cam = _camera()
    bg = np.array([0.2, 0.4, 0.9])
    out = rasterize(splats, cam, torch.tensor(bg, dtype=torch.float32), backend="torch")
    ref_rgb, ref_acc = _reference(splats, cam, bg)
    assert float(out["acc"].max()) > 0.5  # the picture is not empty
    np.testing.assert_allclose(out["rgb"].numpy(), ref_rgb, atol=2e-4)
    np.testing.assert_allclose(out["acc"].numpy(), ref_acc, atol=2e-4)


def test_bands_and_rows_change_nothing(monkeypatch):
    import enerf.splats.rasterize as rz

    splats, cam = _random_splats(80, 1), _camera()
    whole = rasterize(splats, cam, backend="torch")
    monkeypatch.setattr(rz, "MAX_PAIRS", 500)  # many bands
    banded = rasterize(splats, cam, backend="torch")
    crop = rasterize(splats, cam, backend="torch", rows=(7, 19))
    for key in ("rgb", "acc", "depth"):
        torch.testing.assert_close(banded[key], whole[key], atol=1e-6, rtol=0)
        torch.testing.assert_close(crop[key], whole[key][7:19], atol=1e-6, rtol=0)


def test_gradients_reach_every_parameter():
    splats = _random_splats(40, 1).map(lambda t: t.clone().requires_grad_(True))
    out = rasterize(splats, _camera(), backend="torch")
    out["rgb"].square().mean().backward()
    for name, t in splats.tensors().items():
        assert t.grad is not None and torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0, name


def test_compiled_forward_matches_torch():
    """The numba tile loop (early stop at transmittance 1e-4) against the pure-torch pairs."""
    pytest.importorskip("numba")
    splats, cam = _random_splats(300, 1, seed=5), _camera(70, 50)
    bg = torch.tensor([0.3, 0.6, 0.1])
    with torch.no_grad():
        ref = rasterize(splats, cam, bg, backend="torch")
        out = rasterize(splats, cam, bg, backend="numba")
        band = rasterize(splats, cam, bg, backend="numba", rows=(13, 41))
    assert float(ref["acc"].max()) > 0.9
    for key in ("rgb", "acc", "depth"):
        torch.testing.assert_close(out[key], ref[key], atol=2e-4, rtol=0)
        torch.testing.assert_close(band[key], ref[key][13:41], atol=2e-4, rtol=0)


@pytest.mark.parametrize("n, degree, antialiased, wide", [(60, 1, False, False), (300, 0, False, False),
                                                          (120, 1, True, True)])
def test_compiled_backward_matches_torch_autograd(n, degree, antialiased, wide):
    """The numba projection and draw, backward (the chain rule written out; the reference's back-to-front
    walk) against torch's autograd through the pure-torch projection and pairs (segmented sums): the same
    loss on rgb and acc, every parameter's gradient. ``wide``: centres up to 2.5x further sideways and
    Gaussians 3x larger, so that some lie beyond the Jacobian's field-of-view clamp and still reach the image;
    ``antialiased``: with the mip filter's opacity factor."""
    pytest.importorskip("numba")
    splats, cam = _random_splats(n, degree, seed=n), _camera(40, 30)
    if wide:
        splats.means = splats.means * torch.tensor([2.5, 2.5, 1.0])
        splats.log_scales = splats.log_scales + float(np.log(3.0))
        lim = 1.3 * 0.5 * cam.width / cam.focal
        local = (splats.means - cam.c2w[:3, 3]) @ cam.c2w[:3, :3]
        assert int(((local[:, 0] / -local[:, 2]).abs() > lim).sum()) >= 10  # the clamp is exercised
    splats.antialiased = antialiased
    bg = torch.tensor([0.2, 0.5, 0.9])
    g = torch.Generator().manual_seed(1)
    w_rgb, w_acc = torch.rand(30, 40, 3, generator=g), torch.rand(30, 40, generator=g)
    grads = {}
    for backend in ("torch", "numba"):
        params = splats.map(lambda t: t.clone().requires_grad_(True))
        out = rasterize(params, cam, bg, backend=backend)
        ((out["rgb"] * w_rgb).sum() + (out["acc"] * w_acc).sum()).backward()
        grads[backend] = {name: t.grad for name, t in params.tensors().items()}
    for name, ref in grads["torch"].items():
        assert ref.abs().max() > 0.1, name
        torch.testing.assert_close(grads["numba"][name], ref, atol=1e-3 * float(ref.abs().max()), rtol=0)


@pytest.mark.parametrize("backend", ["torch", "numba"])
def test_the_mip_filter_keeps_a_small_gaussians_coverage(backend):
    """One round Gaussian of 0.5 px standard deviation, opacity 0.5, facing the camera: its coverage (acc summed
    over the pixels) is o 2π sqrt(det Σ) for a 2D Gaussian of covariance Σ, less the tail under 1/255 (a share
    1/255 / peak of it). Classic 3DGS draws Σ + 0.3 I at the full peak (coverage o 2π 0.55); antialiased splats
    draw it at peak o Σ / (Σ + 0.3) and cover o 2π 0.25, the Gaussian's own."""
    if backend == "numba":
        pytest.importorskip("numba")
    sigma_px, focal, depth, o = 0.5, 100.0, 2.0, 0.5
    cam = Pinhole(torch.eye(4)[:3], 41, 41, focal)
    splats = Splats(means=torch.tensor([[0.0, 0.0, -depth]]),
                    log_scales=torch.full((1, 3), float(np.log(sigma_px * depth / focal))),
                    quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]),
                    opacity_logits=torch.tensor([float(np.log(o / (1 - o)))]), sh=torch.zeros(1, 1, 3))
    var = sigma_px**2 + 0.3  # the footprint both draw: Σ + 0.3 I
    for antialiased, peak in ((False, o), (True, o * sigma_px**2 / var)):
        splats.antialiased = antialiased
        with torch.no_grad():
            acc = rasterize(splats, cam, backend=backend)["acc"]
        expected = peak * 2 * np.pi * var * (1 - (1 / 255) / peak)
        assert float(acc.max()) == pytest.approx(peak, rel=0.02), antialiased
        assert float(acc.sum()) == pytest.approx(expected, rel=0.02), antialiased
    assert expected == pytest.approx(o * 2 * np.pi * sigma_px**2 * (1 - (1 / 255) / peak))
