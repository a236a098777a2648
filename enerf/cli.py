"""Command line: parse flags / config files into a RunConfig and call one function.

    enerf train [--config FILE] [--scene demo|fern|...] [--conditioning none|row|col|rowcol] ...
    enerf eval --ckpt PATH
    enerf data synth --out DIR

Config files use configargparse's ``key = value`` syntax; nerf-pytorch's keys are accepted
with the same meaning, so an existing nerf-pytorch config file works unchanged.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import configargparse

from .config import CONDITIONING_MODES, DataConfig, FieldConfig, RenderConfig, RunConfig, TrainConfig
from .errors import ConfigError, EnerfError

__all__ = ["main", "build_train_parser", "run_config_from_args"]

DATA_ROOT = Path("data")

# flag -> (section, field). Sections: "run" (RunConfig itself), "data", "field", "render", "train".
FLAG_TO_FIELD = {
    "expname": ("run", "expname"),
    "basedir": ("run", "basedir"),
    "scene": ("data", "scene"),
    "datadir": ("data", "datadir"),
    "dataset_type": ("data", "dataset_type"),
    "factor": ("data", "factor"),
    "llffhold": ("data", "llffhold"),
    "spherify": ("data", "spherify"),
    "bd_factor": ("data", "bd_factor"),
    "netdepth": ("field", "netdepth"),
    "netwidth": ("field", "netwidth"),
    "multires": ("field", "multires"),
    "multires_views": ("field", "multires_views"),
    "use_viewdirs": ("field", "use_viewdirs"),
    "view_width": ("field", "view_width"),
    "conditioning": ("field", "conditioning"),
    "conditioned_layers": ("field", "conditioned_layers"),
    "detach_conditioner": ("field", "detach_conditioner"),
    "conditioning_passes": ("field", "conditioning_passes"),
    "N_samples": ("render", "n_samples"),
    "N_importance": ("render", "n_importance"),
    "lindisp": ("render", "lindisp"),
    "raw_noise_std": ("render", "raw_noise_std"),
    "white_bkgd": ("render", "white_bkgd"),
    "chunk": ("render", "chunk"),
    "iters": ("train", "iters"),
    "N_rand": ("train", "n_rand"),
    "lrate": ("train", "lrate"),
    "lrate_decay": ("train", "lrate_decay"),
    "seed": ("train", "seed"),
    "precrop_iters": ("train", "precrop_iters"),
    "precrop_frac": ("train", "precrop_frac"),
    "eval_every": ("train", "eval_every"),
    "eval_views": ("train", "eval_views"),
    "log_every": ("train", "log_every"),
    "kappa_every": ("train", "kappa_every"),
    "ckpt_every": ("train", "ckpt_every"),
    "time_budget": ("train", "time_budget"),
    "device": ("train", "device"),
}

HELP = {
    "scene": "scene name: 'demo' (embedded, made on first use) or a folder under data/nerf_llff_data/",
    "datadir": "scene folder in LLFF layout (overrides --scene)",
    "factor": "image downscale factor (uses images_<f>/ if present, else resizes in process)",
    "llffhold": "hold out every N-th image for testing",
    "conditioning": "weight conditioning of the linear layers: none (vanilla NeRF) or E-NeRF's row / col / rowcol",
    "conditioned_layers": "which layers are conditioned: hidden (the trunk), all, none, or comma-separated names",
    "detach_conditioner": "treat the equilibration matrix as a constant in backprop",
    "iters": "training steps",
    "N_rand": "rays per step",
    "N_samples": "coarse samples per ray",
    "N_importance": "fine samples per ray (0: no fine network)",
    "eval_every": "steps between held-out evaluations (0: only at the end)",
    "time_budget": "stop training after this many seconds (0: no limit)",
    "device": "auto (CUDA if available), cpu or cuda",
    "seed": "random seed (weights, ray batches, jitter)",
}

# nerf-pytorch keys that enerf reads with another meaning-preserving name.
ALIASES = {"N_iters": "iters", "i_print": "log_every", "i_weights": "ckpt_every", "random_seed": "seed"}

# nerf-pytorch keys accepted so its config files load, but without effect here.
IGNORED_KEYS = (
    "netdepth_fine", "netwidth_fine", "netchunk", "no_batching", "no_reload", "ft_path",
    "render_only", "render_test", "render_factor", "i_img", "i_testset", "i_video",
    "i_embed", "half_res", "testskip", "shape",
)


def _bool(text: str) -> bool:
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise configargparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _field_type(section: str, name: str):
    cls = {"data": DataConfig, "field": FieldConfig, "render": RenderConfig, "train": TrainConfig}.get(section)
    if cls is None:
        return str
    kind = {f.name: f.type for f in dataclasses.fields(cls)}[name]
    return {"int": int, "float": float, "bool": _bool, "str": str}[kind]


def build_train_parser() -> configargparse.ArgumentParser:
    parser = configargparse.ArgumentParser(
        prog="enerf train",
        description="Train a NeRF (vanilla or equilibrated-weight-conditioned) and score held-out views.",
        config_file_parser_class=configargparse.DefaultConfigFileParser,
    )
    parser.add_argument("--config", is_config_file=True, help="configargparse file (key = value per line)")
    for flag, (section, name) in FLAG_TO_FIELD.items():
        kind = _field_type(section, name)
        kwargs = {"type": kind, "default": None, "help": HELP.get(flag)}
        if kind is _bool:
            kwargs.update(nargs="?", const=True)
        if flag == "conditioning":
            kwargs["choices"] = CONDITIONING_MODES
        if flag == "device":
            kwargs["choices"] = ("auto", "cpu", "cuda")
        parser.add_argument(f"--{flag}", **kwargs)
    for alias, target in ALIASES.items():
        parser.add_argument(f"--{alias}", dest=target, type=_field_type(*FLAG_TO_FIELD[target]), default=None,
                            help=f"nerf-pytorch name of --{target}")
    parser.add_argument("--no_ndc", type=_bool, nargs="?", const=True, default=None,
                        help="use world-space rays instead of NDC (for non-forward-facing scenes)")
    parser.add_argument("--perturb", type=float, default=None, help="stratified jitter while training: 1 on, 0 off")
    parser.add_argument("--no_lpips", type=_bool, nargs="?", const=True, default=None, help="skip LPIPS")
    parser.add_argument("--resume", type=_bool, nargs="?", const=True, default=False,
                        help="continue from <basedir>/<expname>/checkpoints/latest.pt")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    for key in IGNORED_KEYS:
        parser.add_argument(f"--{key}", default=None, help=configargparse.SUPPRESS)
    return parser


def run_config_from_args(args) -> RunConfig:
    """Overlay the flags that were given onto the dataclass defaults."""
    sections: dict[str, dict] = {"run": {}, "data": {}, "field": {}, "render": {}, "train": {}}
    for flag, (section, name) in FLAG_TO_FIELD.items():
        value = getattr(args, flag)
        if value is not None:
            sections[section][name] = value
    if args.no_ndc is not None:
        sections["data"]["use_ndc"] = not args.no_ndc
    if args.perturb is not None:
        sections["render"]["perturb"] = args.perturb > 0
    if args.no_lpips is not None:
        sections["train"]["compute_lpips"] = not args.no_lpips
    try:
        return RunConfig(
            **sections["run"],
            data=DataConfig(**sections["data"]),
            field=FieldConfig(**sections["field"]),
            render=RenderConfig(**sections["render"]),
            train=TrainConfig(**sections["train"]),
        )
    except TypeError as exc:
        raise ConfigError(str(exc)) from None


def _print_metrics(metrics: dict, where: Path) -> None:
    lpips = "n/a" if metrics["lpips"] is None else f"{metrics['lpips']:.4f}"
    print(
        f"held-out PSNR {metrics['psnr']:.2f} dB  SSIM {metrics['ssim']:.4f}  LPIPS {lpips}"
        f"  ({len(metrics['per_image'])} views, {metrics['steps']} steps) -> {where}"
    )
    if metrics["lpips"] is None and metrics.get("lpips_error"):
        print(f"LPIPS unavailable: {metrics['lpips_error']}")


def _cmd_train(argv: list[str]) -> int:
    from .train.nerf import train_nerf

    args = build_train_parser().parse_args(argv)
    cfg = run_config_from_args(args)
    for key in ("netdepth_fine", "netwidth_fine"):
        if getattr(args, key) is not None:
            print(f"enerf: note: {key} is ignored; the fine network has the coarse network's shape", file=sys.stderr)
    metrics = train_nerf(cfg, data_root=DATA_ROOT, resume=args.resume, progress=not args.quiet)
    _print_metrics(metrics, Path(cfg.basedir) / cfg.expname / "metrics.json")
    return 0


def _cmd_eval(argv: list[str]) -> int:
    from .train.evaluate import evaluate_checkpoint

    parser = configargparse.ArgumentParser(prog="enerf eval", description="Recompute metrics.json from a checkpoint.")
    parser.add_argument("--ckpt", required=True, help="path to a checkpoint (.pt)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None)
    args = parser.parse_args(argv)
    metrics = evaluate_checkpoint(args.ckpt, data_root=DATA_ROOT, device_name=args.device)
    _print_metrics(metrics, Path(args.ckpt).resolve().parent.parent / "metrics.json")
    return 0


def _cmd_data(argv: list[str]) -> int:
    from .data.synthetic import synth_main

    parser = configargparse.ArgumentParser(prog="enerf data", description="Dataset utilities.")
    parser.add_argument("action", choices=("synth",), help="synth: write the embedded synthetic scene")
    parser.add_argument("--out", required=True, help="output folder (LLFF layout)")
    parser.add_argument("--views", type=int, default=24)
    parser.add_argument("--width", type=int, default=1008)
    parser.add_argument("--height", type=int, default=756)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    path = synth_main(args.out, args.views, args.width, args.height, args.seed, args.overwrite)
    print(f"wrote synthetic LLFF scene to {path}")
    return 0


COMMANDS = {"train": _cmd_train, "eval": _cmd_eval, "data": _cmd_data}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        known = ", ".join(COMMANDS)
        if argv and argv[0] not in ("-h", "--help"):
            print(f"enerf: error: unknown command {argv[0]!r}; choose one of: {known}", file=sys.stderr)
            return 2
        print(f"usage: enerf {{{known}}} [options]   (enerf COMMAND --help for its options)")
        return 0
    try:
        return COMMANDS[argv[0]](argv[1:])
    except EnerfError as exc:
        print(f"enerf: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("enerf: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
