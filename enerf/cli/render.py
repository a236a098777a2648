"""``enerf export video --ckpt PATH [--splats F.ply | --field]`` (also ``enerf render``): novel-view videos
(rgb.mp4, depth.mp4) from a NeRF checkpoint, or from splats baked from it (by default the run's
``splats.ply`` when it has one)."""

from __future__ import annotations

from ..config import DATA_ROOT, VideoConfig
from .common import parse_export_args

__all__ = ["cmd_render"]


def cmd_render(argv: list[str], prog: str = "enerf render") -> int:
    """The video export under ``prog``: its two names print the same."""
    from ..export.video import render_video_from_checkpoint

    args, video = parse_export_args(prog, "Render rgb.mp4 / depth.mp4 from a checkpoint (or its splats).",
                                    "output folder (default <run>/video_<path>, <run>/video_<path>_splats when "
                                    "drawing splats)", VideoConfig, argv, splats=True)
    info = render_video_from_checkpoint(args.ckpt, video, DATA_ROOT, args.out, args.device, progress=not args.quiet,
                                        datadir=args.datadir, splats=args.splats, field=args.field,
                                        announce=lambda line: print(line, flush=True))
    source = f"; from the splats of {info['splats']}" if info["splats"] else ""
    print(f"wrote {info['frames']} frames of {info['width']}x{info['height']} ({info['path']} path, "
          f"{info['depth_kind']} colour-mapped{source}) -> {info['rgb']}, {info['depth']}")
    return 0
