"""``enerf data video`` and ``enerf data images``: a rendered clip of known camera motion posed
again, the sharpest-frame choice against scipy's Laplacian, rotation-tagged video and EXIF-turned
photos upright, and bad input as one line with nothing left in --out."""

import importlib.util
import math
import re
import subprocess

import imageio_ffmpeg
import numpy as np
import pytest
from PIL import Image
from scipy.ndimage import gaussian_filter, laplace
from test_colmap import _fails, needs_pycolmap

from enerf.cli import main
from enerf.ingest.photos import collect_photos, copy_upright
from enerf.ingest.colmap_poses import pose_errors
from enerf.synthetic.scene import default_geometry, geometry_from_dict, trace_view
from enerf.ingest.video import MIN_SHARPNESS, analysis_grey, extract_sharpest, open_video, path_jumps, sharpness

HAS_X265 = "libx265" in subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-encoders"],
                                       capture_output=True, text=True).stdout


def _write_clip(path, frames, fps=10, codec="libx264", params=("-qp", "0")):
    """Frames ([H, W, 3] uint8 each) as a video through imageio-ffmpeg's own ffmpeg (lossless luma by default)."""
    height, width = frames[0].shape[:2]
    writer = imageio_ffmpeg.write_frames(str(path), (width, height), fps=fps, codec=codec, macro_block_size=1,
                                         output_params=list(params))
    writer.send(None)
    for frame in frames:
        writer.send(np.ascontiguousarray(frame, dtype=np.uint8).tobytes())
    writer.close()
    return path


def _texture(height, width, seed=0):
    """Blocks of random grey levels, 8 px each: sharp edges everywhere."""
    blocks = np.random.default_rng(seed).integers(0, 256, (math.ceil(height / 8), math.ceil(width / 8)))
    grey = np.kron(blocks, np.ones((8, 8)))[:height, :width]
    return np.repeat(grey[..., None], 3, axis=2).astype(np.uint8)


def _blurred(img, sigma):
    return np.clip(np.round(gaussian_filter(img.astype(np.float64), (sigma, sigma, 0))), 0, 255).astype(np.uint8)


def test_sharpness_is_the_laplacian_variance_and_the_sharpest_frame_of_each_run_is_kept(tmp_path):
    sharp = _texture(48, 64)
    sigmas = [2.0, 0.6, 1.2, 1.5, 3.0, 0.0]  # two runs of 3 frames: the 2nd and the 6th are the least blurred
    clip = _write_clip(tmp_path / "clip.mp4", [_blurred(sharp, s) for s in sigmas])
    kept = {}
    result = extract_sharpest(clip, 2, lambda index, frame: kept.setdefault(index, frame.copy()), progress=False)
    assert result["decoded"] == 6 and result["chosen"] == [1, 5] and sorted(kept) == [1, 5]
    info, reader = open_video(clip)
    decoded = [np.frombuffer(raw, np.uint8).reshape(48, 64, 3) for raw in reader]
    theirs = []
    for frame in decoded:
        grey = frame[..., 0] * 0.299 + frame[..., 1] * 0.587 + frame[..., 2] * 0.114
        theirs.append(laplace(grey / 255.0)[1:-1, 1:-1].var())  # scipy's 4-neighbour Laplacian, interior pixels
    assert [sharpness(analysis_grey(f)) for f in decoded] == pytest.approx(theirs, rel=1e-5)
    assert result["scores"] == pytest.approx([theirs[1], theirs[5]], rel=1e-5)
    assert [int(np.argmax(theirs[:3])), 3 + int(np.argmax(theirs[3:]))] == [1, 5]
    np.testing.assert_array_equal(kept[5], decoded[5])


def test_the_blur_threshold_is_scale_aware():
    """One picture at 360 x 640 and 720 x 1280 scores alike; blurred by 1 % of its short side, it
    falls under MIN_SHARPNESS at both sizes, while the sharp one is far above."""
    from skimage import data

    photo = np.asarray(Image.fromarray(data.astronaut()).resize((1280, 720), Image.Resampling.LANCZOS))
    small = np.asarray(Image.fromarray(photo).resize((640, 360), Image.Resampling.BOX))
    big, little = sharpness(analysis_grey(photo)), sharpness(analysis_grey(small))
    assert analysis_grey(photo).shape == analysis_grey(small).shape == (360, 640)
    assert big == pytest.approx(little, rel=0.05) and min(big, little) > 5 * MIN_SHARPNESS
    for img in (photo, small):
        assert sharpness(analysis_grey(_blurred(img, 0.01 * img.shape[0]))) < MIN_SHARPNESS


@pytest.mark.skipif(not HAS_X265, reason="imageio-ffmpeg's ffmpeg has no libx265")
def test_a_rotation_tagged_hevc_clip_comes_out_upright(tmp_path):
    """A landscape HEVC clip tagged to display turned 90 degrees counter-clockwise, as phones
    store portrait video: frames come out portrait, the marker where the turn puts it."""
    stored = np.zeros((32, 64, 3), np.uint8)
    stored[:8, :16] = (255, 0, 0)  # a red bar at the top left of the stored pixels
    flat = _write_clip(tmp_path / "flat.mp4", [stored] * 3, codec="libx265", params=("-x265-params", "log-level=none"))
    tagged = tmp_path / "tagged.mp4"
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-loglevel", "error", "-display_rotation", "90", "-i", str(flat),
                    "-c", "copy", str(tagged)], check=True)
    info, reader = open_video(tagged)
    frame = np.frombuffer(next(reader), np.uint8).reshape(64, 32, 3)
    reader.close()
    assert info["codec"] == "hevc" and info["source_size"] == (64, 32) and info["size"] == (32, 64)
    red = np.argwhere(frame[..., 0] > 128)
    expected = np.argwhere(np.rot90(stored, 1)[..., 0] > 128)  # counter-clockwise: the bar at the bottom left
    assert red.min(0).tolist() == expected.min(0).tolist() and red.max(0).tolist() == expected.max(0).tolist()
    assert expected.min(0).tolist() == [48, 0]


def test_the_phone_video_decodes_portrait(shared_data):
    """beer.mp4 (../shared/data, skipped without it): portrait H.264 stored as 720 x 1280 with no
    rotation tag, 30 fps for 23.5 s; its first frame comes out 720 wide and 1280 high."""
    path = shared_data / "video" / "beer.mp4"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    info, reader = open_video(path)
    first = np.frombuffer(next(reader), np.uint8)
    reader.close()
    assert info["codec"] == "h264" and info["size"] == info["source_size"] == (720, 1280)
    assert info["frames"] == round(30 * 23.53) and first.size == 720 * 1280 * 3


def _jpeg_with_orientation(path, img, orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    Image.fromarray(img).save(path, quality=95, exif=exif)
    return path


def test_exif_orientation_is_applied_and_mixed_sizes_are_refused(tmp_path, capsys):
    stored = np.zeros((30, 40, 3), np.uint8)
    stored[:10, :10] = 255  # a white square at the top left, as stored
    folder = tmp_path / "photos"
    folder.mkdir()
    _jpeg_with_orientation(folder / "a.jpg", stored, 6)  # 6: shown turned 90 degrees clockwise
    _jpeg_with_orientation(folder / "b.jpg", np.rot90(stored, -1), 1)
    _jpeg_with_orientation(folder / "c.jpg", np.rot90(stored, -1), 1)
    assert collect_photos(folder)[2] == (30, 40)  # upright: 30 wide, 40 high
    copy_upright(folder / "a.jpg", tmp_path / "a.jpg")
    upright = np.asarray(Image.open(tmp_path / "a.jpg"))
    assert upright.shape == (40, 30, 3) and np.abs(upright.astype(int) - np.rot90(stored, -1)).mean() < 3
    assert Image.open(tmp_path / "a.jpg").getexif().get(0x0112, 1) == 1
    _jpeg_with_orientation(folder / "c.jpg", stored, 1)  # 40 x 30: the odd one out
    out = tmp_path / "scene"
    _fails(capsys, [str(folder), "--out", str(out)], out, "a.jpg is 30x40", "c.jpg is 40x30", action="images")


def test_bad_videos_are_one_line_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "scene"
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n")
    _fails(capsys, [str(text), "--out", str(out)], out, "notes.mp4", "not a video", action="video")
    _fails(capsys, [str(tmp_path / "missing.mp4"), "--out", str(out)], out, "not found", action="video")
    clip = _write_clip(tmp_path / "clip.mp4", [_texture(48, 64, seed=k) for k in range(4)],
                       params=("-qp", "0", "-movflags", "+faststart"))  # the index (moov) before the frames (mdat)
    data = clip.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[:data.find(b"mdat") + 4])  # a copy cut off where the frames begin
    _fails(capsys, [str(cut), "--out", str(out)], out, "cut.mp4", "no decodable video frame", action="video")
    sound = tmp_path / "sound.mp4"
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-loglevel", "error", "-f", "lavfi", "-i", "sine=duration=0.2",
                    "-c:a", "aac", str(sound)], check=True)
    _fails(capsys, [str(sound), "--out", str(out)], out, "sound.mp4", "no video stream", action="video")
    grey = _write_clip(tmp_path / "grey.mp4", [np.full((48, 64, 3), 128, np.uint8)] * 6)
    _fails(capsys, [str(grey), "--out", str(out), "--frames", "3"], out, "grey.mp4", "too blurred", action="video")


@needs_pycolmap
def test_frames_that_do_not_register_leave_nothing_and_say_what_to_try(tmp_path, capsys):
    noise = [np.random.default_rng(k).integers(0, 256, (96, 128, 3), dtype=np.uint8) for k in range(4)]
    clip = _write_clip(tmp_path / "noise.mp4", noise)
    out = tmp_path / "scene"
    _fails(capsys, [str(clip), "--out", str(out), "--frames", "4", "--factors", "2"], out,
           "registered", "--frames", "--matcher exhaustive", "--camera_model SIMPLE_PINHOLE", action="video")


def test_path_jumps_finds_a_frame_put_across_the_loop():
    angles = np.radians(np.arange(0, 180, 3.0))  # steps of 2 sin(1.5 deg) on the unit circle
    centres = np.stack([np.cos(angles), np.sin(angles), np.zeros_like(angles)], 1)
    assert path_jumps(centres) == []
    centres[20] = -centres[20]  # frame 20 placed on the far side: the steps 19 -> 20 and 20 -> 21 leap
    assert path_jumps(centres) == [19, 20]


def _arc_cameras(n):
    """n camera-to-world poses ([right, up, back, centre]) on an arc of radius 6 about (0, 0, -6),
    40 degrees wide, rising 0.3, each looking at the arc's centre."""
    from enerf.synthetic.scene import _look_at

    target = np.array([0.0, 0.0, -6.0])
    poses = []
    for k, angle in enumerate(np.radians(np.linspace(-20, 20, n))):
        centre = target + np.array([6 * math.sin(angle), 0.3 * k / (n - 1), 6 * math.cos(angle)])
        poses.append(_look_at(centre, target, 0.0))
    return np.stack(poses)


@needs_pycolmap
def test_a_rendered_clip_is_posed_as_it_was_filmed(tmp_path, capsys):
    """24 frames of the synthetic scene (320 x 240) along a known arc; every 2nd frame kept; the
    registered cameras match the known ones after a similarity alignment."""
    import json

    poses = _arc_cameras(24)
    geometry = geometry_from_dict(default_geometry())
    frames = [np.round(trace_view(geometry, c2w, 240, 320, 260.0)[0] * 255).astype(np.uint8) for c2w in poses]
    clip = _write_clip(tmp_path / "arc.mp4", frames, params=("-crf", "12"))
    out = tmp_path / "scene"
    assert main(["data", "video", str(clip), "--out", str(out), "--frames", "12", "--factors", "2",
                 "--camera_model", "SIMPLE_PINHOLE"]) == 0
    printed = capsys.readouterr().out
    meta = json.loads((out / "transforms.json").read_text())
    n = len(meta["frames"])
    assert n >= 10 and f"frames: 24 decoded, 12 extracted, {n} registered ({100 * n / 12:.0f} %)" in printed
    assert re.search(r"decoding [\d.]+ s, extraction [\d.]+ s, matching [\d.]+ s, mapping [\d.]+ s, writing [\d.]+ s",
                     printed) and "note:" not in printed  # no leap in the camera path
    ours, known = [], []
    for frame in meta["frames"]:
        index = int(frame["file_path"].split("_")[-1].split(".")[0]) - 1  # frame_NNNNN.jpg: its number from 1
        c2w = np.asarray(frame["transform_matrix"])[:3]
        ours.append(np.stack([-c2w[:, 1], c2w[:, 0], c2w[:, 2], c2w[:, 3]], 1))  # as LLFF [down, right, back, centre]
        right, up, back, centre = poses[index].T
        known.append(np.stack([-up, right, back, centre], 1))
    errors = pose_errors(np.stack(ours), np.stack(known))
    assert np.max(errors["centre"]) < 0.02  # 0.3 % seen
    # rotations: each pair of cameras' relative rotation against the filmed one, free of the centre alignment's own
    # rotation (on an arc of centres that alignment tilts every camera alike: 0.1 deg on one CPU, 0.7 on another)
    rot_ours, rot_known = np.stack(ours)[:, :, :3], np.stack(known)[:, :, :3]
    rel_ours = np.einsum("iba,jbc->ijac", rot_ours, rot_ours)  # R_i^T R_j
    rel_known = np.einsum("iba,jbc->ijac", rot_known, rot_known)
    cos = (np.einsum("ijab,ijab->ij", rel_ours, rel_known) - 1.0) / 2.0  # trace(A^T B) = 1 + 2 cos(angle)
    pair_degrees = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))[np.triu_indices(len(ours), 1)]
    assert np.median(pair_degrees) < 0.5 and np.max(pair_degrees) < 2.0
    assert meta["fl_x"] == pytest.approx(260.0, rel=0.05)
    assert sorted(p.name for p in (out / "images").iterdir()) == sorted(f["file_path"][7:] for f in meta["frames"])
    assert not list(tmp_path.glob(".scene*"))
