"""``enerf data synth|colmap|images|video``: write the embedded synthetic scene, or pose your own
photos or phone video."""

from __future__ import annotations

from ..config import FramesConfig, PoseConfig, SynthConfig
from ..runfolder import check_output_dir
from .common import OneLineParser, add_config_flags, config_from_args

__all__ = ["cmd_data"]

ACTIONS = ("synth", "colmap", "images", "video")


# ``enerf data colmap`` is the older spelling of ``enerf data images`` (the photos as --images DIR);
# it keeps the output docs/data.md gives it: an LLFF scene with images_4/ and images_8/, every pair
# matched. Its other flags and defaults are PoseConfig's, as for images and video.
COLMAP_DEFAULTS = {"layout": "llff", "factors": (4, 8), "matcher": "exhaustive"}

_WHAT = {"images": ("DIR", "folder of photos (png / jpg, one size once upright; other files skipped)",
                    "Pose a folder of phone photos with COLMAP (EXIF orientation applied) and write a scene."),
         "colmap": ("DIR", "folder of photos (png / jpg, one size once upright; other files skipped)",
                    "Pose a folder of photos with COLMAP (pycolmap) and write a scene enerf trains on (LLFF layout "
                    "unless --layout says otherwise)."),
         "video": ("FILE", "video file (.mp4 / .mov, H.264 or HEVC; portrait rotation tags honoured)",
                   "Keep the sharpest frames of a phone video, pose them with COLMAP and write a scene.")}


def _capture_args(action: str, argv: list[str]):
    """The arguments of ``enerf data images|colmap|video``: the input (``--images`` for colmap),
    --out, --overwrite, --quiet and the flags of PoseConfig (and FramesConfig for a video).
    Returns (args, pose config, frames config)."""
    metavar, help_text, description = _WHAT[action]
    parser = OneLineParser(prog=f"enerf data {action}", description=description)
    if action == "colmap":
        parser.add_argument("--images", dest="source", metavar=metavar, required=True, help=help_text)
    else:
        parser.add_argument("source", metavar=metavar, help=help_text)
    parser.add_argument("--out", required=True, help="scene folder to write (must not exist unless --overwrite)")
    add_config_flags(parser, PoseConfig)
    if action == "video":
        add_config_flags(parser, FramesConfig)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    check_output_dir(args.out, "--out")
    pose = config_from_args(PoseConfig, args, defaults=COLMAP_DEFAULTS if action == "colmap" else None)
    return args, pose, config_from_args(FramesConfig, args)


def cmd_images(argv: list[str], action: str = "images") -> int:
    """``enerf data images DIR`` (and ``enerf data colmap --images DIR``): pose the photos, print the
    summary line; images stops when fewer than half of the photos register."""
    from ..ingest.colmap import colmap_scene, summary_line

    args, pose, _ = _capture_args(action, argv)
    info = colmap_scene(args.source, args.out, pose.factors, "exhaustive" if pose.matcher == "auto" else pose.matcher,
                        pose.layout, args.overwrite, pose.seed, pose.camera_model, overlap=pose.overlap,
                        min_share=0.5 if action == "images" else 0.0, progress=not args.quiet)
    print(summary_line(info))
    return 0


def cmd_video(argv: list[str]) -> int:
    from ..ingest.colmap import summary_line
    from ..ingest.video import video_scene

    args, pose, frames = _capture_args("video", argv)
    info = video_scene(args.source, args.out, pose, frames, args.overwrite, progress=not args.quiet)
    n_reg = len(info["registered"])
    print(f"frames: {info['decoded']} decoded, {info['kept']} extracted, {n_reg} registered "
          f"({100 * n_reg / info['kept']:.0f} %)")
    print(summary_line(info))
    return 0


def cmd_data(argv: list[str]) -> int:
    from ..synthetic.scene import synth_main

    if argv and argv[0] == "colmap":
        return cmd_images(argv[1:], action="colmap")
    if argv and argv[0] in ("images", "video"):
        return {"images": cmd_images, "video": cmd_video}[argv[0]](argv[1:])
    parser = OneLineParser(prog="enerf data", description="Dataset utilities.")
    parser.add_argument("action", choices=ACTIONS,
                        help="synth: write the embedded synthetic scene; colmap: pose your own photos (colmap --help); "
                             "images DIR: phone photos, EXIF orientation applied (images --help); video FILE: a phone "
                             "video's sharpest frames (video --help)")
    parser.add_argument("--out", required=True, help="output folder (LLFF layout)")
    add_config_flags(parser, SynthConfig)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    cfg = config_from_args(SynthConfig, args)
    check_output_dir(args.out, "--out")
    path = synth_main(args.out, cfg.views, cfg.width, cfg.height, cfg.seed, args.overwrite)
    print(f"wrote synthetic LLFF scene to {path}")
    return 0
