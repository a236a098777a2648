"""Every recipe enerf ships, as overlays on the dataclass defaults: the device presets that
``enerf train`` takes for what no flag sets (``presets.PRESETS``) and the example files of
``configs/``, which are written from here (``python -m enerf.config.recipes configs``;
tests/unit/test_config_files.py keeps the two equal).

A recipe names the recipe it overlays (``base``; none: the dataclass defaults) and the values it
sets or changes (field name -> value, in the order its file lists them), with a note for the keys
that need one. ``values(name)`` is the recipe resolved; ``example_text(name)`` its file in configs/,
the example's identity (the scene, the run, the method: ``IDENTITY_KEYS``) first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Recipe", "RECIPES", "IDENTITY_KEYS", "values", "example_text", "write_examples"]

# Keys of a config file that name the scene, the run or the method: never part of a preset (an example
# file sets them).
IDENTITY_KEYS = frozenset({"expname", "basedir", "scene", "datadir", "dataset_type", "llffhold", "conditioning",
                           "conditioned_layers"})


@dataclass(frozen=True)
class Recipe:
    """One recipe: an overlay of ``base`` (or of the dataclass defaults) and its example file."""

    about: str  # the example file's opening comment
    sets: dict[str, Any]  # field name -> value it sets or changes, in file order
    base: str = ""  # the recipe it overlays ("": the dataclass defaults)
    notes: dict[str, str] = field(default_factory=dict)  # field name -> the comment written above it
    identity: dict[str, Any] = field(default_factory=dict)  # the example's scene, run and method (and factor)


_VIDEO = "After training, a 2-s preview video, 40 frames at half size (enerf render for more)."
_METHOD = {"conditioning": "none", "conditioned_layers": "hidden"}
_FIELD = {"encoding": "triplane", "grid_resolutions": (64, 256), "grid_components": 16}
_MLP = {"netdepth": 2, "netwidth": 64, "view_width": 64, "multires_views": 4}
# What a CUDA preset changes in its CPU one: more rays a step, 5 minutes, the decay stretched to the steps
# a GPU makes (10x per 30,000 steps), evaluations and condition numbers every 2,000 steps.
_CUDA = {"n_rand": 4096, "lrate_decay": 30, "iters": 200000, "time_budget": 300, "eval_every": 2000,
         "kappa_every": 2000}
_PAPER = {"n_rand": 1024, "n_samples": 64, "n_importance": 64, "use_viewdirs": True, "raw_noise_std": 1.0,
          "netdepth": 8, "netwidth": 256, "multires": 10, "multires_views": 4, "lrate": 5e-4, "lrate_decay": 250,
          "iters": 200000, "eval_every": 10000, "ckpt_every": 10000}
_DEMO = {"netdepth": 4, "netwidth": 96, "view_width": 48, "multires": 10, "multires_views": 4, "n_samples": 32,
         "n_importance": 0, "raw_noise_std": 1.0, "n_rand": 512, "lrate": 2e-3, "lrate_decay": 6, "iters": 3000,
         "eval_every": 500, "log_every": 50, "kappa_every": 250}

# The 10-minute CPU settings both layouts of photos share (fern_cpu adds TensoRF's NDC box).
_CPU = {**_FIELD, **_MLP, "n_samples": 64, "n_importance": 0, "rgb_weight_threshold": 1e-4, "raw_noise_std": 1.0,
        "n_rand": 1024, "lrate": 4e-3, "encoding_lrate": 4e-2, "lrate_decay": 10, "lrate_cooldown": 0.3, "iters": 100000,
        "time_budget": 600, "eval_every": 500, "eval_views": 1, "log_every": 100, "kappa_every": 500, "video": "auto"}

RECIPES: dict[str, Recipe] = {
    "fern_cpu": Recipe(
        "LLFF fern on 2 CPU cores: factor 8 (504 x 378), 10 minutes of training. Needs data/nerf_llff_data/fern "
        "(see README, \"Real data\"); figures in docs/train.md (python -m benchmarks.real --scene fern). E-NeRF: add "
        "--conditioning row. The preset cpu for forward-facing scenes (what `enerf train` without a config file "
        "takes on a CPU) is this recipe less the scene's name and factor.",
        {**_FIELD, "grid_aabb": (-1.5, -1.67, -1.0, 1.5, 1.67, 1.0), **_CPU},
        notes={"encoding": "Positions enter the MLP through a learned TensoRF vector-matrix feature volume (two levels, "
                           "64 and 256 cells a side over TensoRF's NDC box) instead of sinusoids: the sinusoidal 4 x 96 "
                           "demo net reached 20.4 dB after 3,000 steps here; this one passes 22 dB within 800 steps.",
               "netdepth": "The conditioned MLP that reads the features: 2 x 64 trunk, view branch of 64.",
               "rgb_weight_threshold": "Colour only at samples whose compositing weight exceeds 1e-4 (41 % of them by "
                                       "step 1,500): 16 % less time per step, the same PSNR at equal steps.",
               "lrate": "Twice the rates of configs/lego_cpu.txt (how they were chosen, the probes and the sweep "
                        "around them: benchmarks/README.md, \"fern_cpu.txt: how the config was reached\").",
               "lrate_cooldown": "The last 30 % of the 10 minutes anneal the rates to a tenth.",
               "eval_views": "Periodic evaluations score the first held-out view, the last one all of them: on fern "
                             "each evaluation of all 3 views costs about a minute, and 7 of them made the 10 minutes "
                             "17 minutes of wall time.",
               "video": _VIDEO},
        identity={"expname": "fern_cpu", "basedir": "runs", "scene": "fern", "factor": 8, "llffhold": 8, **_METHOD}),
    "fern_cuda": Recipe(
        "LLFF fern on one CUDA GPU: the NeRF paper's image size (factor 4, 1008 x 756), 4,096 rays a step, 5 minutes "
        "(docs/gpu.md, \"The CUDA presets\"). The preset cuda for forward-facing scenes is this recipe less the "
        "scene's name.",
        {"factor": 4, **_CUDA}, base="fern_cpu",
        identity={"expname": "fern_cuda", "basedir": "runs", "scene": "fern", "llffhold": 8, **_METHOD}),
    "capture_cpu": Recipe(
        "A capture around an object with the room behind it (nerfstudio / instant-ngp transforms.json, e.g. "
        "instant-ngp's fox) on 2 CPU cores: factor 4, every 8th frame held out, 10 minutes. Run: enerf train "
        "--config configs/capture_cpu.txt --datadir ../shared/data/nerfstudio/fox. Figures and commands: "
        "docs/captures.md. The preset cpu for walk-around captures is this recipe less the run's name and the factor.",
        {"contraction": "linf", "far": 1000.0, "lindisp_from": 1.0, "sampler": "proposal", "proposal_samples": (128,),
         "proposal_resolutions": (64,), "proposal_components": 8, "distortion_weight": 0.002,
         **_CPU, "n_samples": 48, "eval_every": 1000},
        notes={"contraction": "Unbounded scene: positions are contracted (nerfacto's L-infinity contraction) into "
                              "[-2, 2]^3, the box of the triplane; rays run from the loader's near plane out to 1000 "
                              "scene units (the cameras lie in [-1, 1]^3), half the samples evenly in depth up to 1, "
                              "half evenly in disparity beyond (nerfacto's piecewise sampler; docs/captures.md).",
               "sampler": "Where to sample: nerfacto's proposal sampler (one proposal network, a 64-cell triplane "
                          "and a 16-unit MLP, read on 128 intervals a ray), then the field on the 48 intervals it "
                          "proposes; mip-NeRF 360's distortion loss against floaters.",
               "encoding": "Field and rates as configs/fern_cpu.txt (docs/captures.md: what it reaches on the fox in "
                           "10 minutes, nerfacto beside it).",
               "eval_views": "Periodic evaluations score the first held-out view (about 4 in 10 minutes), the last one "
                             "all of them; with the preview video the run stays under 15 minutes of wall time.",
               "video": _VIDEO},
        identity={"expname": "capture_cpu", "basedir": "runs", "factor": 4, "llffhold": 8, **_METHOD}),
    "capture_cuda": Recipe(
        "A capture around an object with the room behind it (transforms.json) on one CUDA GPU: the photos at half "
        "size (factor 2), 4,096 rays a step (nerfacto's batch), 5 minutes. The preset cuda for walk-around captures "
        "is this recipe less the run's name.",
        {"factor": 2, **_CUDA}, base="capture_cpu",
        identity={"expname": "capture_cuda", "basedir": "runs", "llffhold": 8, **_METHOD}),
    "lego_cpu": Recipe(
        "Blender lego on 2 CPU cores: 400 x 400 (the release's 800 x 800 halved), 10 minutes of training, scored on "
        "every 8th test view (25 of 200). Needs data/nerf_synthetic/lego (see README, \"Real data\"); figures in "
        "docs/train.md (python -m benchmarks.real --scene lego). The preset cpu for Blender scenes is this recipe "
        "less the scene's name and factor.",
        {"testskip": 8, "white_bkgd": True, **_FIELD, "grid_aabb": (-1.5, -1.5, -1.5, 1.5, 1.5, 1.5), **_MLP,
         "sampler": "torch_grid", "render_step_size": 0.01, "grid_resolution": 128, "early_stop_eps": 1e-3,
         "target_sample_batch_size": 65536, "raw_noise_std": 0.0, "n_rand": 1024, "lrate": 2e-3,
         "encoding_lrate": 2e-2, "lrate_decay": 10, "iters": 100000, "time_budget": 600, "eval_every": 500,
         "eval_views": 5, "log_every": 100, "kappa_every": 500, "video": "auto"},
        notes={"encoding": "A learned TensoRF vector-matrix feature volume over the object's box [-1.5, 1.5]^3 feeds "
                           "the conditioned 2 x 64 MLP (as configs/fern_cpu.txt).",
               "sampler": "Occupancy-grid ray marching in plain torch over the object's box: most of each image is "
                          "empty background, which the grid skips. Steps of 0.01 in t (about 1/300 of the box), "
                          "128^3 cells.",
               "video": _VIDEO},
        identity={"expname": "lego_cpu", "basedir": "runs", "scene": "lego", "dataset_type": "blender", "factor": 1,
                  **_METHOD}),
    "lego_cuda": Recipe(
        "Blender lego on one CUDA GPU: full-size images (factor 1), occupancy-grid marching through nerfacc's CUDA "
        "kernels where its extension builds (sampler auto; torch_grid otherwise), 4,096 rays in the first step and "
        "then as many as bring a step to 262,144 samples (nerfacc's example's target), 5 minutes. The preset cuda "
        "for Blender scenes is this recipe less the scene's name.",
        {"factor": 1, "sampler": "auto", "target_sample_batch_size": 262144, **_CUDA}, base="lego_cpu",
        identity={"expname": "lego_cuda", "basedir": "runs", "scene": "lego", "dataset_type": "blender", **_METHOD}),
    "fern": Recipe(
        "LLFF fern with nerf-pytorch's published settings (its configs/fern.txt; meant for a GPU: ~200k steps). "
        "Needs data/nerf_llff_data/fern (see README, \"Real data\"). E-NeRF: add --conditioning row. The preset "
        "paper for forward-facing LLFF scenes is this recipe less the scene's name and factor.",
        dict(_PAPER),
        identity={"expname": "fern", "basedir": "runs", "scene": "fern", "dataset_type": "llff", "factor": 8,
                  "llffhold": 8}),
    "lego": Recipe(
        "Blender lego with nerf-pytorch's published settings (its configs/lego.txt; meant for a GPU: ~200k steps): "
        "half-resolution images on white, 64 + 128 samples, the first 500 steps on the central crop. Needs "
        "data/nerf_synthetic/lego. The preset paper for Blender scenes is this recipe less the scene's name.",
        {"half_res": True, "white_bkgd": True, "n_importance": 128, "raw_noise_std": 0.0, "lrate_decay": 500,
         "precrop_iters": 500, "precrop_frac": 0.5}, base="fern",
        identity={"expname": "lego", "basedir": "runs", "scene": "lego", "dataset_type": "blender"}),
    "demo": Recipe(
        "CPU-sized NeRF on the embedded synthetic scene (made under data/demo on first use), a few minutes on 2 CPU "
        "cores; docs/train.md has what it reaches and how long it takes.",
        dict(_DEMO),
        notes={"raw_noise_std": "Noise on the raw density while training, as nerf-pytorch's LLFF configs: without it "
                                "a ReLU density head that starts negative everywhere never gets a gradient (seeds 1 "
                                "and 2 stayed black)."},
        identity={"expname": "demo", "basedir": "runs", "scene": "demo", "factor": 8, "llffhold": 8, **_METHOD}),
    "demo_grid": Recipe(
        "The demo (configs/demo.txt: same scene, network, rays and learning rate) trained with occupancy-grid ray "
        "marching in plain torch (--sampler torch_grid); benchmarks/marcher.py compares it with the hierarchical "
        "sampler. See docs/render.md.",
        {"sampler": "torch_grid", "render_step_size": 0.0625, "grid_resolution": 32, "occ_thre": 0.05,
         "grid_ema_decay": 0.8, "target_sample_batch_size": 3072, "early_stop_eps": 1e-2, "early_stop_block": 8,
         "cull_occluded": True}, base="demo",
        notes={"render_step_size": "16 steps across the NDC depth range (the hierarchical demo takes 32 samples per "
                                   "ray), of which the grid keeps those in occupied cells (a step spans two 32^3 cells "
                                   "in depth). Measured on this scene: steps of 1/32 needed 1.7x the queries per ray "
                                   "and no less time to the same PSNR (benchmarks/README.md).",
               "occ_thre": "A cell is occupied when one step through it is at least 5 % opaque (nerfacc: 1 %), and "
                           "the running occupancy forgets faster (0.8 per update; nerfacc: 0.95): the haze of the "
                           "first few hundred steps leaves the grid sooner. Both measured on this scene.",
               "target_sample_batch_size": "Samples per step, as nerfacc's examples: rays per step grow as the grid "
                                           "empties. 3,072 is less than a fifth of the hierarchical demo's 16,384 "
                                           "points per step; 2,048-4,096 reach its PSNR within a few per cent of each "
                                           "other, 6,144 and 8,192 later (benchmarks/README.md).",
               "early_stop_eps": "Rays stop once their transmittance falls below 1 % (nerfacc: 0.01 %): the demo's "
                                 "rays rarely get more opaque than 99.6 %, and behind them lies space no view "
                                 "constrains. Colour and density are queried front to back, 8 samples per ray in the "
                                 "first round and twice as many in each next one, so most samples behind a stop are "
                                 "never sent to the network.",
               "cull_occluded": "Occlusion culling: a cell that no training ray reached with transmittance >= 1 % "
                                "since the last grid update is empty (the samples there would be dropped by the early "
                                "stop anyway)."},
        identity={"expname": "demo_grid", "basedir": "runs", "scene": "demo", "factor": 8, "llffhold": 8, **_METHOD}),
    "paper_fern_cpu": Recipe(
        "The weight-conditioning paper's NeRF on LLFF fern, sized for one CPU core: the network of configs/fern.txt "
        "unchanged (coarse and fine 8 x 256 MLPs, positional encoding 10 / 4 octaves, the input re-read after layer "
        "4, a view branch of 128), factor 8 (504 x 378). Compare runs: docs/paper.md. E-NeRF: add --conditioning row.",
        {"n_rand": 256, "n_samples": 32, "n_importance": 32, "iters": 400, "eval_stride": 4, "eval_every": 100,
         "eval_views": 1, "log_every": 10, "kappa_every": 50, "ckpt_every": 0}, base="fern",
        notes={"n_rand": "nerf-pytorch's 1,024 rays of 64 + 64 samples take 13 s a step on one core. 256 rays of "
                         "32 + 32 samples take 1.2 s: 16.55 dB after 5 minutes, where 256 rays of 64 + 64 (2.8 s) "
                         "reach 15.12 dB (docs/paper.md, \"Choosing the budget\").",
               "eval_stride": "Evaluations score every 4th row and column of the held-out views (126 x 95 of each): "
                              "a full 504 x 378 view takes this network minutes on one core. Periodic ones read one "
                              "view."},
        identity={"expname": "paper_fern_cpu", "basedir": "runs", "scene": "fern", "dataset_type": "llff",
                  "factor": 8, "llffhold": 8}),
    "paper_lego_cpu": Recipe(
        "The weight-conditioning paper's NeRF on Blender lego, sized for one CPU core: the 8 x 256 MLP of "
        "configs/fern.txt (positional encoding 10 / 4 octaves, the input re-read after layer 4, a view branch of "
        "128) at 200 x 200 (the 400 x 400 frames halved), scored on every 16th test view (13 of 200). Compare runs: "
        "docs/paper.md. E-NeRF: add --conditioning row.",
        {"testskip": 16, "white_bkgd": True, "raw_noise_std": 0.0, "n_importance": 0, "sampler": "torch_grid",
         "grid_resolution": 64, "render_step_size": 0.01, "early_stop_eps": 1e-3, "target_sample_batch_size": 16384,
         "iters": 400, "eval_stride": 4, "eval_every": 100, "eval_views": 2,
         "log_every": 10, "kappa_every": 50, "ckpt_every": 0}, base="fern",
        notes={"sampler": "One network marched through a 64^3 occupancy grid with early stop: most of each frame is "
                          "empty background. NeRF's coarse + fine sampling (256 rays of 32 + 32) stayed at a white "
                          "image (training PSNR 10.4 dB after 5 minutes) where this reached 15.8 dB (docs/paper.md).",
               "eval_stride": "Evaluations score every 4th row and column of the held-out views (50 x 50 of each); "
                              "periodic ones read two views."},
        identity={"expname": "paper_lego_cpu", "basedir": "runs", "scene": "lego", "dataset_type": "blender",
                  "factor": 2}),
}


def values(name: str) -> dict[str, Any]:
    """Field name -> value of recipe ``name`` resolved over its bases (a base's keys first, in order)."""
    recipe = RECIPES[name]
    out = values(recipe.base) if recipe.base else {}
    out.update(recipe.sets)
    return out


def _notes(name: str) -> dict[str, str]:
    recipe = RECIPES[name]
    return {**(_notes(recipe.base) if recipe.base else {}), **recipe.notes}


def _wrap(text: str, width: int = 100) -> list[str]:
    """``text`` as comment lines of at most ``width`` characters."""
    lines, line = [], "#"
    for word in text.split():
        if len(line) + 1 + len(word) > width:
            lines.append(line)
            line = "#"
        line += " " + word
    return lines + [line]


def _text(value: Any) -> str:
    """A value as a config file writes it: lists in brackets, booleans lower-case."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return str(value)


def example_text(name: str, flags: dict[str, str]) -> str:
    """configs/<name>.txt: the recipe's opening comment, its identity, then its values under their
    flags (``flags``: field name -> flag where they differ, ``N_rand`` for ``n_rand``), notes above."""
    recipe, notes = RECIPES[name], _notes(name)
    lines = _wrap(recipe.about)
    lines.append("# Written by `python -m enerf.config.recipes configs` from enerf/config/recipes.py: edit it there.")
    for key, value in {**recipe.identity, **values(name)}.items():
        if key in notes:
            lines += _wrap(notes[key])
        lines.append(f"{flags.get(key, key)} = {_text(value)}")
    return "\n".join(lines) + "\n"


def write_examples(folder: Path, flags: dict[str, str]) -> list[Path]:
    """Write every recipe's example file into ``folder`` (configs/); returns the paths written."""
    written = []
    for name in RECIPES:
        path = Path(folder) / f"{name}.txt"
        tmp = path.with_suffix(".txt.tmp")
        tmp.write_text(example_text(name, flags))
        tmp.replace(path)
        written.append(path)
    return written


if __name__ == "__main__":
    import sys

    from .nerf import RunConfig
    from .spec import flag_names

    for written in write_examples(Path(sys.argv[1] if len(sys.argv) > 1 else "configs"), flag_names(RunConfig)):
        print(written)
