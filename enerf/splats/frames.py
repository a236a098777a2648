"""Splats moved between frames by a similarity ``x -> s R x + t`` (``Scene.scene_to_world`` or its inverse).

A Gaussian of mean ``mu``, covariance ``S`` and colour function ``c(d)`` (``d``: the unit direction
from the camera to it) becomes, in the new frame, the Gaussian of mean ``s R mu + t``, covariance
``s² R S R^T`` and colour ``c'(d) = c(sign(s) R^T d)``:

* ``means`` mapped as points, ``log_scales`` + ``log |s|``, ``quats`` left-multiplied by ``R``'s
  quaternion (so the Gaussian's axes turn with the frame);
* SH band l (2l + 1 coefficients per channel) mixed by a (2l + 1)² matrix: the basis of band l
  along a rotated direction is a linear mix of the same band (real SH bands are rotation
  invariant), so ``Y_l(M^T d) = Y_l(d) X_l`` for all d, ``X_l`` solved by least squares on a fixed
  set of well-spread directions (exact up to round-off), and the coefficients become ``X_l c``.
  A negative ``s`` (a point reflection ``-I`` folded into the rotation) is the same with
  ``M = -R``: the odd bands change sign.

Frames by name (``--frame``, as ``enerf.data.output_frame.OutputFrame``): ``scene`` is the run's
normalised frame (what the splats are baked in and rendered from), ``world`` the capture's own
(``Scene.scene_to_world``: the frame of ``transforms.json`` / ``poses_bounds.npy``).
"""

from __future__ import annotations

import numpy as np
import torch

from ..data.scene import Scene
from ..errors import DataError
from .gaussians import Splats, sh_basis

__all__ = ["FRAMES", "split_similarity", "rotmat_to_quat", "quat_multiply", "sh_rotation", "splats_to_frame",
           "scene_to_frame", "splats_from_scene", "declared_frame", "splats_into_scene"]

FRAMES = ("world", "scene")


def split_similarity(matrix: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """[4, 4] similarity ``x -> s R x + t`` -> (s, R [3, 3] proper rotation, t [3]); ``s`` < 0 where the
    linear part has a negative determinant (a reflection).

    Raises:
        ValueError: the linear part is not a uniform scale times a rotation (to 1e-6).
    """
    matrix = np.asarray(matrix, np.float64)
    linear = matrix[:3, :3]
    s = float(np.cbrt(np.linalg.det(linear)))
    if s == 0.0 or not np.allclose(linear.T @ linear, s * s * np.eye(3), rtol=1e-6, atol=1e-9 * s * s):
        raise ValueError("the frame transform is not a similarity (rotation, uniform scale, translation)")
    return s, linear / s, matrix[:3, 3].copy()


def rotmat_to_quat(rot: np.ndarray) -> np.ndarray:
    """[3, 3] proper rotation -> [4] unit quaternion w, x, y, z (w >= 0; Shepperd's method)."""
    r = np.asarray(rot, np.float64)
    trace = np.trace(r)
    diag = np.diag(r)
    k = int(np.argmax([trace, *diag]))
    if k == 0:
        w = 0.5 * np.sqrt(1.0 + trace)
        q = np.array([w, (r[2, 1] - r[1, 2]) / (4 * w), (r[0, 2] - r[2, 0]) / (4 * w), (r[1, 0] - r[0, 1]) / (4 * w)])
    else:
        i = k - 1
        j, m = (i + 1) % 3, (i + 2) % 3
        v = 0.5 * np.sqrt(1.0 + r[i, i] - r[j, j] - r[m, m])
        q = np.empty(4)
        q[0] = (r[m, j] - r[j, m]) / (4 * v)
        q[1 + i] = v
        q[1 + j] = (r[j, i] + r[i, j]) / (4 * v)
        q[1 + m] = (r[m, i] + r[i, m]) / (4 * v)
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def quat_multiply(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a b`` of w-x-y-z quaternions (broadcast): [..., 4] x [..., 4] -> [..., 4]."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def _fibonacci_directions(n: int) -> torch.Tensor:
    """[n, 3] float64 unit directions spread evenly over the sphere."""
    k = torch.arange(n, dtype=torch.float64) + 0.5
    z = 1.0 - 2.0 * k / n
    phi = k * np.pi * (3.0 - np.sqrt(5.0))
    r = torch.sqrt(1.0 - z * z)
    return torch.stack([r * torch.cos(phi), r * torch.sin(phi), z], -1)


def sh_rotation(linear: np.ndarray, degree: int) -> torch.Tensor:
    """The [K, K] float64 block-diagonal matrix ``X`` (K = (degree + 1)²) taking SH coefficients
    ``c`` [K] to ``X c`` with ``sum_k (X c)_k Y_k(d) = sum_k c_k Y_k(linear^T d)`` for every unit d
    (``linear``: [3, 3] orthogonal, a rotation or a rotation times -1)."""
    dirs = _fibonacci_directions(64)
    moved = dirs @ torch.as_tensor(np.asarray(linear, np.float64))  # rows: (linear^T d)^T
    a, b = sh_basis(dirs, degree), sh_basis(moved, degree)  # [64, K]
    out = torch.zeros(a.shape[1], a.shape[1], dtype=torch.float64)
    out[0, 0] = 1.0
    for band in range(1, degree + 1):
        lo, hi = band * band, (band + 1) ** 2
        out[lo:hi, lo:hi] = torch.linalg.lstsq(a[:, lo:hi], b[:, lo:hi]).solution  # Y_l(M^T d) = Y_l(d) X_l
    return out


def splats_to_frame(splats: Splats, matrix: np.ndarray) -> Splats:
    """``splats`` moved by the similarity ``matrix`` [4, 4] (module docstring); the inverse frame
    change is ``splats_to_frame(s, np.linalg.inv(matrix))``. Same device and dtype.

    Raises:
        ValueError: ``matrix`` is not a similarity.
    """
    s, rot, t = split_similarity(matrix)
    like = splats.means
    linear = torch.as_tensor(s * rot, dtype=torch.float64, device=like.device)
    means = (splats.means.double() @ linear.T + torch.as_tensor(t, device=like.device)).to(like.dtype)
    q = torch.as_tensor(rotmat_to_quat(rot), dtype=splats.quats.dtype, device=like.device)
    quats = quat_multiply(q.expand_as(splats.quats), splats.quats)
    mix = sh_rotation(np.sign(s) * rot, splats.degree).to(splats.sh.device)
    sh = torch.einsum("jk,nkc->njc", mix, splats.sh.double()).to(splats.sh.dtype)
    return Splats(means, splats.log_scales + float(np.log(abs(s))), quats, splats.opacity_logits.clone(), sh,
                  antialiased=splats.antialiased)


def scene_to_frame(scene: Scene, frame: str) -> np.ndarray:
    """[4, 4] the similarity from ``scene``'s normalised frame to ``frame`` (``world``: ``scene_to_world``;
    ``scene``: the identity)."""
    if frame not in FRAMES:
        raise ValueError(f"frame must be one of {', '.join(FRAMES)}, got {frame!r}")
    return np.asarray(scene.scene_to_world, np.float64) if frame == "world" else np.eye(4)


def splats_from_scene(splats: Splats, scene: Scene, frame: str) -> Splats:
    """Splats in ``scene``'s normalised frame -> in ``frame`` (what ``enerf export splats`` writes)."""
    return splats if frame == "scene" else splats_to_frame(splats, scene_to_frame(scene, frame))


def declared_frame(frame: str | None, source: str = "the splats") -> str:
    """The frame a splat file declares (``read_splat_file``'s; None: ``world``, the frame other tools'
    files are in when they line up with the capture's cameras).

    Raises:
        DataError: ``frame`` is no known frame (one line naming ``source``).
    """
    frame = frame or "world"
    if frame not in FRAMES:
        raise DataError(f"{source}: declares frame {frame!r}; enerf knows {', '.join(FRAMES)}")
    return frame


def splats_into_scene(splats: Splats, scene: Scene, frame: str | None, source: str = "the splats") -> Splats:
    """Splats in ``frame`` (as a file declares it; None: ``world``, the frame other tools' files are
    in when they line up with the capture's cameras) -> ``scene``'s normalised frame.

    Raises:
        DataError: ``frame`` is no known frame (one line naming ``source``).
    """
    frame = declared_frame(frame, source)
    if frame == "scene":
        return splats
    return splats_to_frame(splats, np.linalg.inv(scene_to_frame(scene, frame)))
