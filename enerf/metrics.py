"""Image metrics: PSNR, SSIM (scikit-image, the field's 11x11 Gaussian window) and LPIPS (the
``lpips`` package, AlexNet trunk).

Images are ``[H, W, 3]`` arrays or tensors in [0, 1]; the data range is 1.

LPIPS needs torchvision's ImageNet AlexNet weights in torch.hub's checkpoint folder
(``$TORCH_HOME/hub/checkpoints``, default ``~/.cache/torch/hub/checkpoints``). ``make_lpips``
fetches the file there once when it is missing, as torchvision would (``enerf.download``: a short
timeout, the SHA-256 prefix of its name checked before it takes the name), and otherwise reports
LPIPS as unavailable with a one-line reason: no network, ``ENERF_NO_DOWNLOAD`` set, a bad file.
``--no_lpips`` never calls it.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from pathlib import Path

import numpy as np
import torch
from skimage.metrics import structural_similarity

from .download import fetch_checked
from .errors import DataError

__all__ = [
    "psnr",
    "mse_to_psnr",
    "ssim",
    "SSIM_WINDOW",
    "LpipsMetric",
    "make_lpips",
    "alexnet_weights_path",
    "image_metrics",
    "ALEXNET_WEIGHTS_URL",
    "ALEXNET_SHA256_PREFIX",
    "LPIPS_MIN_SIZE",
    "volumetric_iou",
    "surface_samples",
    "shape_metrics",
    "reference_metrics",
]

# torchvision.models.AlexNet_Weights.IMAGENET1K_V1.url; torch.hub caches it under its basename.
ALEXNET_WEIGHTS_URL = "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth"
ALEXNET_SHA256_PREFIX = "7be5be79"  # the hash in the file's name, as torch.hub's check_hash reads it
LPIPS_MIN_SIZE = 32  # smaller images vanish inside AlexNet's pooling layers


def _to_numpy(image) -> np.ndarray:
    if isinstance(image, torch.Tensor):
        image = image.detach().cpu().numpy()
    return np.asarray(image, dtype=np.float64)


def _check_pair(pred: np.ndarray, gt: np.ndarray) -> None:
    if pred.shape != gt.shape or pred.ndim != 3 or pred.shape[-1] != 3:
        raise ValueError(f"expected two [H, W, 3] images of one shape, got {pred.shape} and {gt.shape}")


def mse_to_psnr(mse) -> float:
    """PSNR in dB of a mean squared error on [0, 1] data: ``-10 log10(mse)`` (inf when mse is 0)."""
    mse = float(mse)
    return math.inf if mse == 0.0 else -10.0 * math.log10(mse)


def psnr(pred, gt) -> float:
    """Peak signal-to-noise ratio (dB, data range 1) of ``pred`` against ``gt``, both [H, W, 3]."""
    pred, gt = _to_numpy(pred), _to_numpy(gt)
    _check_pair(pred, gt)
    return mse_to_psnr(np.mean((pred - gt) ** 2))


# How ``ssim`` weighs each pixel's neighbourhood (metrics.json records it beside the value).
SSIM_WINDOW = "gaussian 11x11, sigma 1.5"


def ssim(pred, gt) -> float:
    """Mean SSIM over pixels and channels, as NeRF papers, mip-NeRF 360 and nerfstudio
    (torchmetrics) report it: an 11 x 11 Gaussian window with σ = 1.5, population (biased)
    statistics, K1 = 0.01, K2 = 0.03, data range 1 (scikit-image's ``structural_similarity`` with
    ``gaussian_weights=True, sigma=1.5, use_sample_covariance=False``; the mean skips the 5-pixel
    border where the window does not fit). An image under 11 px on a side keeps the same filter
    (edges reflected) and a border crop that fits: (s - 1) // 2 pixels for an odd side s, one more
    for an even one (torchmetrics refuses such images).
    scikit-image's defaults (a 7 x 7 uniform window, sample covariance) give other numbers."""
    pred, gt = _to_numpy(pred), _to_numpy(gt)
    _check_pair(pred, gt)
    side = min(pred.shape[:2])
    crop = {} if side >= 11 else {"win_size": side if side % 2 else side - 1}
    return float(structural_similarity(pred, gt, channel_axis=-1, data_range=1.0, gaussian_weights=True,
                                       sigma=1.5, use_sample_covariance=False, **crop))


def alexnet_weights_path() -> Path:
    """Where torchvision looks for (and ``make_lpips`` downloads) the ImageNet AlexNet weights."""
    return Path(torch.hub.get_dir()) / "checkpoints" / ALEXNET_WEIGHTS_URL.rsplit("/", 1)[-1]


class LpipsMetric:
    """LPIPS distance (AlexNet trunk, v0.1 linear layers); lower is more similar.

    Construct through ``make_lpips``, which checks the weights first.
    """

    def __init__(self, device: torch.device | str = "cpu", pnet_rand: bool = False) -> None:
        import lpips

        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torchvision's `pretrained=` deprecation notice
            self.model = lpips.LPIPS(net="alex", version="0.1", pnet_rand=pnet_rand, verbose=False)
        self.model = self.model.to(device).eval()
        self.device = torch.device(device)
        self.pnet_rand = pnet_rand

    @torch.no_grad()
    def __call__(self, pred, gt) -> float:
        """LPIPS of two [H, W, 3] images in [0, 1] (scaled to [-1, 1], NCHW, for the network)."""
        pred, gt = _to_numpy(pred), _to_numpy(gt)
        _check_pair(pred, gt)
        if min(pred.shape[:2]) < LPIPS_MIN_SIZE:
            raise DataError(
                f"LPIPS needs images of at least {LPIPS_MIN_SIZE}x{LPIPS_MIN_SIZE} pixels, got "
                f"{pred.shape[1]}x{pred.shape[0]}; use a smaller --factor or --no_lpips"
            )

        def to_input(image: np.ndarray) -> torch.Tensor:
            x = torch.from_numpy(image).to(self.device, torch.float32)
            return (x * 2.0 - 1.0).permute(2, 0, 1)[None]  # [1, 3, H, W] in [-1, 1]

        return float(self.model(to_input(pred), to_input(gt)).item())


def make_lpips(
    device: torch.device | str = "cpu", pnet_rand: bool = False, download_timeout: float = 10.0
) -> tuple[LpipsMetric | None, str | None]:
    """Build the LPIPS metric, fetching the AlexNet weights once when they are missing.

    Returns ``(metric, None)``, or ``(None, reason)`` with a one-line reason when the
    ``lpips`` package is missing or the AlexNet weights file is missing and could not be fetched
    (``download_timeout`` seconds to connect and per read). ``pnet_rand=True`` uses a randomly
    initialised trunk and never downloads: for tests only, never a reportable metric.
    """
    try:
        import lpips  # noqa: F401
    except ImportError:
        return None, "the lpips package is not installed (pip install lpips)"
    if not pnet_rand:
        weights = alexnet_weights_path()
        failed = fetch_checked(ALEXNET_WEIGHTS_URL, weights, ALEXNET_SHA256_PREFIX, timeout=download_timeout)
        if failed:
            return None, (
                f"AlexNet weights {weights} are missing ({failed}); copy the file there by hand "
                f"or point TORCH_HOME at a folder whose hub/checkpoints/ holds it"
            )
    try:
        return LpipsMetric(device, pnet_rand=pnet_rand), None
    except Exception as exc:  # a corrupt or truncated weights file, an incompatible lpips
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, f"LPIPS could not be built: {reason}"


def image_metrics(pred, gt, lpips_metric: LpipsMetric | None = None) -> dict:
    """``{"psnr", "ssim", "lpips"}`` of ``pred`` against ``gt`` ([H, W, 3] in [0, 1]).

    ``lpips`` is None without a metric, or when the images are smaller than
    ``LPIPS_MIN_SIZE`` pixels on a side.
    """
    pred, gt = _to_numpy(pred), _to_numpy(gt)
    lp = None
    if lpips_metric is not None and min(pred.shape[:2]) >= LPIPS_MIN_SIZE:
        lp = lpips_metric(pred, gt)
    return {"psnr": psnr(pred, gt), "ssim": ssim(pred, gt), "lpips": lp}


# --- 3D shape metrics (Occupancy Networks' IoU, Chamfer-L1, normal consistency; F-score) ------
#
# Surfaces are compared through surface samples and *exact point-to-mesh distances* (closest
# point on the other mesh's triangles, candidates from a scipy KD-tree; enerf.mesh_distance), not
# through the nearest of the other mesh's samples as in Occupancy Networks' evaluation code:
# the point-to-point version has a floor set by the sample spacing (two independent 100k
# samplings of one surface are not at distance 0), the point-to-mesh version is 0 for identical
# meshes and r2 - r1 for concentric spheres.


def volumetric_iou(pred_inside, gt_inside) -> float:
    """|pred ∩ gt| / |pred ∪ gt| of two boolean occupancy arrays over the same points
    (1.0 when both are empty)."""
    pred, gt = np.asarray(pred_inside, dtype=bool), np.asarray(gt_inside, dtype=bool)
    if pred.shape != gt.shape:
        raise ValueError(f"occupancy arrays differ in shape: {pred.shape} and {gt.shape}")
    union = np.logical_or(pred, gt).sum()
    return 1.0 if union == 0 else float(np.logical_and(pred, gt).sum() / union)


def surface_samples(mesh, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` area-uniform points on ``mesh`` [count, 3] and their faces' unit normals [count, 3]."""
    import trimesh

    points, face = trimesh.sample.sample_surface(mesh, count, seed=seed)
    return points, np.asarray(mesh.face_normals)[face]


def _two_sided(d_pred, cos_pred, d_gt, cos_gt, tau: float) -> dict:
    """The scores of ``shape_metrics`` from both directions' distances and |normal cosines|."""
    accuracy, completeness = float(np.mean(d_pred)), float(np.mean(d_gt))
    precision, recall = float((d_pred < tau).mean()), float((d_gt < tau).mean())
    fscore = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return {
        "chamfer_l1": 0.5 * (accuracy + completeness),
        "accuracy": accuracy,
        "completeness": completeness,
        "normal_consistency": float(0.5 * (np.mean(cos_pred) + np.mean(cos_gt))),
        "fscore": float(fscore),
        "precision": precision,
        "recall": recall,
        "fscore_tau": float(tau),
    }


def _abs_cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(np.einsum("ij,ij->i", a, b))


def shape_metrics(pred_mesh, gt_mesh, n_points: int = 100_000, tau: float = 0.01, seed: int = 0) -> dict:
    """Surface metrics of ``pred_mesh`` against ``gt_mesh`` (trimesh meshes, same frame).

    With P the samples on the prediction and G those on the ground truth (``n_points`` each):

    * ``accuracy``     mean over P of the distance to the GT mesh
    * ``completeness`` mean over G of the distance to the predicted mesh
    * ``chamfer_l1``   (accuracy + completeness) / 2
    * ``normal_consistency``  mean of |n_p · n_q| over both directions, q the closest point on
      the other mesh (ONet's absolute dot product)
    * ``precision`` / ``recall``  fraction of P (of G) within ``tau`` of the other mesh;
      ``fscore`` = 2 P R / (P + R) (0 when both are 0)
    """
    from .mesh_distance import point_mesh_distance

    pred_pts, pred_n = surface_samples(pred_mesh, n_points, seed)
    gt_pts, gt_n = surface_samples(gt_mesh, n_points, seed + 1)
    d_pred, n_at_gt = point_mesh_distance(pred_pts, gt_mesh)  # accuracy direction
    d_gt, n_at_pred = point_mesh_distance(gt_pts, pred_mesh)  # completeness direction
    return _two_sided(d_pred, _abs_cos(pred_n, n_at_gt), d_gt, _abs_cos(gt_n, n_at_pred), tau)


def reference_metrics(pred_mesh, gt_points, gt_normals, gt_closest, n_points: int = 100_000, tau: float = 0.01,
                      seed: int = 0, region=None) -> dict:
    """``shape_metrics``' scores of ``pred_mesh`` against a reference surface known in closed form.

    Args:
        gt_points, gt_normals: [m, 3] points on the reference surface and its unit normals there
            (e.g. the first hits of the cameras' rays: the surface that was seen).
        gt_closest: points [n, 3] -> (distance [n] to the reference surface, unit normal [n, 3] at
            the closest point on it).
        region: points [n, 3] -> bool [n], the part of space scored (e.g. inside a camera's view);
            samples of the prediction outside it are dropped. None: all of them.

    Returns:
        the dict of ``shape_metrics`` plus ``scored_fraction``, the share of the prediction's samples
        inside ``region`` (``accuracy`` etc. are NaN when none is).
    """
    from .mesh_distance import point_mesh_distance

    pred_pts, pred_n = surface_samples(pred_mesh, n_points, seed)
    keep = np.ones(len(pred_pts), bool) if region is None else np.asarray(region(pred_pts), bool)
    pred_pts, pred_n = pred_pts[keep], pred_n[keep]
    d_pred, n_at_gt = gt_closest(pred_pts) if len(pred_pts) else (np.full(1, np.nan), np.zeros((1, 3)))
    d_gt, n_at_pred = point_mesh_distance(np.asarray(gt_points, np.float64), pred_mesh)
    cos_pred = _abs_cos(pred_n, n_at_gt) if len(pred_pts) else np.full(1, np.nan)
    out = _two_sided(d_pred, cos_pred, d_gt, _abs_cos(np.asarray(gt_normals, np.float64), n_at_pred), tau)
    out["scored_fraction"] = float(keep.mean())
    return out
