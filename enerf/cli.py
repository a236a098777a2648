"""Command line: parse flags / config files into a RunConfig and call one function.

    enerf train [--config FILE] [--scene demo|fern|...] [--conditioning none|row|col|rowcol|wn|ws]
                [--precond none|bnp] [--weight_decay L --decay_space p|z] [--grad_reg L] ...
    enerf eval --ckpt PATH
    enerf data synth --out DIR
    enerf data colmap --images DIR --out SCENE [--factors 4 8] [--matcher exhaustive|sequential]
    enerf shape train --mesh torus|bunny|PATH --kind occupancy|sdf [--conditioning row] [--iters N]
    enerf shape mesh --ckpt PATH [--resolution R]      enerf shape eval --ckpt PATH

Config files use configargparse's ``key = value`` syntax; nerf-pytorch's keys are accepted
with the same meaning, so an existing nerf-pytorch config file works unchanged.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import configargparse

from .config import CONDITIONING_MODES, DECAY_SPACES, PRECOND_MODES, RENDERERS, DataConfig, FieldConfig, RenderConfig, RunConfig, TrainConfig
from .errors import ConfigError, EnerfError, system_error_line
from .runfolder import check_output_dir
from .validate import (validate_compare_config, validate_mesh_config, validate_mesh_resolution, validate_synth,
                       validate_video_config)

__all__ = ["main", "build_train_parser", "run_config_from_args"]

DATA_ROOT = Path("data")

# flag -> (section, field). Sections: "run" (RunConfig itself), "data", "field", "render", "train".
FLAG_TO_FIELD = {
    "expname": ("run", "expname"),
    "basedir": ("run", "basedir"),
    "scene": ("data", "scene"),
    "datadir": ("data", "datadir"),
    "dataset_type": ("data", "dataset_type"),
    "half_res": ("data", "half_res"),
    "testskip": ("data", "testskip"),
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
    "encoding": ("field", "encoding"),
    "grid_resolutions": ("field", "grid_resolutions"),
    "grid_components": ("field", "grid_components"),
    "grid_aabb": ("field", "grid_aabb"),
    "encoding_lrate": ("train", "encoding_lrate"),
    "tv_weight": ("train", "tv_weight"),
    "N_samples": ("render", "n_samples"),
    "N_importance": ("render", "n_importance"),
    "lindisp": ("render", "lindisp"),
    "raw_noise_std": ("render", "raw_noise_std"),
    "white_bkgd": ("render", "white_bkgd"),
    "chunk": ("render", "chunk"),
    "renderer": ("render", "renderer"),
    "render_step_size": ("render", "render_step_size"),
    "grid_resolution": ("render", "grid_resolution"),
    "occ_thre": ("render", "occ_thre"),
    "grid_update_every": ("render", "grid_update_every"),
    "grid_warmup": ("render", "grid_warmup"),
    "grid_ema_decay": ("render", "grid_ema_decay"),
    "early_stop_eps": ("render", "early_stop_eps"),
    "alpha_thre": ("render", "alpha_thre"),
    "early_stop_block": ("render", "early_stop_block"),
    "cull_occluded": ("render", "cull_occluded"),
    "target_sample_batch_size": ("render", "target_sample_batch_size"),
    "iters": ("train", "iters"),
    "N_rand": ("train", "n_rand"),
    "lrate": ("train", "lrate"),
    "lrate_decay": ("train", "lrate_decay"),
    "lrate_scale": ("train", "lrate_scale"),
    "seed": ("train", "seed"),
    "precrop_iters": ("train", "precrop_iters"),
    "precrop_frac": ("train", "precrop_frac"),
    "eval_every": ("train", "eval_every"),
    "eval_views": ("train", "eval_views"),
    "log_every": ("train", "log_every"),
    "kappa_every": ("train", "kappa_every"),
    "ckpt_every": ("train", "ckpt_every"),
    "time_budget": ("train", "time_budget"),
    "stop_at_psnr": ("train", "stop_at_psnr"),
    "device": ("train", "device"),
    "dist_timeout": ("train", "dist_timeout"),
    "precond": ("train", "precond"),
    "weight_decay": ("train", "weight_decay"),
    "decay_space": ("train", "decay_space"),
    "grad_reg": ("train", "grad_reg"),
}

HELP = {
    "lrate_scale": "multiplies lrate and encoding_lrate (what enerf compare's COND*S modes set, for learning-rate sweeps)",
    "scene": "scene name: 'demo' (embedded, made on first use) or a folder under data/nerf_llff_data/ or "
             "data/nerf_synthetic/ (e.g. fern, lego)",
    "datadir": "scene folder in LLFF or Blender layout (overrides --scene)",
    "dataset_type": "auto (blender if the folder has transforms_*.json, llff if poses_bounds.npy), llff or blender",
    "factor": "image downscale factor (LLFF: uses images_<f>/ if present, else resizes in process; "
              "0: 8 for LLFF, 1 for Blender)",
    "half_res": "Blender: halve the stored images",
    "testskip": "Blender: keep every N-th test frame",
    "llffhold": "hold out every N-th image for testing",
    "conditioning": "weight conditioning of the linear layers: none (vanilla NeRF), E-NeRF's row / col / rowcol, "
                    "wn (weight normalization) or ws (weight standardization)",
    "conditioned_layers": "which layers are conditioned: hidden (the trunk), all, none, or comma-separated names",
    "detach_conditioner": "treat the equilibration matrix as a constant in backprop",
    "iters": "training steps",
    "N_rand": "rays per step",
    "N_samples": "coarse samples per ray",
    "N_importance": "fine samples per ray (0: no fine network)",
    "eval_every": "steps between held-out evaluations (0: only at the end)",
    "time_budget": "stop training after this many seconds (0: no limit)",
    "device": "auto (CUDA if available), cpu or cuda",
    "dist_timeout": "torchrun runs: seconds a rank waits for the others before it stops with one line (a dead rank)",
    "renderer": "hierarchical (NeRF's coarse/fine sampling), torch_grid (occupancy-grid ray marching in plain torch, "
                "CPU or CUDA), nerfacc (the same with nerfacc, CUDA), auto (nerfacc if it builds, else torch_grid)",
    "render_step_size": "grid renderers: marching step in ray t (NDC rays span t in [0, 1])",
    "grid_resolution": "grid renderers: occupancy grid cells per axis over the scene (NDC) box",
    "occ_thre": "grid renderers: a cell is occupied when density * step exceeds min(this, mean occupancy)",
    "grid_update_every": "grid renderers: steps between occupancy grid updates",
    "grid_warmup": "grid renderers: steps during which every update re-evaluates all cells",
    "grid_ema_decay": "grid renderers: decay of a cell's running occupancy per update",
    "early_stop_eps": "grid renderers: drop samples behind transmittance below this (0: no early stop)",
    "alpha_thre": "grid renderers: drop samples with opacity below this",
    "early_stop_block": "torch_grid: query colour and density front to back, this many samples per ray in the "
                        "first round and twice as many in each next one, stopping each ray at its early stop "
                        "(0: nerfacc's way, a density pre-pass over all samples, then the rendering pass)",
    "cull_occluded": "torch_grid: occlusion culling; a cell no training ray reached with transmittance >= "
                     "--early_stop_eps since the last grid update is empty (needs --early_stop_eps > 0)",
    "target_sample_batch_size": "grid renderers: samples per step; rays per step adapt to it "
                                "(0: N_rand * N_samples; -1: N_rand rays every step)",
    "stop_at_psnr": "stop once a periodic held-out evaluation (--eval_every) reaches this PSNR (0: never)",
    "precond": "gradient preconditioner: none, or bnp (batch normalization preconditioning; any --conditioning)",
    "weight_decay": "L2 regularization strength λ (0: off); where it acts: --decay_space",
    "decay_space": "p: λ||p||² added to the loss; z: decoupled decay in the preconditioned space (AdamW-style)",
    "grad_reg": "gradient regularization λ||∇L||² in --decay_space, by double backprop (0: off; slow)",
    "seed": "random seed (weights, ray batches, jitter)",
}

# nerf-pytorch keys that enerf reads with another meaning-preserving name.
ALIASES = {"N_iters": "iters", "i_print": "log_every", "i_weights": "ckpt_every", "random_seed": "seed"}

# nerf-pytorch keys accepted so its config files load, but without effect here.
IGNORED_KEYS = (
    "netdepth_fine", "netwidth_fine", "netchunk", "no_batching", "no_reload", "ft_path",
    "render_only", "render_test", "render_factor", "i_img", "i_testset", "i_video",
    "i_embed", "shape",
)


class OneLineParser(configargparse.ArgumentParser):
    """An argument parser whose errors are a ConfigError (one line, exit 2), not usage + exit."""

    def error(self, message: str):
        raise ConfigError(f"{self.prog}: {message.splitlines()[0] if message else 'invalid arguments'}")


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
    if kind.startswith("tuple["):  # tuple[int, ...] / tuple[float, ...]: several values
        kind = kind[len("tuple["):].split(",")[0]
    return {"int": int, "float": float, "bool": _bool, "str": str}[kind]


def _is_tuple_field(section: str, name: str) -> bool:
    cls = {"data": DataConfig, "field": FieldConfig, "render": RenderConfig, "train": TrainConfig}.get(section)
    return cls is not None and {f.name: f.type for f in dataclasses.fields(cls)}[name].startswith("tuple[")


def build_train_parser() -> configargparse.ArgumentParser:
    parser = OneLineParser(
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
        if _is_tuple_field(section, name):
            kwargs["nargs"] = "+"
        if flag == "conditioning":
            kwargs["choices"] = CONDITIONING_MODES
        if flag == "precond":
            kwargs["choices"] = PRECOND_MODES
        if flag == "decay_space":
            kwargs["choices"] = DECAY_SPACES
        if flag == "device":
            kwargs["choices"] = ("auto", "cpu", "cuda")
        if flag == "renderer":
            kwargs["choices"] = RENDERERS
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
            sections[section][name] = tuple(value) if isinstance(value, list) else value
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


def _fmt(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _print_metrics(metrics: dict, where: Path) -> None:
    print(
        f"held-out PSNR {_fmt(metrics['psnr'], '.2f')} dB  SSIM {_fmt(metrics['ssim'], '.4f')}"
        f"  LPIPS {_fmt(metrics['lpips'], '.4f')}  ({len(metrics['per_image'])} views, {metrics['steps']} steps) -> {where}"
    )
    if metrics["lpips"] is None and metrics.get("lpips_error"):
        print(f"LPIPS unavailable: {metrics['lpips_error']}")
    for warning in metrics.get("warnings") or []:
        print(f"warning: {warning}")


def _cmd_train(argv: list[str]) -> int:
    from .train.nerf import train_nerf

    args = build_train_parser().parse_args(argv)
    cfg = run_config_from_args(args)
    for key in ("netdepth_fine", "netwidth_fine"):
        if getattr(args, key) is not None:
            print(f"enerf: note: {key} is ignored; the fine network has the coarse network's shape", file=sys.stderr)
    metrics = train_nerf(cfg, data_root=DATA_ROOT, resume=args.resume, progress=not args.quiet)
    if metrics is not None:  # distributed: None on the ranks other than 0
        _print_metrics(metrics, Path(cfg.basedir) / cfg.expname / "metrics.json")
    return 0


def _cmd_eval(argv: list[str]) -> int:
    from .train.evaluate import evaluate_checkpoint

    parser = OneLineParser(prog="enerf eval", description="Recompute metrics.json from a checkpoint.")
    parser.add_argument("--ckpt", required=True, help="path to a checkpoint (.pt)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None)
    args = parser.parse_args(argv)
    metrics = evaluate_checkpoint(args.ckpt, data_root=DATA_ROOT, device_name=args.device)
    _print_metrics(metrics, Path(args.ckpt).resolve().parent.parent / "metrics.json")
    return 0


def _cmd_data(argv: list[str]) -> int:
    from .data.synthetic import synth_main

    if argv and argv[0] == "colmap":
        from .data.colmap import colmap_main

        return colmap_main(argv[1:])
    parser = OneLineParser(prog="enerf data", description="Dataset utilities.")
    parser.add_argument("action", choices=("synth", "colmap"),
                        help="synth: write the embedded synthetic scene; colmap: pose your own photos (colmap --help)")
    parser.add_argument("--out", required=True, help="output folder (LLFF layout)")
    parser.add_argument("--views", type=int, default=24)
    parser.add_argument("--width", type=int, default=1008)
    parser.add_argument("--height", type=int, default=756)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    validate_synth(args.views, args.width, args.height, args.seed)
    check_output_dir(args.out, "--out")
    path = synth_main(args.out, args.views, args.width, args.height, args.seed, args.overwrite)
    print(f"wrote synthetic LLFF scene to {path}")
    return 0


def _add_dataclass_flags(parser, cls, help_text: dict[str, str]) -> None:
    """One ``--field`` flag per dataclass field, default None (the dataclass holds the defaults)."""
    for f in dataclasses.fields(cls):
        default = f.default
        kwargs = {"default": None, "help": help_text.get(f.name)}
        if isinstance(default, bool):
            kwargs.update(type=_bool, nargs="?", const=True)
        elif isinstance(default, tuple):
            item = type(default[0]) if default else float
            kwargs.update(type=item, nargs="+")
        else:
            kwargs["type"] = type(default)
        parser.add_argument(f"--{f.name}", **kwargs)


def _dataclass_from_args(cls, args):
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if getattr(args, f.name) is not None}
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def _cmd_render(argv: list[str]) -> int:
    from .config import VideoConfig
    from .export.video import render_video_from_checkpoint

    parser = OneLineParser(prog="enerf render", description="Render rgb.mp4 / depth.mp4 from a checkpoint.")
    parser.add_argument("--ckpt", required=True, help="path to a checkpoint (.pt)")
    parser.add_argument("--out", default=None, help="output folder (default <run>/video_<path>)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_dataclass_flags(parser, VideoConfig, {
        "path": "camera path: spiral (LLFF; the orbit on Blender scenes), orbit (Blender: elevation -30 deg, "
                "radius 4), test (held-out views), train, interp (through the training cameras)",
        "frames": "frames of the spiral / interp paths", "downscale": "render at 1/N of the training image size",
        "colormap": "matplotlib colormap for depth / disparity", "png": "also write every frame as PNG",
        "chunk": "rays per forward pass (0: the checkpoint's chunk); bounds the peak memory",
    })
    args = parser.parse_args(argv)
    video = validate_video_config(_dataclass_from_args(VideoConfig, args))
    info = render_video_from_checkpoint(args.ckpt, video, DATA_ROOT, args.out,
                                        args.device, progress=not args.quiet)
    print(f"wrote {info['frames']} frames of {info['width']}x{info['height']} ({info['path']} path, "
          f"{info['depth_kind']} colour-mapped) -> {info['rgb']}, {info['depth']}")
    return 0


def _cmd_mesh(argv: list[str]) -> int:
    import numpy as np

    from .config import MeshConfig
    from .export.nerf_mesh import distance_to_true_surfaces, mesh_from_checkpoint

    parser = OneLineParser(prog="enerf mesh", description="Extract a coloured mesh from a NeRF checkpoint.")
    parser.add_argument("--ckpt", required=True, help="path to a checkpoint (.pt)")
    parser.add_argument("--out", default=None, help="mesh file, .ply or .obj (default <run>/mesh.ply)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None)
    _add_dataclass_flags(parser, MeshConfig, {
        "resolution": "grid points per axis", "threshold": "density iso-level",
        "min_component": "drop connected components with fewer faces",
        "bbox": "xmin ymin zmin xmax ymax zmax in the field's coordinates (NDC for forward-facing scenes)",
        "field": "fine or coarse network", "frame": "world (poses_bounds.npy frame) or scene (normalised frame)",
    })
    args = parser.parse_args(argv)
    cfg = validate_mesh_config(_dataclass_from_args(MeshConfig, args))
    mesh, path, run = mesh_from_checkpoint(args.ckpt, cfg, DATA_ROOT, args.out, args.device)
    print(f"wrote mesh with {len(mesh.vertices)} vertices, {len(mesh.faces)} faces -> {path}")
    dist = distance_to_true_surfaces(run, mesh, cfg.frame, DATA_ROOT)
    if dist is not None:
        print(f"distance of the vertices to the scene's true surfaces (world units): median {np.median(dist):.4f}, "
              f"mean {np.mean(dist):.4f}, 90th percentile {np.percentile(dist, 90):.4f}")
    return 0


def _cmd_compare(argv: list[str]) -> int:
    from .compare.compare import run_compare
    from .config import CompareConfig

    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = OneLineParser(
        prog="enerf compare", description="Run scenes x modes x seeds and write compare.md / .csv and plots.",
        epilog="Flags after -- go to every run, e.g. enerf compare --modes none row -- --iters 500")
    parser.add_argument("--config", nargs="+", default=None,
                        help="config file of every run, and / or SCENE=FILE for one scene's runs "
                             "(e.g. fern=configs/fern_cpu.txt lego=configs/lego_cpu.txt)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_dataclass_flags(parser, CompareConfig, {
        "task": "nerf (enerf train) or shape (enerf shape train)",
        "scenes": "scene names or folders (nerf), mesh names (shape)",
        "modes": "COND, COND+PRECOND or COND:LAYERS, each optionally *S (learning rates times S), e.g. none row rowcol row+bnp row:all row*2",
        "jobs": "runs at once (each gets cores // jobs threads)", "out": "output folder",
        "baseline": "mode the deltas are measured against",
        "launcher": "local (subprocesses on this machine, --jobs at once) or ray (one Ray task per run)",
        "address": "ray: address of a running cluster (ray start --head); empty: start a local Ray instance",
        "run_cpus": "ray: CPUs each run declares (and its torch threads)", "run_gpus": "ray: GPUs each run declares",
    })
    args = parser.parse_args(argv)
    cfg = validate_compare_config(_dataclass_from_args(CompareConfig, args))
    check_output_dir(cfg.out, "--out")
    result = run_compare(cfg, args.config, extra, progress=not args.quiet, data_root=DATA_ROOT)
    print("wrote " + ", ".join(str(p) for p in result["outputs"]))
    return 0


SHAPE_HELP = {
    "mesh": "built-in shape (sphere, torus, box, capsule, bunny) or a mesh file (.obj .ply .off .stl .glb)",
    "kind": "occupancy (logits, BCE) or sdf (L1 on the clamped signed distance)",
    "allow_open": "accept a non-watertight mesh, taking inside/outside from the closest face's normal",
    "near_sigmas": "std of the Gaussian offsets of near-surface training points (one set per value)",
    "conditioning": "weight conditioning of the linear layers: none (vanilla), row / col / rowcol, wn or ws",
    "precond": "gradient preconditioner: none or bnp (batch normalization preconditioning)",
    "weight_decay": "λ of the L2 regularization (0: off)",
    "decay_space": "p: λ||p||² added to the loss; z: decoupled decay in the conditioned space (AdamW-style)",
    "grad_reg": "λ of the gradient regularization λ||∇L||² in --decay_space (0: off)",
    "conditioned_layers": "which layers are conditioned: hidden, all, none, or comma-separated names",
    "multires": "positional-encoding frequencies (0: raw xyz)",
    "eikonal_weight": "SDF: weight of the eikonal term mean (|grad f| - 1)^2",
    "time_budget": "stop training after this many seconds (0: no limit)",
    "mesh_resolution": "marching-cubes grid of the metrics mesh",
    "seed": "random seed (weights, batches); the samples use --sample_seed",
}


def _cmd_shape(argv: list[str]) -> int:
    from .config import ShapeDataConfig, ShapeFieldConfig, ShapeRunConfig, ShapeTrainConfig
    from .train.shape import evaluate_shape_checkpoint, mesh_from_checkpoint, train_shape

    actions = ("train", "mesh", "eval")
    if not argv or argv[0] not in actions:
        if argv and argv[0] not in ("-h", "--help"):
            raise ConfigError(f"enerf shape: unknown action {argv[0]!r}; choose one of: {', '.join(actions)}")
        print("usage: enerf shape {train,mesh,eval} [options]   (enerf shape ACTION --help for its options)")
        return 0
    action, argv = argv[0], argv[1:]
    if action == "train":
        parser = OneLineParser(
            prog="enerf shape train", config_file_parser_class=configargparse.DefaultConfigFileParser,
            description="Fit an occupancy or SDF network to a mesh; writes metrics.json, mesh and checkpoint.")
        parser.add_argument("--config", is_config_file=True, help="configargparse file (key = value per line)")
        parser.add_argument("--expname", default=None)
        parser.add_argument("--basedir", default=None)
        for cls in (ShapeDataConfig, ShapeFieldConfig, ShapeTrainConfig):
            _add_dataclass_flags(parser, cls, SHAPE_HELP)
        parser.add_argument("--resume", type=_bool, nargs="?", const=True, default=False,
                            help="continue from <basedir>/<expname>/checkpoints/latest.pt")
        parser.add_argument("--quiet", action="store_true", help="no progress bar")
        args = parser.parse_args(argv)
        top = {k: getattr(args, k) for k in ("expname", "basedir") if getattr(args, k) is not None}
        try:
            cfg = ShapeRunConfig(**top, data=_dataclass_from_args(ShapeDataConfig, args),
                                 field=_dataclass_from_args(ShapeFieldConfig, args),
                                 train=_dataclass_from_args(ShapeTrainConfig, args))
        except TypeError as exc:
            raise ConfigError(str(exc)) from None
        m = train_shape(cfg, resume=args.resume, progress=not args.quiet)
        where = Path(cfg.basedir) / cfg.expname / "metrics.json"
    else:
        parser = OneLineParser(prog=f"enerf shape {action}", description=(
            "Extract the surface of a shape checkpoint (marching cubes)." if action == "mesh"
            else "Recompute metrics.json of a shape checkpoint."))
        parser.add_argument("--ckpt", required=True, help="path to a checkpoint (.pt) from enerf shape train")
        parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None)
        if action == "mesh":
            parser.add_argument("--resolution", type=int, default=128, help="grid points per axis")
            parser.add_argument("--out", default=None, help="mesh file (default <run>/mesh_<resolution>.ply)")
        args = parser.parse_args(argv)
        if action == "mesh":
            validate_mesh_resolution(args.resolution)
            path, mesh, seconds = mesh_from_checkpoint(args.ckpt, args.resolution, args.out, args.device)
            print(f"wrote mesh with {len(mesh.vertices)} vertices, {len(mesh.faces)} faces "
                  f"({args.resolution}^3 grid, {seconds:.1f} s) -> {path}")
            return 0
        m = evaluate_shape_checkpoint(args.ckpt, args.device)
        where = Path(args.ckpt).resolve().parent.parent / "metrics.json"
    fmt = {k: "n/a" if m.get(k) is None else f"{m[k]:.4f}" for k in ("iou", "normal_consistency", "fscore")}
    chamfer = "n/a" if m.get("chamfer_l1") is None else f"{m['chamfer_l1']:.5f}"
    print(f"IoU {fmt['iou']}  Chamfer-L1 {chamfer}  NC {fmt['normal_consistency']}  F-score {fmt['fscore']}"
          f"  ({m['steps']} steps, {m['train_seconds']:.0f} s) -> {where}")
    if m.get("mesh_error"):
        print(f"no surface: {m['mesh_error']}")
    return 0


COMMANDS = {"train": _cmd_train, "eval": _cmd_eval, "data": _cmd_data, "render": _cmd_render, "mesh": _cmd_mesh,
            "compare": _cmd_compare, "shape": _cmd_shape}


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
    except (MemoryError, RuntimeError, OSError) as exc:  # the machine's limits, not bad input
        line = system_error_line(exc)
        if line is None or os.environ.get("ENERF_TRACEBACK"):
            raise
        print(f"enerf: error: {line}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("enerf: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
