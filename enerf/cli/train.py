"""``enerf train``: fit a NeRF from flags / a config file, score held-out views.

Config files use configargparse's ``key = value`` syntax; nerf-pytorch's keys are accepted with
the same meaning (``FLAG_ALIASES``, ``NERF_PYTORCH_IGNORED``), so an existing
nerf-pytorch config file works unchanged.

Without a config file, what no flag sets comes from the device's preset (``--preset auto``: the
GPU settings on CUDA, the 10-minute CPU settings otherwise; ``enerf.config.presets``, packaged with
enerf), chosen by the scene's layout and what its cameras show (forward-facing or walk-around,
``--scene_kind auto``: ``enerf.cameras.scene_kind``); the command says the device and why
(``--device auto``: ``enerf.device``), the scene and the preset in its first line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import configargparse

from ..config import DATA_ROOT, FLAG_ALIASES, NERF_PYTORCH_IGNORED, RunConfig
from ..config.presets import PRESET_CHOICES, Preset, preset_line, preset_name
from ..config.resolve import config_with, resolve
from ..errors import ConfigError
from ..train.estimate import duration_text
from .common import OneLineParser, add_config_flags, config_from_args, given_values, parse_bool
from .view import add_viewer_flags

__all__ = ["build_train_parser", "run_config_from_args", "add_run_flags", "print_metrics", "fidelity_line", "preview_line", "cmd_train",
           "train_config", "read_config_file"]


def build_train_parser() -> configargparse.ArgumentParser:
    """The ``enerf train`` parser: one flag per RunConfig field, nerf-pytorch's names as aliases."""
    parser = OneLineParser(
        prog="enerf train",
        description="Train a NeRF (vanilla or equilibrated-weight-conditioned) and score held-out views.",
        config_file_parser_class=configargparse.DefaultConfigFileParser,
    )
    parser.add_argument("--config", is_config_file=True, help="configargparse file (key = value per line)")
    add_config_flags(parser, RunConfig, aliases=FLAG_ALIASES)
    add_run_flags(parser)
    parser.add_argument("--preset", choices=PRESET_CHOICES, default="auto",
                        help="settings for what no config file or flag sets, packaged with enerf (configs/<name>.txt "
                        "are the same as example files): cpu (the 10-minute CPU settings, as configs/fern_cpu.txt for "
                        "forward-facing scenes, configs/capture_cpu.txt for walk-around captures, configs/lego_cpu.txt "
                        "for Blender scenes), cuda (the same for one GPU: configs/fern_cuda.txt, capture_cuda.txt, "
                        "lego_cuda.txt), paper (as configs/fern.txt, configs/lego.txt for Blender scenes; the device's "
                        "preset for the others), none (the built-in defaults), auto (cuda on CUDA, cpu otherwise; "
                        "none with --config)")
    viewer = parser.add_argument_group("viewer", "Watch the run in the browser while it trains.")
    viewer.add_argument("--viewer", type=parse_bool, nargs="?", const=True, default=False,
                        help="watch the run in the browser while it trains (the viewer extra; --viewer_port, "
                             "--viewer_render_share, ... as enerf view's flags)")
    add_viewer_flags(viewer, prefix="viewer_")
    for key in NERF_PYTORCH_IGNORED:
        parser.add_argument(f"--{key}", default=None, help=configargparse.SUPPRESS)
    return parser


def add_run_flags(parser) -> None:
    """--resume and --quiet, the flags of a training command that are not part of its config."""
    parser.add_argument("--resume", type=parse_bool, nargs="?", const=True, default=False,
                        help="continue from <basedir>/<expname>/checkpoints/latest.pt")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run_config_from_args(args) -> RunConfig:
    """The flags and config-file keys that were given over the dataclass defaults (no preset)."""
    return config_with(RunConfig, given_values(RunConfig, args))


def read_config_file(path: Path) -> dict:
    """Field name -> value of each key config file ``path`` sets, read as ``--config path`` reads it."""
    return given_values(RunConfig, build_train_parser().parse_args(["--config", str(path)]))


def train_config(args, data_root: Path = DATA_ROOT) -> tuple[RunConfig, Preset | None, str, str]:
    """(the run's config, the preset it took (None: none), the device the run computes on (cpu | cuda |
    mps: ``--device``, ``enerf.device.choose_device``), why that device) for parsed ``enerf train``
    arguments: ``enerf.config.resolve`` over what the scene's folder holds. A device torch does not
    see is a ConfigError (one line)."""
    from ..data.scene_probe import describe_scene
    from ..device import choose_device

    flags = given_values(RunConfig, args)
    if "expname" not in flags and flags.get("datadir"):  # a scene folder given, no run name: the folder's
        flags["expname"] = Path(flags["datadir"]).resolve().name
    device, why = choose_device(flags.get("device", "auto"))
    config_file = getattr(args, "config", None) is not None
    scene = describe_scene(flags, data_root) if preset_name(args.preset, device, config_file) != "none" else None
    cfg, preset = resolve(flags, device, scene, args.preset, config_file)
    return cfg, preset, device, why


def print_metrics(metrics: dict, where: Path) -> None:
    """One line of held-out metrics, then LPIPS problems and warnings."""
    def fmt(value, spec: str) -> str:
        return "n/a" if value is None else format(value, spec)

    print(
        f"held-out PSNR {fmt(metrics['psnr'], '.2f')} dB  SSIM {fmt(metrics['ssim'], '.4f')}"
        f"  LPIPS {fmt(metrics['lpips'], '.4f')}  ({len(metrics['per_image'])} views, {metrics['steps']} steps) -> {where}"
    )
    splats = metrics.get("splats")  # metrics.json of a run that ended in splats (enerf.train.splat_stage)
    if isinstance(splats, dict):
        worst = min(splats["per_view"], key=lambda v: v["psnr"] - _field_psnr(metrics, v["view"]), default=None)
        tail = (f"; worst view {worst['view']}: {worst['psnr']:.2f} dB against the field's "
                f"{_field_psnr(metrics, worst['view']):.2f}" if worst else "")
        uncovered = splats.get("uncovered_max")
        print(f"splats: held-out PSNR {fmt(splats['psnr'], '.2f')} dB  SSIM {fmt(splats['ssim'], '.4f')}  LPIPS "
              f"{fmt(splats['lpips'], '.4f')}  ({splats['splat_count']:,} splats{tail}; at most "
              f"{fmt(None if uncovered is None else 100 * uncovered, '.1f')} % of a view's pixels under half opacity) "
              f"-> {splats['splats']}")
    if metrics.get("psnr_fit_right") is not None:
        model = (metrics.get("appearance") or {}).get("model", "none")
        print(f"appearance {model}: PSNR on the field's own colours (the training photos' mean appearance); "
              f"{metrics['psnr_fit_right']:.2f} dB on the right halves after an affine colour fit on the left (NeRF-W)")
    if metrics["lpips"] is None and metrics.get("lpips_error"):
        print(f"LPIPS unavailable: {metrics['lpips_error']}")
    for warning in metrics.get("warnings") or []:
        print(f"warning: {warning}")


def _field_psnr(metrics: dict, view: int) -> float:
    """The field's PSNR of held-out ``view`` in ``metrics`` (nan when it has none)."""
    return next((p["psnr"] for p in metrics["per_image"] if p["view"] == view), float("nan"))


def fidelity_line(cfg: RunConfig) -> str:
    """The second line of a run without a config file: which of the fidelity options are on (docs/captures.md,
    "Exposure and passers-by")."""
    train = cfg.train
    robust = "off" if train.robust_trim <= 0 else (
        f"--robust_trim {train.robust_trim:g} " + (f"in {train.robust_patch} x {train.robust_patch} patches"
                                                    if train.robust_patch > 0 else "per ray"))
    visibility = ("off" if train.visibility_loss <= 0 else
                  f"--visibility_loss {train.visibility_loss:g} (--visibility_views {train.visibility_views})")
    scaling = "off" if cfg.render.gradient_scaling <= 0 else f"--gradient_scaling {cfg.render.gradient_scaling:g}"
    return (f"per-image appearance: {'off' if train.appearance == 'none' else '--appearance ' + train.appearance}; "
            f"robust loss: {robust}; visibility loss: {visibility}; near-camera gradient scaling: {scaling}; "
            f"held-out views: --holdout {cfg.data.holdout}")


def preview_line(info: dict, train_seconds: float) -> str:
    """The line after the preview video: what was written, cut or left out (``render_preview``'s dict)."""
    if "skipped" in info:
        return f"preview video: skipped, {info['skipped']}"
    frames = f"{info['frames']} frames"
    if "capped" in info:
        frames = f"{info['frames']} of its {info['capped']} frames (the run trained {duration_text(train_seconds)})"
    return (f"preview video: {frames} of {info['width']}x{info['height']} ({info['path']} path) -> {info['rgb']}, "
            f"{info['depth']}")


def cmd_train(argv: list[str]) -> int:
    from ..distributed import is_writer
    from ..train.nerf import train_nerf

    args = build_train_parser().parse_args(argv)
    cfg, preset, device, why = train_config(args)
    if preset is not None and is_writer():
        print(preset_line(preset, args.preset, device, why), flush=True)
    if preset is not None and is_writer():
        print(fidelity_line(cfg), flush=True)
    for key in ("netdepth_fine", "netwidth_fine"):
        if getattr(args, key) is not None:
            print(f"enerf: note: {key} is ignored; the fine network has the coarse network's shape", file=sys.stderr)
    viewer = None
    if args.viewer and is_writer():  # torchrun: rank 0 (the one that writes) serves it
        from ..config import ViewerConfig
        from ..viewer.training import TrainingViewer

        try:
            viewer = TrainingViewer(config_from_args(ViewerConfig, args, prefix="viewer_"))
        except ConfigError as exc:  # its fields are --viewer_<field> here
            raise ConfigError(f"--viewer: {exc} (the flags are --viewer_<name>)") from None
        print(f"enerf train: watch it at {viewer.url}", flush=True)
        if viewer.cfg.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"enerf train: note: the viewer listens on {viewer.cfg.host}, reachable from other machines",
                  file=sys.stderr)
    try:
        metrics = train_nerf(cfg, data_root=DATA_ROOT, resume=args.resume, progress=not args.quiet,
                             on_step=viewer.on_step if viewer else None)
    finally:
        if viewer is not None:
            viewer.close()
    if metrics is not None:  # distributed: None on the ranks other than 0
        print_metrics(metrics, Path(cfg.basedir) / cfg.expname / "metrics.json")
        if cfg.train.video != "none":
            from ..export.video import render_preview

            rate = metrics.get("eval_rays_per_second")
            cap = (metrics["train_seconds"], rate) if cfg.train.cap_outputs and rate else None
            info = render_preview(metrics["checkpoint"], cfg.train.video, DATA_ROOT, cfg.train.device,
                                  progress=not args.quiet, cap=cap)
            print(preview_line(info, metrics["train_seconds"]))
    return 0
