"""Render Gaussians into one pinhole camera: the image formation of 3D Gaussian splatting (Kerbl et
al. 2023) in pure torch (any device, differentiable), or gsplat's CUDA rasterizer where gsplat is
installed and the splats are on a CUDA device.

The pure-torch path, per camera:

1. **Project** (``project``): each centre into the camera (OpenCV axes: x right, y down, z forward;
   ``enerf.cameras.pinhole.GL_TO_CV`` from the poses' OpenGL axes), its 3D covariance ``R S S^T R^T``
   through the affine approximation ``J W`` of the perspective map (EWA splatting, with the
   reference's clamp of x / z and y / z to 1.3 x the half field of view), plus 0.3 px² on the
   diagonal (the reference's low-pass filter). Centres nearer than ``NEAR`` are dropped. Splats marked
   ``antialiased`` (Mip-Splatting's 2D mip filter, gsplat's ``rasterize_mode="antialiased"``) also scale
   each opacity by sqrt(det Σ / det(Σ + 0.3 I)) (``compensation``): the low-pass then widens a footprint
   without adding to its coverage, so a Gaussian smaller than a pixel (a window smaller than the photos)
   is drawn with the coverage it has, not inflated to the filter's.
2. **Pairs** (``_pairs``): every (Gaussian, pixel) whose pixel centre lies in the Gaussian's
   bounding box and where its opacity ``o exp(-q / 2)`` (q the conic's quadratic form) is at least
   1/255, as the reference skips fainter ones. The box is the one of the ellipse q = 2 ln(255 o),
   outside which no pixel passes, so no pair is lost by it.
3. **Composite** front to back: pairs sorted by pixel, then by the Gaussian's depth; per pixel
   ``w_i = a_i prod_{j<i} (1 - a_j)`` (a capped at 0.99, as the reference), from the segmented
   exclusive sum of log(1 - a) (``enerf.render.compositing.exclusive_segment_sum``, as the volume
   renderer's transmittance); rgb = sum_i w_i c_i +
   (1 - sum_i w_i) background.

The reference also stops a pixel once its transmittance falls under 1e-4; here those last pairs
are kept (they change a pixel by less than 1e-4). A large image is split into horizontal bands so
that one band's pairs stay under ``MAX_PAIRS`` (memory), which changes nothing in the result.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..cameras.pinhole import Pinhole, world_to_cv_camera
from ..render.compositing import exclusive_segment_sum
from .gaussians import Splats, sh_to_rgb
from .projection import project_drawn
from .tiles import numba_available, rasterize_tiles

__all__ = ["NEAR", "MAX_PAIRS", "project", "rasterize", "choose_backend", "gsplat_available", "warm_up"]

NEAR = 0.01  # Gaussians whose centre is nearer than this (camera z, scene units) are not drawn
ALPHA_STEPS = 255.0  # an opacity under 1 / ALPHA_STEPS is nothing (the reference's threshold, 8-bit colour)
ALPHA_MIN = 1.0 / ALPHA_STEPS  # fainter (Gaussian, pixel) pairs are skipped
ALPHA_MAX = 0.99  # a pair's opacity is capped here (the reference's)
FOV_CLAMP = 1.3  # x / z and y / z are clamped to this times the half field of view in the Jacobian
LOW_PASS = 0.3  # px², added to the projected covariance's diagonal (the reference's dilation)
MAX_PAIRS = 6_000_000  # pairs rendered at once; a larger image is split into bands of rows


def project(splats: Splats, camera: Pinhole) -> dict[str, Tensor]:
    """Project every Gaussian (step 1 of the module docstring).

    Returns:
        dict of [N] / [N, k] tensors (differentiable): uv [N, 2] pixel coordinates of the centre (pixel
        (i, j) covers [i, i + 1) x [j, j + 1)), depth [N] (camera z, forward), conic [N, 3] (the
        inverse 2D covariance's a, b, c: q = a dx² + 2 b dx dy + c dy²), cov2d [N, 3] (xx, xy, yy),
        visible [N] bool (in front of NEAR with a finite, positive-definite footprint), compensation [N]
        (sqrt(det Σ / det(Σ + LOW_PASS I)) in [0, 1]: the 2D mip filter's opacity factor).
    """
    w2c, centre = world_to_cv_camera(camera.pose(splats.means))  # [3, 3] world -> OpenCV camera axes, [3]
    p = (splats.means - centre) @ w2c.T  # [N, 3]
    x, y, z = p.unbind(-1)
    zs = z.clamp_min(NEAR)
    f = float(camera.focal)
    u = f * x / zs + 0.5 * camera.width
    v = f * y / zs + 0.5 * camera.height
    lim_x = FOV_CLAMP * 0.5 * camera.width / f
    lim_y = FOV_CLAMP * 0.5 * camera.height / f
    tx = (x / zs).clamp(-lim_x, lim_x) * zs
    ty = (y / zs).clamp(-lim_y, lim_y) * zs
    zero = torch.zeros_like(zs)
    jac = torch.stack([f / zs, zero, -f * tx / zs**2, zero, f / zs, -f * ty / zs**2], -1).reshape(-1, 2, 3)
    m = splats.factors()  # [N, 3, 3] R S
    t = jac @ w2c @ m  # [N, 2, 3]
    cov = t @ t.transpose(1, 2)  # [N, 2, 2]
    a = cov[:, 0, 0] + LOW_PASS
    b = cov[:, 0, 1]
    c = cov[:, 1, 1] + LOW_PASS
    det = a * c - b * b
    visible = (z > NEAR) & (det > 0) & torch.isfinite(det)
    det = torch.where(visible, det, torch.ones_like(det))
    conic = torch.stack([c / det, -b / det, a / det], -1)
    raw_det = cov[:, 0, 0] * cov[:, 1, 1] - b * b
    compensation = torch.sqrt((raw_det / det).clamp(1e-12, 1.0))  # 1e-12: sqrt's gradient stays finite
    return {"uv": torch.stack([u, v], -1), "depth": z, "conic": conic, "cov2d": torch.stack([a, b, c], -1),
            "visible": visible, "compensation": compensation}


def _extent(cov2d: Tensor, opacity: Tensor) -> Tensor:
    """[N, 2] half-widths (x, y) of the box outside which o exp(-q / 2) < ALPHA_MIN: the ellipse
    q = 2 ln(o / ALPHA_MIN) has half-widths sqrt(2 ln(o / ALPHA_MIN) sigma²) along x and y."""
    k2 = 2.0 * torch.log((opacity / ALPHA_MIN).clamp_min(1.0))
    return torch.sqrt(k2[:, None] * cov2d[:, [0, 2]].clamp_min(0.0))


def _pairs(uv: Tensor, conic: Tensor, opacity: Tensor, extent: Tensor, rows: tuple[int, int], width: int
           ) -> tuple[Tensor, Tensor]:
    """(Gaussian, pixel) pairs of the rows [r0, r1) that pass ALPHA_MIN (no gradient).

    Args:
        uv, conic, opacity, extent: [G, 2], [G, 3], [G], [G, 2] of the Gaussians to draw, in depth order
    Returns:
        gid [P] long (index into the G Gaussians), pix [P] long (row-major pixel index in the band)
        with pairs sorted by pixel, then by gid (front to back)
    """
    r0, r1 = rows
    x0 = torch.ceil(uv[:, 0] - extent[:, 0] - 0.5).clamp(0, width).long()
    x1 = torch.floor(uv[:, 0] + extent[:, 0] - 0.5).clamp(-1, width - 1).long() + 1
    y0 = torch.ceil(uv[:, 1] - extent[:, 1] - 0.5).clamp(r0, r1).long()
    y1 = torch.floor(uv[:, 1] + extent[:, 1] - 0.5).clamp(r0 - 1, r1 - 1).long() + 1
    bw, bh = (x1 - x0).clamp_min(0), (y1 - y0).clamp_min(0)
    count = bw * bh
    gid = torch.repeat_interleave(torch.arange(len(uv), device=uv.device), count)
    start = torch.cumsum(count, 0) - count
    local = torch.arange(len(gid), device=uv.device) - start[gid]
    px = x0[gid] + local % bw[gid]
    py = y0[gid] + torch.div(local, bw[gid], rounding_mode="floor")
    dx = px.to(uv.dtype) + 0.5 - uv[gid, 0]
    dy = py.to(uv.dtype) + 0.5 - uv[gid, 1]
    cn = conic[gid]
    power = -0.5 * (cn[:, 0] * dx * dx + cn[:, 2] * dy * dy) - cn[:, 1] * dx * dy
    keep = (power <= 0) & (opacity[gid] * torch.exp(power) >= ALPHA_MIN)
    gid, pix = gid[keep], (py[keep] - r0) * width + px[keep]
    order = torch.sort(pix, stable=True).indices  # gid order (depth) kept within a pixel
    return gid[order], pix[order]


def _composite(gid: Tensor, pix: Tensor, n_pix: int, uv: Tensor, conic: Tensor, opacity: Tensor, colors: Tensor,
               depth: Tensor, width: int, r0: int) -> tuple[Tensor, Tensor, Tensor]:
    """Front-to-back compositing of sorted pairs (differentiable in uv, conic, opacity, colors, depth).

    Returns:
        rgb [n_pix, 3], acc [n_pix], depth [n_pix] (weighted, not divided by acc)
    """
    px = (pix % width).to(uv.dtype) + 0.5
    py = torch.div(pix, width, rounding_mode="floor").to(uv.dtype) + (r0 + 0.5)
    dx, dy = px - uv[gid, 0], py - uv[gid, 1]
    cn = conic[gid]
    power = -0.5 * (cn[:, 0] * dx * dx + cn[:, 2] * dy * dy) - cn[:, 1] * dx * dy
    alpha = (opacity[gid] * torch.exp(power)).clamp_max(ALPHA_MAX)
    trans = torch.exp(exclusive_segment_sum(torch.log1p(-alpha), pix, n_pix))  # transmittance before each pair
    w = alpha * trans
    rgb = torch.zeros(n_pix, 3, dtype=colors.dtype, device=colors.device).index_add(0, pix, w[:, None] * colors[gid])
    acc = torch.zeros(n_pix, dtype=w.dtype, device=w.device).index_add(0, pix, w)
    dep = torch.zeros(n_pix, dtype=w.dtype, device=w.device).index_add(0, pix, w * depth[gid])
    return rgb, acc, dep


def gsplat_available(device: torch.device) -> bool:
    """Whether gsplat's CUDA rasterizer can draw on ``device``."""
    if device.type != "cuda":
        return False
    try:
        import gsplat  # noqa: F401
    except ImportError:
        return False
    return True


def _rasterize_gsplat(splats: Splats, camera: Pinhole, background: Tensor) -> dict[str, Tensor]:
    """gsplat's ``rasterization`` with the same camera model (OpenCV view matrix, principal point at the centre)."""
    from gsplat import rasterization

    c2w = camera.pose(splats.means)
    rotation, centre = world_to_cv_camera(c2w)
    view = torch.eye(4, dtype=c2w.dtype, device=c2w.device)
    view[:3, :3] = rotation
    view[:3, 3] = -rotation @ centre
    K = torch.tensor([[camera.focal, 0.0, 0.5 * camera.width], [0.0, camera.focal, 0.5 * camera.height],
                      [0.0, 0.0, 1.0]], dtype=c2w.dtype, device=c2w.device)
    img, alpha, info = rasterization(splats.means, torch.nn.functional.normalize(splats.quats, dim=-1), splats.scales,
                                  splats.opacities, splats.sh, view[None], K[None], camera.width, camera.height,
                                  near_plane=NEAR, sh_degree=splats.degree, render_mode="RGB+ED",
                                  backgrounds=background[None], packed=False,
                                  rasterize_mode="antialiased" if splats.antialiased else "classic")
    acc = alpha[0, ..., 0]
    uv = info["means2d"][0]
    if uv.requires_grad:
        uv.retain_grad()
    return {"rgb": img[0, ..., :3], "acc": acc, "depth": img[0, ..., 3] * acc, "uv": uv,
            "index": torch.arange(len(splats), device=uv.device)}


def choose_backend(device: torch.device, rows: tuple[int, int] | None = None) -> str:
    """What ``backend="auto"`` draws with on ``device``: gsplat where ``gsplat_available`` (whole images only),
    else numba on a CPU where it is installed, else torch."""
    if rows is None and gsplat_available(device):
        return "gsplat"
    return "numba" if device.type == "cpu" and numba_available() else "torch"


def rasterize(splats: Splats, camera: Pinhole, background: Tensor | None = None, backend: str = "auto",
              rows: tuple[int, int] | None = None) -> dict[str, Tensor]:
    """Render ``splats`` into ``camera`` (module docstring).

    Args:
        background: Tensor  # [3] colour behind the splats (None: black)
        backend: ``torch`` (the pure-torch path, any device), ``numba`` (the compiled forward and backward
            passes of ``enerf.splats.tiles``, CPU), ``gsplat`` (CUDA) or ``auto`` (gsplat where
            ``gsplat_available``; numba on a CPU; else torch); all differentiable
        rows: (r0, r1): render only image rows [r0, r1) (a band; the torch and numba backends, not gsplat),
            e.g. to fit a crop
    Returns:
        dict: rgb [H', W, 3], acc [H', W] (accumulated opacity), depth [H', W] (expected camera z-depth,
        weighted by the splats' weights, not divided by acc), H' = r1 - r0 (the image height by default);
        index [G] long (the Gaussians drawn) and uv [G, 2] (their pixel positions; after a backward pass its
        ``.grad`` holds dL/duv)
    """
    device = splats.means.device
    bg = torch.zeros(3, device=device) if background is None else background.to(device, splats.means.dtype)
    backend = choose_backend(device, rows) if backend == "auto" else backend
    if backend == "gsplat":
        return _rasterize_gsplat(splats, camera, bg)
    r0, r1 = rows if rows is not None else (0, camera.height)
    width = camera.width
    if backend == "numba":  # the same projection compiled, forward and backward (enerf.splats.projection)
        drawn = project_drawn(splats, camera, (r0, r1), (NEAR, FOV_CLAMP, LOW_PASS, ALPHA_MIN))
        uv, idx = drawn["uv"], drawn["index"]
        colors = sh_to_rgb(splats.sh[idx], torch.nn.functional.normalize(splats.means[idx] - camera.centre(splats.means),
                                                                         dim=-1))
        if uv.requires_grad:
            uv.retain_grad()  # the fit's densification reads dL/d(pixel position) of the drawn Gaussians
        rgb, acc, depth = rasterize_tiles(uv, drawn["conic"], drawn["opacity"], colors, drawn["depth"], drawn["extent"],
                                          width, (r0, r1), ALPHA_MIN, ALPHA_MAX)
        return {"rgb": rgb + (1.0 - acc)[..., None] * bg.float(), "acc": acc, "depth": depth, "index": idx, "uv": uv}
    proj = project(splats, camera)
    opacity = splats.opacities * proj["compensation"] if splats.antialiased else splats.opacities
    ext = _extent(proj["cov2d"], opacity)
    inside = proj["visible"] & (proj["uv"][:, 0] + ext[:, 0] > 0) & (proj["uv"][:, 0] - ext[:, 0] < width) \
        & (proj["uv"][:, 1] + ext[:, 1] > r0) & (proj["uv"][:, 1] - ext[:, 1] < r1)
    idx = torch.nonzero(inside).squeeze(1)
    idx = idx[torch.argsort(proj["depth"][idx])]  # front to back
    uv, conic, dep, op, ex = proj["uv"][idx], proj["conic"][idx], proj["depth"][idx], opacity[idx], ext[idx]
    dirs = torch.nn.functional.normalize(splats.means[idx] - camera.centre(splats.means), dim=-1)
    colors = sh_to_rgb(splats.sh[idx], dirs)
    if uv.requires_grad:
        uv.retain_grad()  # the fit's densification reads dL/d(pixel position) of the drawn Gaussians
    drawn = {"index": idx, "uv": uv}
    with torch.no_grad():  # how many pairs each band of rows holds: split so that one band stays under MAX_PAIRS
        area = (2 * ex[:, 0] + 1).clamp_max(width) * (2 * ex[:, 1] + 1).clamp_max(r1 - r0)
        bands = max(1, math.ceil(float(area.sum()) / MAX_PAIRS))
    step = math.ceil((r1 - r0) / bands)
    outs = []
    for b0 in range(r0, r1, step):
        b1 = min(r1, b0 + step)
        with torch.no_grad():
            gid, pix = _pairs(uv.detach(), conic.detach(), op.detach(), ex, (b0, b1), width)
        outs.append(_composite(gid, pix, (b1 - b0) * width, uv, conic, op, colors, dep, width, b0))
    rgb, acc, depth = (torch.cat(parts, 0) for parts in zip(*outs))
    h = r1 - r0
    rgb = rgb + (1.0 - acc)[:, None] * bg
    return {"rgb": rgb.reshape(h, width, 3), "acc": acc.reshape(h, width), "depth": depth.reshape(h, width), **drawn}


def warm_up() -> None:
    """Compile the numba kernels now (one Gaussian into an 8 x 8 image, forward and backward), so that a timed
    loop does not count numba's first compilation (seconds; cached on disk afterwards)."""
    one = Splats(means=torch.tensor([[0.0, 0.0, -2.0]]), log_scales=torch.full((1, 3), -2.0),
                 quats=torch.tensor([[1.0, 0.0, 0.0, 0.0]]), opacity_logits=torch.zeros(1), sh=torch.zeros(1, 4, 3),
                 antialiased=True).map(lambda t: t.requires_grad_(True))
    out = rasterize(one, Pinhole(torch.eye(4)[:3], 8, 8, 8.0), backend="numba")
    (out["rgb"].sum() + out["acc"].sum()).backward()
