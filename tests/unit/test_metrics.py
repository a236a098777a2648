"""Image metrics against scikit-image, a numpy SSIM and analytic values; LPIPS availability."""

import math
import urllib.request

import numpy as np
import pytest
import torch
from numpy.lib.stride_tricks import sliding_window_view
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from enerf.download import NO_DOWNLOAD_ENV
from enerf.errors import DataError
from enerf.metrics import (
    ALEXNET_SHA256_PREFIX,
    ALEXNET_WEIGHTS_URL,
    LPIPS_MIN_SIZE,
    image_metrics,
    make_lpips,
    mse_to_psnr,
    psnr,
    ssim,
)


def _pair(h=24, w=20, noise=0.1, seed=0):
    rng = np.random.default_rng(seed)
    gt = rng.random((h, w, 3))
    pred = np.clip(gt + noise * rng.standard_normal(gt.shape), 0, 1)
    return pred, gt


def _ssim_numpy(x, y, win=11, sigma=1.5, k1=0.01, k2=0.03):
    """SSIM as Wang et al. 2004 and torchmetrics compute it: a win x win Gaussian window (σ = 1.5,
    weights summing to 1), population statistics, valid windows only, mean over channels."""
    c1, c2 = k1**2, k2**2
    t = np.arange(win) - (win - 1) / 2
    g = np.exp(-(t**2) / (2 * sigma**2))
    w = np.outer(g, g) / np.outer(g, g).sum()
    scores = []
    for ch in range(x.shape[-1]):
        wx = sliding_window_view(x[..., ch], (win, win))
        wy = sliding_window_view(y[..., ch], (win, win))
        mx, my = (wx * w).sum(axis=(-1, -2)), (wy * w).sum(axis=(-1, -2))
        vx = (wx**2 * w).sum(axis=(-1, -2)) - mx**2
        vy = (wy**2 * w).sum(axis=(-1, -2)) - my**2
        cov = (wx * wy * w).sum(axis=(-1, -2)) - mx * my
        s = ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
        scores.append(s.mean())
    return float(np.mean(scores))


def test_psnr_matches_skimage_and_analytic():
    pred, gt = _pair()
    assert psnr(pred, gt) == pytest.approx(peak_signal_noise_ratio(gt, pred, data_range=1.0), rel=1e-9)
    assert psnr(torch.from_numpy(pred).float(), torch.from_numpy(gt).float()) == pytest.approx(psnr(pred, gt), rel=1e-5)
    zeros = np.zeros((8, 8, 3))
    assert psnr(zeros + 0.1, zeros) == pytest.approx(20.0)  # mse 0.01
    assert mse_to_psnr(0.01) == pytest.approx(20.0)
    assert mse_to_psnr(torch.tensor(1e-3)) == pytest.approx(30.0, rel=1e-6)
    assert math.isinf(psnr(gt, gt))


def test_ssim_matches_numpy_implementation():
    pred, gt = _pair(noise=0.2)
    assert ssim(gt, gt) == pytest.approx(1.0)
    assert ssim(pred, gt) == pytest.approx(_ssim_numpy(pred, gt), rel=1e-9)
    assert ssim(pred, gt) < 0.99
    # not scikit-image's default (7 x 7 uniform window, sample covariance)
    default = structural_similarity(pred, gt, channel_axis=-1, data_range=1.0)
    assert abs(ssim(pred, gt) - default) > 1e-3
    assert ssim(torch.from_numpy(pred), torch.from_numpy(gt)) == pytest.approx(ssim(pred, gt))


def test_ssim_of_images_smaller_than_the_window():
    """Under 11 px: the same 11-tap Gaussian (scipy, reflected edges), mean over the central crop."""
    from scipy.ndimage import gaussian_filter

    pred, gt = _pair(h=9, w=14, noise=0.2)
    c1, c2 = 0.01**2, 0.03**2
    scores = []
    for ch in range(3):
        x, y = pred[..., ch], gt[..., ch]
        f = lambda a: gaussian_filter(a, 1.5, mode="reflect", truncate=3.5)  # noqa: E731
        mx, my = f(x), f(y)
        vx, vy, cov = f(x * x) - mx**2, f(y * y) - my**2, f(x * y) - mx * my
        s = ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
        scores.append(s[4:-4, 4:-4].mean())  # side 9: crop (9 - 1) // 2 = 4
    assert ssim(pred, gt) == pytest.approx(float(np.mean(scores)), rel=1e-9)


def test_lpips_reports_missing_weights_without_download(monkeypatch, tmp_path):
    """ENERF_NO_DOWNLOAD (set for every test by tests/conftest.py): no request, a one-line reason."""
    def no_download(*args, **kwargs):
        raise AssertionError("make_lpips tried to download")

    monkeypatch.setattr(torch.hub, "_hub_dir", str(tmp_path))
    monkeypatch.setattr(torch.hub, "download_url_to_file", no_download)
    monkeypatch.setattr(urllib.request, "urlopen", no_download)
    metric, message = make_lpips("cpu")
    assert metric is None
    assert "alexnet-owt-7be5be79.pth" in message and str(tmp_path / "checkpoints") in message
    assert f"(not downloading {ALEXNET_WEIGHTS_URL}: {NO_DOWNLOAD_ENV} is set)" in message
    assert "\n" not in message and not (tmp_path / "checkpoints").exists()


def test_weights_file_name_is_torchvisions():
    tv_models = pytest.importorskip("torchvision.models")
    assert tv_models.AlexNet_Weights.IMAGENET1K_V1.url == ALEXNET_WEIGHTS_URL
    assert torch.hub.HASH_REGEX.search(ALEXNET_WEIGHTS_URL.rsplit("/", 1)[-1]).group(1) == ALEXNET_SHA256_PREFIX


def test_lpips_random_trunk(capsys):
    metric, message = make_lpips("cpu", pnet_rand=True)
    assert message is None and metric is not None
    assert capsys.readouterr().out == ""  # lpips' "Setting up ..." lines are swallowed
    pred, gt = _pair(h=64, w=48, noise=0.2)
    assert metric(gt, gt) == pytest.approx(0.0, abs=1e-7)
    distance = metric(pred, gt)
    assert distance > 0

    # Input convention: [1, 3, H, W] in [-1, 1].
    def nchw(a):
        return torch.from_numpy(a).float().permute(2, 0, 1)[None] * 2 - 1

    with torch.no_grad():
        direct = metric.model(nchw(pred), nchw(gt)).item()
    assert distance == pytest.approx(direct, rel=1e-6)

    scores = image_metrics(pred, gt, metric)
    assert scores["lpips"] == pytest.approx(distance)
    assert scores["psnr"] == pytest.approx(psnr(pred, gt)) and scores["ssim"] == pytest.approx(ssim(pred, gt))

    small_pred, small_gt = _pair(h=LPIPS_MIN_SIZE - 1, w=40)
    assert image_metrics(small_pred, small_gt, metric)["lpips"] is None
    with pytest.raises(DataError):
        metric(small_pred, small_gt)


def test_image_metrics_without_lpips():
    pred, gt = _pair()
    scores = image_metrics(pred, gt)
    assert scores == {"psnr": pytest.approx(psnr(pred, gt)), "ssim": pytest.approx(ssim(pred, gt)), "lpips": None}
