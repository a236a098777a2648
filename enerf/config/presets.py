"""Device presets: what ``enerf train`` takes for the settings that no config file or flag set.

``--preset`` (default ``auto``) picks one by the device, the scene's layout and what its cameras
show (``--scene_kind``, default ``auto``: decided from the cameras, ``enerf.cameras.scene_kind``):

    cpu    the 10-minute CPU settings: fern_cpu (forward-facing scenes, NDC rays), capture_cpu
           (walk-around captures: world-space rays, a scene contraction) or lego_cpu (Blender
           scenes, which keep their bounded box)
    cuda   the same three for one CUDA GPU: fern_cuda, capture_cuda, lego_cuda (larger photos,
           4,096 rays a step, the occupancy grid through nerfacc for Blender, 5 minutes)
    paper  nerf-pytorch's published settings: fern (forward-facing LLFF scenes), lego (Blender);
           other scenes (captures in transforms.json, walk-around LLFF scenes) have none and take
           the device's preset
    auto   cuda on CUDA, cpu otherwise (Apple's MPS included); none when a config file is given (a
           config file is a whole recipe: its keys over the dataclass defaults, exactly as written)
    none   the dataclass defaults

The presets ship inside the package: each is a ``key = value`` file in ``enerf/config/preset_files/``
(package data, read through ``importlib.resources``), read by the parser that reads ``--config``
(the caller's ``read``). Nothing here reads the repository: an installed wheel has the same
presets as a clone. The repository's ``configs/<name>.txt`` are the same recipes as example files
for ``--config``, with the scene and the run named (``IDENTITY_KEYS``); a test keeps each equal to
its preset. A preset never sets the scene's identity, the run or the method (``IDENTITY_KEYS``);
the cpu and paper presets leave the image factor to the loader, the cuda ones set it. A preset only
fills keys that were not set: a config file or a flag always wins.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError

__all__ = ["Preset", "PRESETS", "PRESET_CHOICES", "SCENE_KIND_DEFAULT", "IDENTITY_KEYS", "PRESET_FILES",
           "read_preset_file", "preset_name", "preset_for", "preset_line"]

PRESET_CHOICES = ("auto", "cpu", "cuda", "paper", "none")
SCENE_KIND_DEFAULT = "auto"  # --scene_kind: decided from the cameras (enerf.config.DataConfig.scene_kind)
# seconds of splat baking after the field on a photo capture (transforms.json, walk-around or forward-facing):
# with the 10-minute field, training and bake stay under 15 minutes (benchmarks/capture_splats.json)
CAPTURE_SPLAT_SECONDS = 255.0
PRESET_FILES = "preset_files"  # the presets' folder inside the enerf.config package (package data)
# Keys of a config file that name the scene, the run or the method: never part of a preset (the example
# files in configs/ set them).
IDENTITY_KEYS = frozenset({"expname", "basedir", "scene", "datadir", "dataset_type", "llffhold", "conditioning",
                           "conditioned_layers"})
_CPU_FIELD = "triplane + 2 x 64 MLP"


@dataclass(frozen=True)
class Preset:
    """One preset for one scene layout: its packaged file and how the start line describes it."""

    name: str  # cpu | cuda | paper
    layout: str  # llff (forward-facing) | capture (walk-around) | blender
    file: str  # its file in enerf/config/preset_files/ (fern_cpu.txt); configs/<file> is its example
    summary: str  # what it is, for the start line
    values: dict[str, Any] = field(default_factory=dict)  # field name -> value (preset_for reads them)
    scene: str = ""  # what the cameras show and the flag that overrides it (``preset_for``), for the start line
    has_paper: bool = True  # whether --preset paper has settings for this scene (the start line offers them)

    @property
    def example(self) -> str:
        """The repository's example file of the same recipe (``configs/fern_cpu.txt``)."""
        return f"configs/{self.file}"

    @property
    def source(self) -> str:
        """Where its values come from, as the start line names it."""
        return f"enerf's preset {Path(self.file).stem} (example file: {self.example})"


PRESETS: dict[tuple[str, str], Preset] = {
    ("cpu", "llff"): Preset("cpu", "llff", "fern_cpu.txt", f"10-minute CPU settings ({_CPU_FIELD}, 64 samples, "
                            "--time_budget 600)"),
    ("cpu", "blender"): Preset("cpu", "blender", "lego_cpu.txt", f"10-minute CPU settings ({_CPU_FIELD}, "
                               "torch_grid renderer, --time_budget 600)"),
    ("cpu", "capture"): Preset("cpu", "capture", "capture_cpu.txt", f"10-minute CPU settings ({_CPU_FIELD}, "
                               "scene contraction, proposal sampler, 48 samples, --time_budget 600)"),
    ("cuda", "llff"): Preset("cuda", "llff", "fern_cuda.txt", f"GPU settings ({_CPU_FIELD}, photos at factor 4, "
                             "4,096 rays a step, 64 samples, --time_budget 300)"),
    ("cuda", "blender"): Preset("cuda", "blender", "lego_cuda.txt", f"GPU settings ({_CPU_FIELD}, full-size "
                                "images, occupancy grid through nerfacc where it builds, 4,096 rays in the first "
                                "step, 262,144 samples a step, --time_budget 300)"),
    ("cuda", "capture"): Preset("cuda", "capture", "capture_cuda.txt", f"GPU settings ({_CPU_FIELD}, photos at "
                                "half size, scene contraction, proposal sampler, 4,096 rays a step, 48 samples, "
                                "--time_budget 300)"),
    ("paper", "llff"): Preset("paper", "llff", "fern.txt", "the paper's settings (8 x 256 MLP, 64 + 64 "
                              "samples, 200,000 steps)"),
    ("paper", "blender"): Preset("paper", "blender", "lego.txt", "the paper's settings "
                                 "(8 x 256 MLP, 64 + 128 samples, half resolution, 200,000 steps)"),
}


def read_preset_file(file: str, read: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """``read(path)`` of the packaged preset ``file`` (``fern_cpu.txt``), through a real path
    (``importlib.resources.as_file``); a ConfigError (one line) when the install lacks it."""
    resource = resources.files(__package__).joinpath(PRESET_FILES, file)
    if not resource.is_file():
        raise ConfigError(f"enerf's preset {file} is missing from the installed package ({__package__}/"
                          f"{PRESET_FILES}/): reinstall enerf, or pass --config FILE or --preset none")
    with resources.as_file(resource) as path:
        return read(Path(path))


def preset_name(choice: str, device: str, config_file: bool) -> str:
    """The preset ``--preset choice`` means on ``device`` (cpu | cuda | mps): ``auto`` is ``none``
    with a config file, else ``cuda`` on CUDA and ``cpu`` elsewhere; the other choices mean themselves."""
    if choice != "auto":
        return choice
    if config_file:
        return "none"
    return "cuda" if device == "cuda" else "cpu"


def preset_for(name: str, dataset_type: str, kind: str, read: Callable[[Path], dict[str, Any]],
               scene: str = "", fallback: str = "cpu") -> Preset:
    """The preset ``name`` (cpu | cuda | paper) for a scene of ``dataset_type`` (llff | blender |
    nerfstudio) whose cameras show ``kind`` (forward | walkaround): Blender scenes keep their bounded
    box, walk-around scenes take the capture settings, forward-facing ones the LLFF settings;
    ``paper`` exists for forward-facing LLFF and Blender scenes only, the others take ``fallback``
    (the device's preset). Its values are ``read(file)`` (field name -> value of each key the packaged
    file sets), with ``scene_kind = kind`` (not for Blender) and, for a photo capture (transforms.json),
    ``splat_seconds = CAPTURE_SPLAT_SECONDS`` unless the file sets it; ``scene`` is what the start line says
    about the scene."""
    layout = "blender" if dataset_type == "blender" else "capture" if kind == "walkaround" else "llff"
    if name == "paper" and (dataset_type == "nerfstudio" or (name, layout) not in PRESETS):
        name = fallback
    preset = PRESETS[(name, layout)]
    values = read_preset_file(preset.file, read)
    leaked = sorted(IDENTITY_KEYS & set(values))
    if leaked:  # a packaged file that names a scene or a run: a packaging mistake, said in one line
        raise ConfigError(f"enerf's preset {preset.file} sets {', '.join(leaked)}, which only a config file may set")
    if dataset_type != "blender":
        values["scene_kind"] = kind
    if dataset_type == "nerfstudio":  # a photo capture's run ends in splats
        values.setdefault("splat_seconds", CAPTURE_SPLAT_SECONDS)
    has_paper = dataset_type != "nerfstudio" and ("paper", layout) in PRESETS
    return replace(preset, values=values, scene=scene, has_paper=has_paper)


def preset_line(preset: Preset, choice: str, device: str, why: str = "") -> str:
    """The one line ``enerf train`` starts with: the device and why, the scene, the preset and
    where its values come from, and the flag for the other preset; e.g. ``cpu (--device auto:
    torch sees no CUDA GPU): forward-facing (...), --scene_kind walkaround if not; 10-minute CPU
    settings (...) from enerf's preset fern_cpu (example file: configs/fern_cpu.txt) for what no flag
    sets; --preset paper for the paper's 8 x 256 network``."""
    where = f"{device} ({why})" if why else device
    if choice == "auto":
        where = f"{where}: "
    elif choice != preset.name:  # --preset paper for a scene it has no settings for
        where = f"--preset {choice} (none for this scene: {preset.name}) on {where}: "
    else:
        where = f"--preset {preset.name} on {where}: "
    paper = "--preset paper for the paper's 8 x 256 network"
    if preset.name == "paper":
        other = f"--preset {'cuda for the GPU' if device == 'cuda' else 'cpu for the 10-minute CPU'} settings"
    elif preset.name == "cuda":
        other = "--preset cpu for the 10-minute CPU settings" + (f", {paper}" if preset.has_paper else "")
    elif preset.has_paper:
        other = paper
    else:
        other = "--preset none for the built-in defaults"
    scene = f"{preset.scene}; " if preset.scene else ""
    return f"{where}{scene}{preset.summary} from {preset.source} for what no flag sets; {other}"
