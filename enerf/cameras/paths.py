"""Camera-pose helpers and render paths with LLFF / nerf-pytorch conventions.

Poses are camera-to-world matrices whose columns are the camera's [right, up, back]
axes followed by its position (``[..., 3, 4]``); a camera looks along ``-back``.
The functions mirror nerf-pytorch's ``load_llff.py`` (``normalize``, ``viewmatrix``,
``poses_avg``, ``render_path_spiral``) without the extra ``hwf`` column; for captures that
walk around an object, ``look_at_point``, ``focus_box`` and ``ellipse_path`` follow
mip-NeRF 360's ``focus_point_fn`` and ``generate_ellipse_path``. Path files (what ``enerf view``
saves): ``enerf.cameras.path_file``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "normalize",
    "viewmatrix",
    "poses_avg",
    "to_homogeneous",
    "render_path_spiral",
    "llff_spiral_path",
    "spherical_path",
    "orbit_path",
    "interpolated_path",
    "keyframe_path",
    "look_at_point",
    "focus_box",
    "ellipse_path",
]


def normalize(x: np.ndarray) -> np.ndarray:
    """``x / |x|`` for one vector."""
    return x / np.linalg.norm(x)


def viewmatrix(back: np.ndarray, up: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Camera-to-world [3, 4] whose back axis is ``back`` and whose up axis is closest to ``up``."""
    vec2 = normalize(back)
    vec0 = normalize(np.cross(up, vec2))
    vec1 = normalize(np.cross(vec2, vec0))
    return np.stack([vec0, vec1, vec2, pos], 1)


def poses_avg(poses: np.ndarray) -> np.ndarray:
    """The "average" camera of ``poses`` [N, 3, 4+]: mean centre, summed back and up axes.

    Returns:
        c2w: np.ndarray  # [3, 4]
    """
    center = poses[:, :3, 3].mean(0)
    back = normalize(poses[:, :3, 2].sum(0))
    up = poses[:, :3, 1].sum(0)
    return viewmatrix(back, up, center)


def to_homogeneous(pose: np.ndarray) -> np.ndarray:
    """[..., 3, 4] -> [..., 4, 4] by appending the row [0, 0, 0, 1]."""
    bottom = np.broadcast_to(np.array([0.0, 0.0, 0.0, 1.0], dtype=pose.dtype), pose.shape[:-2] + (1, 4))
    return np.concatenate([pose[..., :3, :4], bottom], axis=-2)


def render_path_spiral(
    c2w: np.ndarray,
    up: np.ndarray,
    rads: np.ndarray,
    focal: float,
    zrate: float,
    rots: float,
    n_frames: int,
) -> np.ndarray:
    """nerf-pytorch's spiral: cameras circle ``c2w`` with radii ``rads`` looking at depth ``focal``.

    Args:
        c2w: np.ndarray  # [3, 4] centre pose of the spiral.
        up: np.ndarray  # [3] world up used to orient every frame.
        rads: np.ndarray  # [3] spiral radii along the centre pose's right, up and back axes.

    Returns:
        poses: np.ndarray  # [n_frames, 3, 4]
    """
    rads = np.append(np.asarray(rads, dtype=np.float64), 1.0)
    frames = []
    for theta in np.linspace(0.0, 2.0 * np.pi * rots, n_frames + 1)[:-1]:
        c = c2w[:3, :4] @ (np.array([np.cos(theta), -np.sin(theta), -np.sin(theta * zrate), 1.0]) * rads)
        z = normalize(c - c2w[:3, :4] @ np.array([0.0, 0.0, -focal, 1.0]))
        frames.append(viewmatrix(z, up, c))
    return np.stack(frames, 0)


def llff_spiral_path(
    poses: np.ndarray, bounds: np.ndarray, n_frames: int = 120, path_zflat: bool = False
) -> np.ndarray:
    """The video path nerf-pytorch renders for a forward-facing LLFF scene.

    The spiral looks at a focus depth between the closest and a far depth
    (``dt = 0.75`` in disparity), with radii from the 90th percentile of the camera
    positions, two rotations and ``zrate = 0.5``. ``path_zflat`` flattens it into one
    circle at a fixed depth with ``n_frames // 2`` frames.

    Args:
        poses: np.ndarray  # [N, 3, 4] scene-space poses (after rescale / recenter).
        bounds: np.ndarray  # [N, 2] scene-space near / far bounds.

    Returns:
        render_poses: np.ndarray  # [M, 3, 4]
    """
    c2w = poses_avg(poses)
    up = normalize(poses[:, :3, 1].sum(0))
    close_depth, inf_depth = bounds.min() * 0.9, bounds.max() * 5.0
    dt = 0.75
    focal = 1.0 / ((1.0 - dt) / close_depth + dt / inf_depth)
    rads = np.percentile(np.abs(poses[:, :3, 3]), 90, 0)
    rots = 2
    if path_zflat:
        c2w = c2w.copy()
        c2w[:3, 3] = c2w[:3, 3] - close_depth * 0.1 * c2w[:3, 2]
        rads[2] = 0.0
        rots = 1
        n_frames = n_frames // 2
    return render_path_spiral(c2w, up, rads, focal, zrate=0.5, rots=rots, n_frames=n_frames)


def spherical_path(radius: float, height: float, n_frames: int = 120) -> np.ndarray:
    """A circle of cameras around the origin at ``z = height`` looking at the z axis.

    This is nerf-pytorch's ``spherify_poses`` path (scene-space radius ``radius`` of the
    sphere the cameras lie on); frames are spaced without repeating the first one.

    Returns:
        render_poses: np.ndarray  # [n_frames, 3, 4]
    """
    radcircle = np.sqrt(max(radius**2 - height**2, 0.0))
    up = np.array([0.0, 0.0, -1.0])
    frames = []
    for th in np.linspace(0.0, 2.0 * np.pi, n_frames, endpoint=False):
        origin = np.array([radcircle * np.cos(th), radcircle * np.sin(th), height])
        vec2 = normalize(origin)
        vec0 = normalize(np.cross(vec2, up))
        vec1 = normalize(np.cross(vec2, vec0))
        frames.append(np.stack([vec0, vec1, vec2, origin], 1))
    return np.stack(frames, 0)


def orbit_path(n_frames: int = 40, elevation_deg: float = -30.0, radius: float = 4.0) -> np.ndarray:
    """nerf-pytorch's Blender video path: ``pose_spherical(theta, elevation, radius)`` for theta in
    ``linspace(-180, 180, n_frames + 1)[:-1]``; cameras on a circle looking at the origin.

    Returns:
        np.ndarray  # [n_frames, 3, 4] camera-to-world, columns [right, up, back, t]
    """
    poses = []
    for theta in np.linspace(-180.0, 180.0, n_frames + 1)[:-1]:
        th, ph = math.radians(theta), math.radians(elevation_deg)
        trans = np.eye(4)
        trans[2, 3] = radius
        rot_phi = np.array([[1, 0, 0, 0], [0, math.cos(ph), -math.sin(ph), 0], [0, math.sin(ph), math.cos(ph), 0],
                            [0, 0, 0, 1]])
        rot_theta = np.array([[math.cos(th), 0, -math.sin(th), 0], [0, 1, 0, 0], [math.sin(th), 0, math.cos(th), 0],
                              [0, 0, 0, 1]])
        c2w = np.array([[-1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]) @ rot_theta @ rot_phi @ trans
        poses.append(c2w[:3, :4])
    return np.stack(poses).astype(np.float32)


def _hermite(points: np.ndarray, seg: np.ndarray, s: np.ndarray, smoothness: float) -> np.ndarray:
    """Points [n, d] on the cubic Hermite curve through ``points`` [K, d] at segment ``seg`` [n]
    (int, in [0, K - 2]) and local parameter ``s`` [n] in [0, 1].

    The tangents blend the chord of the segment (``smoothness`` 0: straight lines between the
    points) with Catmull-Rom's ``(P[k+1] - P[k-1]) / 2`` (``smoothness`` 1: the uniform
    Catmull-Rom spline; the end tangents repeat the end points)."""
    padded = np.concatenate([points[:1], points, points[-1:]], axis=0)
    p0, p1, p2, p3 = padded[seg], padded[seg + 1], padded[seg + 2], padded[seg + 3]
    a = float(smoothness)
    chord = p2 - p1
    m1 = (1.0 - a) * chord + a * 0.5 * (p2 - p0)
    m2 = (1.0 - a) * chord + a * 0.5 * (p3 - p1)
    s = s[:, None]
    s2, s3 = s * s, s * s * s
    return (2 * s3 - 3 * s2 + 1) * p1 + (s3 - 2 * s2 + s) * m1 + (-2 * s3 + 3 * s2) * p2 + (s3 - s2) * m2


def keyframe_path(poses: np.ndarray, n_frames: int, seconds=None, fovs=None,
                  smoothness: float = 1.0) -> tuple[np.ndarray, np.ndarray | None]:
    """Frames through keyframes ``poses`` at even times: keyframe k is reached at the sum of
    ``seconds[:k]`` (the time from each keyframe to the next; default 1 each), and frame j of
    ``n_frames`` is at ``j / (n_frames - 1)`` of the whole duration.

    Positions, back and up axes (and the fields of view) follow ``_hermite``'s curve with
    ``smoothness`` (0: straight lines, 1: Catmull-Rom); each frame is re-orthonormalised with
    ``viewmatrix``. With equal ``seconds`` and smoothness 1 this is ``interpolated_path``.

    Args:
        poses: np.ndarray  # [K, 3, 4+], K >= 1
        seconds: np.ndarray  # [K] or [K - 1] (the last keyframe's is not used), > 0
        fovs: np.ndarray  # [K] field of view of each keyframe (any unit), or None
    Returns:
        (poses: np.ndarray  # [n_frames, 3, 4], fovs: np.ndarray  # [n_frames] or None)
    """
    poses = np.asarray(poses, dtype=np.float64)[:, :3, :4]
    k = len(poses)
    fov = None if fovs is None else np.asarray(fovs, dtype=np.float64).reshape(k)
    if k == 1 or n_frames == 1:
        return np.repeat(poses[:1], n_frames, axis=0), None if fov is None else np.repeat(fov[:1], n_frames)
    dur = np.ones(k - 1) if seconds is None else np.asarray(seconds, dtype=np.float64).reshape(-1)[:k - 1]
    starts = np.concatenate([[0.0], np.cumsum(dur)])  # [K] time of each keyframe
    times = np.linspace(0.0, starts[-1], n_frames)
    seg = np.clip(np.searchsorted(starts, times, side="right") - 1, 0, k - 2)
    s = np.clip((times - starts[seg]) / np.maximum(dur[seg], 1e-12), 0.0, 1.0)
    pos = _hermite(poses[:, :3, 3], seg, s, smoothness)
    back = _hermite(poses[:, :3, 2], seg, s, smoothness)
    up = _hermite(poses[:, :3, 1], seg, s, smoothness)
    frames = np.stack([viewmatrix(b, v, c) for b, v, c in zip(back, up, pos)], 0)
    return frames, None if fov is None else _hermite(fov[:, None], seg, s, smoothness)[:, 0]


def interpolated_path(poses: np.ndarray, n_frames: int) -> np.ndarray:
    """A smooth path through ``poses`` in their order (Catmull-Rom on positions and axes).

    Positions, back and up axes are splined separately and the frame is re-orthonormalised
    with ``viewmatrix``, so every frame is a rotation; frame ``k * (n_frames - 1) / (N - 1)``
    (when that is an integer) is exactly pose ``k``.

    Args:
        poses: np.ndarray  # [N, 3, 4], N >= 1
    Returns:
        render_poses: np.ndarray  # [n_frames, 3, 4]
    """
    return keyframe_path(poses, n_frames)[0]


def look_at_point(poses: np.ndarray) -> np.ndarray:
    """The point closest to all the cameras' optical axes, in the least-squares sense.

    Minimises ``sum_i |(I - d_i d_i^T)(p - o_i)|^2`` over p (o_i: camera centre, d_i: unit viewing
    direction, ``-back``), i.e. solves ``sum_i (I - d_i d_i^T) p = sum_i (I - d_i d_i^T) o_i``
    (mip-NeRF 360's ``focus_point_fn``). For cameras that all look at one point, that point.

    Args:
        poses: np.ndarray  # [N, 3, 4+] camera-to-world
    Returns:
        np.ndarray  # [3] float64
    Raises:
        ValueError: the optical axes are (nearly) parallel, so no point is looked at (a
            forward-facing capture).
    """
    poses = np.asarray(poses, np.float64)
    dirs = -poses[:, :3, 2] / np.linalg.norm(poses[:, :3, 2], axis=-1, keepdims=True)
    projectors = np.eye(3) - dirs[:, :, None] * dirs[:, None, :]  # [N, 3, 3]
    lhs = projectors.sum(0)
    rhs = (projectors @ poses[:, :3, 3, None]).sum(0)[:, 0]
    if np.linalg.eigvalsh(lhs).min() < 1e-6 * len(poses):
        raise ValueError("the cameras' optical axes are (nearly) parallel, so they look at no one point "
                         "(a forward-facing capture): use path spiral or interp")
    return np.linalg.solve(lhs, rhs)


def focus_box(poses: np.ndarray, fraction: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """A cube around ``look_at_point(poses)`` of half-size ``fraction`` times the median distance
    from the cameras to that point (an object that fills a 50-degree view has about 0.47).

    Returns:
        (lo, hi): np.ndarray  # [3] each
    """
    poses = np.asarray(poses, np.float64)
    focus = look_at_point(poses)
    half = fraction * float(np.median(np.linalg.norm(poses[:, :3, 3] - focus, axis=-1)))
    return focus - half, focus + half


def ellipse_path(poses: np.ndarray, n_frames: int = 120, percentile: float = 90.0) -> np.ndarray:
    """An ellipse of cameras around the point the cameras look at, every frame looking at it.

    As mip-NeRF 360's ``generate_ellipse_path`` (nerfstudio's ``ellipse`` path): the up axis is
    the cameras' mean up axis; the ellipse lies in the plane orthogonal to it at the cameras'
    mean height above ``look_at_point``; its axes are the principal directions of the camera
    centres in that plane and its radii the ``percentile``-th percentile of their offsets along
    them. Frames are spaced evenly in angle, without repeating the first.

    Args:
        poses: np.ndarray  # [N, 3, 4+] camera-to-world (training cameras)
    Returns:
        render_poses: np.ndarray  # [n_frames, 3, 4] float64
    Raises:
        ValueError: parallel optical axes (``look_at_point``).
    """
    poses = np.asarray(poses, np.float64)
    focus = look_at_point(poses)
    up = normalize(poses[:, :3, 1].sum(0))
    rel = poses[:, :3, 3] - focus
    height = float((rel @ up).mean())
    planar = rel - (rel @ up)[:, None] * up
    # Principal directions of the centres within the plane (the third eigenvector is ~up).
    basis = np.linalg.eigh(planar.T @ planar)[1][:, ::-1]
    axis0 = normalize(basis[:, 0] - (basis[:, 0] @ up) * up)
    axis1 = np.cross(up, axis0)
    radii = [max(float(np.percentile(np.abs(planar @ a), percentile)), 1e-9) for a in (axis0, axis1)]
    frames = []
    for theta in np.linspace(0.0, 2.0 * np.pi, n_frames, endpoint=False):
        pos = focus + height * up + radii[0] * np.cos(theta) * axis0 + radii[1] * np.sin(theta) * axis1
        frames.append(viewmatrix(pos - focus, up, pos))
    return np.stack(frames, 0)
