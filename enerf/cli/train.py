"""``enerf train``: fit a NeRF from flags / a config file, score held-out views.

Config files use configargparse's ``key = value`` syntax; nerf-pytorch's keys are accepted with
the same meaning (``NERF_PYTORCH_ALIASES``, ``NERF_PYTORCH_IGNORED``), so an existing
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

from ..config import DATA_ROOT, NERF_PYTORCH_ALIASES, NERF_PYTORCH_IGNORED, DataConfig, RunConfig
from ..config.presets import PRESET_CHOICES, SCENE_KIND_DEFAULT, Preset, preset_for, preset_line, preset_name
from ..errors import ConfigError, EnerfError
from ..train.estimate import duration_text
from .common import OneLineParser, add_config_flags, config_from_args, given_values, parse_bool
from .view import add_viewer_flags

__all__ = ["build_train_parser", "run_config_from_args", "add_run_flags", "print_metrics", "fidelity_line", "preview_line", "cmd_train",
           "train_preset", "read_config_file", "scene_layout", "scene_kind"]


def build_train_parser() -> configargparse.ArgumentParser:
    """The ``enerf train`` parser: one flag per RunConfig field, nerf-pytorch's names as aliases."""
    parser = OneLineParser(
        prog="enerf train",
        description="Train a NeRF (vanilla or equilibrated-weight-conditioned) and score held-out views.",
        config_file_parser_class=configargparse.DefaultConfigFileParser,
    )
    parser.add_argument("--config", is_config_file=True, help="configargparse file (key = value per line)")
    add_config_flags(parser, RunConfig, aliases=NERF_PYTORCH_ALIASES)
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


def run_config_from_args(args, preset: Preset | None = None) -> RunConfig:
    """Overlay the flags that were given onto ``preset``'s values and the dataclass defaults."""
    return config_from_args(RunConfig, args, defaults=preset.values if preset is not None else None)


def read_config_file(path: Path) -> dict:
    """Field name -> value of each key config file ``path`` sets, read as ``--config path`` reads it."""
    return given_values(RunConfig, build_train_parser().parse_args(["--config", str(path)]))


def scene_layout(args, data_root: Path) -> str:
    """``llff``, ``blender`` or ``nerfstudio``: the parsed ``--dataset_type``, else what the scene's folder holds
    (the embedded demo scene is written as LLFF); ``llff`` when the folder cannot be found, so
    that loading it reports the problem in its own words."""
    from ..data.loaders import dataset_type_of
    from ..data.resolve import resolve_scene_dir

    dataset_type = getattr(args, "data.dataset_type", None) or "auto"
    if dataset_type != "auto":
        return dataset_type
    scene = getattr(args, "data.scene", None) or DataConfig().scene
    datadir = getattr(args, "data.datadir", None) or ""
    if scene == "demo" and not datadir and not (Path(data_root) / "demo").is_dir():
        return "llff"  # made on first use by enerf.synthetic.scene, in LLFF layout
    try:
        return dataset_type_of(resolve_scene_dir(scene, datadir, data_root), "auto")
    except (EnerfError, OSError):
        return "llff"


# What the start line says of a Blender-layout folder of photos without alpha, read as a capture.
PHOTOS_NOTE = "transforms_train.json of photos without alpha, read as a capture (--dataset_type blender if not); "


def scene_kind(args, layout: str, data_root: Path) -> tuple[str, str]:
    """(forward | walkaround, what the start line says about it): ``--scene_kind`` when given, else
    what the scene's cameras show (``enerf.cameras.scene_kind``); the layout's own rays (LLFF: forward,
    transforms.json: walk-around) when its cameras cannot be read, so that loading it reports the
    problem in its own words. A Blender-layout folder of photos (``scene_layout``: nerfstudio) is
    decided by its cameras like a capture, and the line says so (``PHOTOS_NOTE``)."""
    from ..data.resolve import resolve_scene_dir
    from ..cameras.scene_kind import classify_cameras
    from ..data.loaders import blender_style_capture, read_camera_poses

    chosen = getattr(args, "data.scene_kind", None) or SCENE_KIND_DEFAULT
    if layout == "blender":
        return "walkaround", "Blender scene (its bounded box)"
    if chosen != "auto":
        name = "forward-facing" if chosen == "forward" else "walk-around"
        return chosen, f"{name} (--scene_kind {chosen})"
    scene = getattr(args, "data.scene", None) or DataConfig().scene
    try:
        folder = resolve_scene_dir(scene, getattr(args, "data.datadir", None) or "", data_root)
        cameras = read_camera_poses(folder, layout)
        photos = PHOTOS_NOTE if layout == "nerfstudio" and blender_style_capture(folder) else ""
    except (EnerfError, OSError):
        cameras, photos = None, ""
    if cameras is None or len(cameras) < 2:
        return ("forward" if layout == "llff" else "walkaround"), photos.rstrip("; ")
    found = classify_cameras(cameras)
    other = "walkaround" if found.kind == "forward" else "forward"
    return found.kind, f"{photos}{found.describe()}, --scene_kind {other} if not"


def train_preset(args, data_root: Path = DATA_ROOT) -> tuple[Preset | None, str, str]:
    """(the preset ``args.preset`` selects for the scene (None: none), the device the run computes
    on (cpu | cuda | mps: ``--device``, ``enerf.device.choose_device``), why that device). A device
    torch does not see is a ConfigError (one line)."""
    from ..device import choose_device

    device, why = choose_device(getattr(args, "train.device", None) or "auto")
    name = preset_name(args.preset, device, config_file=getattr(args, "config", None) is not None)
    if name == "none":
        return None, device, why
    layout = scene_layout(args, data_root)
    kind, said = scene_kind(args, layout, data_root)
    fallback = preset_name("auto", device, config_file=False)
    return preset_for(name, layout, kind, read_config_file, said, fallback=fallback), device, why


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
    datadir = getattr(args, "data.datadir", None)
    if args.expname is None and datadir:  # a scene folder given, no run name: the run takes the folder's
        args.expname = Path(datadir).resolve().name
    preset, device, why = train_preset(args)
    if preset is not None and is_writer():
        print(preset_line(preset, args.preset, device, why), flush=True)
    cfg = run_config_from_args(args, preset)
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
