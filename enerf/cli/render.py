"""``enerf render --ckpt PATH``: novel-view videos (rgb.mp4, depth.mp4) from a NeRF checkpoint."""

from __future__ import annotations

from ..config import VideoConfig
from .common import DATA_ROOT, OneLineParser, add_ckpt_flags, add_config_flags, config_from_args

__all__ = ["cmd_render"]


def cmd_render(argv: list[str]) -> int:
    from ..export.video import render_video_from_checkpoint

    parser = OneLineParser(prog="enerf render", description="Render rgb.mp4 / depth.mp4 from a checkpoint.")
    add_ckpt_flags(parser)
    parser.add_argument("--out", default=None, help="output folder (default <run>/video_<path>)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_flags(parser, VideoConfig)
    args = parser.parse_args(argv)
    video = config_from_args(VideoConfig, args)
    info = render_video_from_checkpoint(args.ckpt, video, DATA_ROOT, args.out, args.device, progress=not args.quiet)
    print(f"wrote {info['frames']} frames of {info['width']}x{info['height']} ({info['path']} path, "
          f"{info['depth_kind']} colour-mapped) -> {info['rgb']}, {info['depth']}")
    return 0
