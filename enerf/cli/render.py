"""``enerf render --ckpt PATH``: novel-view videos (rgb.mp4, depth.mp4) from a NeRF checkpoint."""

from __future__ import annotations

from ..config import DATA_ROOT, VideoConfig
from .common import parse_export_args

__all__ = ["cmd_render"]


def cmd_render(argv: list[str]) -> int:
    from ..export.video import render_video_from_checkpoint

    args, video = parse_export_args("enerf render", "Render rgb.mp4 / depth.mp4 from a checkpoint.",
                                    "output folder (default <run>/video_<path>)", VideoConfig, argv)
    info = render_video_from_checkpoint(args.ckpt, video, DATA_ROOT, args.out, args.device, progress=not args.quiet,
                                        datadir=args.datadir)
    print(f"wrote {info['frames']} frames of {info['width']}x{info['height']} ({info['path']} path, "
          f"{info['depth_kind']} colour-mapped) -> {info['rgb']}, {info['depth']}")
    return 0
