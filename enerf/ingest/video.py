"""Frames of a phone video for ``enerf data video``: one decoding pass with the ffmpeg binary that
``imageio-ffmpeg`` ships (H.264, HEVC...; no system ffmpeg), the sharpest frame of each window of
consecutive frames kept, as instant-ngp's and nerfstudio's video tools keep them.

Orientation: phones store portrait video as landscape pixels plus a rotation tag (the
``rotate`` tag of older files, a display matrix in newer ones). ffmpeg applies it while decoding
(``-autorotate``, on by default) and the frame size ``imageio_ffmpeg.read_frames`` reports is
the size of what ffmpeg sends, i.e. after the turn; frames come out upright either way.

Sharpness: the variance of the 4-neighbour Laplacian of the frame's luma, measured on a copy
scaled (box filter) to ``ANALYSIS_SIDE`` pixels on its short side, with values in [0, 1]. At a
fixed analysis size the score is that of the picture, not of the video's resolution: a 4K and a
480p recording of the same shot score alike, so one threshold (``MIN_SHARPNESS``) serves both.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from ..config import FramesConfig, PoseConfig
from ..errors import ConfigError, DataError
from ..progress import progress_bar

__all__ = ["ANALYSIS_SIDE", "MIN_SHARPNESS", "VIDEO_RETRY", "VideoInfo", "open_video", "analysis_grey", "sharpness",
           "window_of", "path_jumps", "extract_sharpest", "video_scene"]

ANALYSIS_SIDE = 360
MIN_SHARPNESS = FramesConfig.min_sharpness  # below it a frame is too blurred to keep (its comment: why)


class VideoInfo(dict):
    """What ffmpeg says of a video before decoding: ``codec``, ``size`` (width, height of the
    decoded, upright frames), ``source_size`` (as stored), ``fps``, ``duration`` (s) and
    ``frames`` (fps x duration, an estimate: the exact count needs a decoding pass)."""


def open_video(path: Path) -> tuple[VideoInfo, Iterator[bytes]]:
    """Start decoding ``path``: its ``VideoInfo`` and an iterator of raw RGB24 frames (bytes).

    Raises:
        DataError: missing file, or a file ffmpeg cannot read as a video.
    """
    import logging

    import imageio_ffmpeg

    logging.getLogger("imageio_ffmpeg").setLevel(logging.ERROR)  # its warning that a rotated size differs
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: video file not found")
    reader = imageio_ffmpeg.read_frames(str(path))
    try:
        meta = next(reader)
    except (OSError, RuntimeError, StopIteration, IndexError, AttributeError) as exc:
        reader.close()
        raise DataError(_unreadable(path, str(exc))) from None
    fps, duration = float(meta.get("fps") or 0.0), float(meta.get("duration") or 0.0)
    info = VideoInfo(codec=meta.get("codec", "?"), size=tuple(meta["size"]), source_size=tuple(meta["source_size"]),
                     fps=fps, duration=duration, frames=max(1, round(fps * duration)))
    return info, reader


def _unreadable(path: Path, log: str) -> str:
    """Why ffmpeg gave no frame, from its log: a video stream without a decodable frame (a cut-off
    or damaged file), a file without a video stream, or not a media file at all."""
    if re.search(r"Stream #\S+.*: Video:", log):
        return f"{path}: no decodable video frame (cut off or damaged); copy the video again or re-export it"
    if "Stream #" in log:
        return f"{path}: has no video stream (audio only?); give the video recording itself"
    return f"{path}: not a video ffmpeg can read; give an .mp4 / .mov recording (H.264 or HEVC)"


def analysis_grey(frame: np.ndarray, side: int = ANALYSIS_SIDE) -> np.ndarray:
    """The frame's luma (Rec. 601 weights) in [0, 1], box-scaled so its short side is ``side``.

    Args:
        frame: np.ndarray  # [H, W, 3] uint8
    Returns:
        np.ndarray  # [h, w] float32, min(h, w) == side (frames smaller than that are not enlarged)
    """
    from PIL import Image

    grey = (frame[..., 0] * 0.299 + frame[..., 1] * 0.587 + frame[..., 2] * 0.114).astype(np.float32) / 255.0
    h, w = grey.shape
    scale = side / min(h, w)
    if scale >= 1.0:
        return grey
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(grey, mode="F").resize(size, Image.Resampling.BOX), dtype=np.float32)


def sharpness(grey: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian over the interior pixels of ``grey`` ([h, w], h, w >= 3)."""
    g = np.asarray(grey, dtype=np.float64)
    lap = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4.0 * g[1:-1, 1:-1]
    return float(lap.var())


def path_jumps(centres: np.ndarray, factor: float = 5.0) -> list[int]:
    """Where a camera path leaps: the indices ``i`` whose step to ``i + 1`` is more than ``factor``
    times the median step. Frames a fraction of a second apart move little, so a leap is a frame
    COLMAP placed wrongly (repeating texture, a symmetric subject).

    Args:
        centres: np.ndarray  # [N, 3] camera centres in frame order
    """
    steps = np.linalg.norm(np.diff(np.asarray(centres, np.float64), axis=0), axis=1)
    if len(steps) < 2:
        return []
    return [int(i) for i in np.flatnonzero(steps > factor * np.median(steps))]


def window_of(index: int, n_frames: int, n_windows: int) -> int:
    """The window of frame ``index`` when ``n_frames`` (an estimate) are cut into ``n_windows``
    runs of consecutive frames of near-equal length; frames past the estimate join the last."""
    return min(index * n_windows // max(n_frames, 1), n_windows - 1)


def extract_sharpest(
    path: Path,
    n_keep: int,
    write: Callable[[int, np.ndarray], None],
    min_sharpness: float = MIN_SHARPNESS,
    progress: bool = True,
) -> dict:
    """Decode ``path`` once and pass the sharpest frame of each of ``n_keep`` windows of consecutive
    frames to ``write(index, frame)`` (index: the frame's place in the video from 0; frame:
    np.ndarray  # [H, W, 3] uint8, upright, read-only). Only the current window's best frame is
    held. A window whose best frame scores under ``min_sharpness`` is skipped.

    Returns:
        dict: ``info`` (``VideoInfo``), ``decoded`` (frames decoded), ``kept`` (windows written),
        ``blurred`` (windows skipped), ``scores`` (score of each kept frame), ``best`` (highest score
        of the video), ``chosen`` (index of each kept frame in the video)
    Raises:
        DataError: not a video, no decodable frame, or every window too blurred.
    """
    info, reader = open_video(path)
    width, height = info["size"]
    n_keep = max(1, min(int(n_keep), info["frames"]))
    best: tuple[float, int, np.ndarray | None] = (-1.0, -1, None)
    window, kept, blurred, scores, chosen, top = 0, 0, 0, [], [], 0.0

    def flush() -> None:
        nonlocal kept, blurred
        score, index, frame = best
        if frame is None:
            return
        if score < min_sharpness:
            blurred += 1
            return
        write(index, frame)
        kept += 1
        scores.append(score)
        chosen.append(index)

    bar = progress_bar(info["frames"], "decoding", enabled=progress, unit="frame")
    decoded = 0
    try:
        for raw in reader:
            frame = np.frombuffer(raw, np.uint8).reshape(height, width, 3)
            w = window_of(decoded, info["frames"], n_keep)
            if w != window:
                flush()
                window, best = w, (-1.0, -1, None)
            score = sharpness(analysis_grey(frame))
            top = max(top, score)
            if score > best[0]:
                best = (score, decoded, frame)  # a view of the bytes ffmpeg sent: no copy
            decoded += 1
            bar.update(1)
    except RuntimeError as exc:  # a truncated stream: keep what was decoded
        if decoded == 0:
            raise DataError(f"{path}: no decodable video frame ({str(exc).splitlines()[0]}); "
                            "re-export the video (H.264 or HEVC)") from None
    finally:
        bar.close()
        reader.close()
    if decoded == 0:
        raise DataError(f"{path}: no decodable video frame; re-export the video (H.264 or HEVC)")
    flush()
    if kept == 0:
        raise DataError(f"{path}: every frame is too blurred (sharpest {top:.1e}, needs {min_sharpness:.1e}: "
                        f"variance of the Laplacian at {ANALYSIS_SIDE} px); film again, moving the phone slowly")
    return {"info": info, "decoded": decoded, "kept": kept, "blurred": blurred, "scores": scores,
            "best": top, "chosen": chosen}



VIDEO_RETRY = "try more frames (--frames 200), --matcher exhaustive, or a simpler camera (--camera_model SIMPLE_PINHOLE)"


def video_scene(
    video: str | Path,
    out: str | Path,
    pose: PoseConfig = PoseConfig(),
    frames: FramesConfig = FramesConfig(),
    overwrite: bool = False,
    say: Callable[[str], None] = print,
    progress: bool = True,
) -> dict:
    """``enerf data video``: the sharpest of every run of consecutive frames (``extract_sharpest``)
    written as ``images/frame_NNNNN.jpg`` (NNNNN: its number in the video, from 1; JPEG quality 95), posed with COLMAP on one shared camera
    (``enerf.ingest.colmap.pose_folder``; matcher ``auto`` is sequential), the scene built beside
    ``out`` and renamed into place.

    Returns:
        ``pose_folder``'s dict with ``out``, ``decoded``, ``kept``, ``blurred`` (windows skipped),
        ``info`` (``VideoInfo``), ``jumps`` (leaps of the camera path, ``path_jumps``) and ``seconds``
        added; ``stages`` starts with ``decoding``.
    Raises:
        DataError / ConfigError / EnerfError: not a video, no decodable frame, every frame blurred,
            fewer than half the kept frames (or 3) registered, no pycolmap; ``out`` is then as it was.
    """
    from PIL import Image

    from .colmap import check_pose_options, import_pycolmap, pose_folder
    from .photos import built_beside, check_out

    start = time.perf_counter()
    video, out = Path(video), Path(out)
    matcher = "sequential" if pose.matcher == "auto" else pose.matcher
    factors = check_pose_options(pose.factors, matcher, pose.layout, pose.camera_model, pose.overlap)
    check_out(out, overwrite, video)
    pycolmap = import_pycolmap()
    pycolmap.logging.minloglevel = 2
    with built_beside(out, overwrite) as tmp:
        (tmp / "images").mkdir()
        names = []

        def write(index: int, frame: np.ndarray) -> None:
            names.append(f"frame_{index + 1:05d}.jpg")  # the frame's number in the video, from 1
            Image.fromarray(frame).save(tmp / "images" / names[-1], quality=95)

        kept = extract_sharpest(video, frames.frames, write, frames.min_sharpness, progress)
        decoding = time.perf_counter() - start
        info = kept["info"]
        width, height = info["size"]
        rotated = " (turned upright from {}x{})".format(*info["source_size"]) if info["size"] != info["source_size"] else ""
        skipped = f", {kept['blurred']} run(s) skipped as too blurred" if kept["blurred"] else ""
        say(f"decoding: {kept['decoded']} frames of {width}x{height}{rotated} ({info['codec']}, {info['fps']:g} fps), "
            f"kept the sharpest of each run of ~{kept['decoded'] / frames.frames:.1f}: {kept['kept']} frames{skipped}, "
            f"{decoding:.1f} s")
        if len(names) < 3:
            raise DataError(f"{video}: only {len(names)} sharp frame(s) kept, at least 3 are needed; "
                            "film longer, moving the phone slowly")
        if min(width, height) < max(factors, default=1):
            raise ConfigError(f"{video}: frames of {width}x{height} are smaller than factor {max(factors)}; "
                              "lower --factors")
        posed = pose_folder(pycolmap, tmp, names, (width, height), factors, matcher, pose.layout, pose.camera_model,
                            pose.seed, pose.overlap, min_share=0.5, retry=VIDEO_RETRY, say=say, progress=progress)
        jumps = path_jumps(posed["centres"])
        if jumps:
            where = ", ".join(f"{posed['registered'][i]} -> {posed['registered'][i + 1]}" for i in jumps[:5])
            say(f"note: the camera path leaps {len(jumps)} time(s) between neighbouring frames ({where}); those frames "
                f"may be misplaced (repeating texture or a symmetric subject misleads the matching)")
    return {**posed, "out": out, "decoded": kept["decoded"], "kept": kept["kept"], "blurred": kept["blurred"],
            "info": info, "stages": {"decoding": decoding, **posed["stages"]}, "jumps": len(jumps),
            "seconds": time.perf_counter() - start}
