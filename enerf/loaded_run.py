"""A trained run loaded from its checkpoint alone (``load_run`` -> ``LoadedRun``: config, fields
with their weights, the renderer with its state, the run folder, the scene), and the device a
run computes on (``select_device``, from ``enerf.device``). ``enerf eval`` / ``render`` / ``mesh`` / ``view`` / ``export``
start here.

Where the scene comes from (``load_run``'s ``datadir`` is the commands' ``--datadir``):

* a checkpoint that carries its cameras (``enerf.data.camera_record``, written by training), for a
  command that needs no images (``images=False``: render, mesh, export, view): the cameras; the
  folder is not read, even when ``datadir`` names it (reading a capture's photos takes seconds).
* ``datadir`` given: that folder, loaded (images and cameras).
* otherwise the folder recorded at training (``cfg.data``), when it is there; else (``images``
  None) the checkpoint's cameras. A command that needs the images (``images=True``: eval) and
  does not find the folder says so in one line naming ``--datadir``. Old checkpoints without
  cameras load as before.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from .checkpoint import load_checkpoint, load_weights, renderer_state
from .config import RunConfig, ShapeRunConfig
from .data.camera_record import scene_from_cameras
from .data.loaders import load_scene
from .data.resolve import find_scene_dir
from .data.scene import Scene
from .device import select_device
from .errors import CheckpointError, DataError
from .render.build import build_fields
from .fields.shape import ShapeField
from .render import Renderer, build_renderer, keeps_grid
from .runfolder import checkpoint_run_folder

__all__ = [
    "LoadedRun",
    "TASKS",
    "task_of",
    "load_run",
    "select_device",
    "load_weights",
    "renderer_from_checkpoint",
]


def renderer_from_checkpoint(payload: dict, cfg: RunConfig, device: torch.device) -> Renderer | None:
    """The renderer a checkpoint was trained with, its estimator (occupancy grid) restored.

    ``--sampler auto`` resolves again on ``device``, and a ``nerfacc`` run renders with
    ``torch_grid`` where nerfacc cannot run (a CPU): both keep the same grid state. None for a
    grid renderer whose checkpoint holds no grid (then ``render_rays_image`` reads one off
    the field).
    """
    state = renderer_state(payload.get("extra") or {})
    if state is None and keeps_grid(cfg.render.sampler):
        return None
    return build_renderer(cfg.render, device, state=state, fallback=True)


@dataclass
class LoadedRun:
    """A trained run, from its checkpoint alone (``load_run``)."""

    cfg: RunConfig | ShapeRunConfig
    step: int  # steps trained
    fields: dict[str, nn.Module]  # weights loaded, eval mode: NeRF "coarse" (+ "fine"), shape "field"
    renderer: Renderer | None  # NeRF: the trained renderer, its occupancy grid restored (None: shape, or read off the field)
    folder: Path  # the run folder (``run_folder``): metrics.json, test_views/, videos, meshes
    ckpt_path: Path
    device: torch.device
    extra: dict  # the training loop's records: history, train_seconds, kappa_history, ...
    scene: Scene | None = None  # NeRF runs loaded with a data_root: the scene
    scene_dir: Path | None = None  # the scene's folder when it is reachable (else None)

    @property
    def task(self) -> str:
        """``nerf`` or ``shape``."""
        return task_of(self.cfg)


# what to say when a command meant for one task gets the other's checkpoint
_WRONG_TASK = {
    "nerf": "{ckpt} is a shape checkpoint; use enerf shape eval / enerf shape mesh --ckpt {ckpt}",
    "shape": "{ckpt}: a NeRF checkpoint; `enerf shape` needs one written by `enerf shape train`",
}


@dataclass(frozen=True)
class Task:
    """What a checkpoint's config type means: the task's name and the networks its weights fill."""

    name: str  # "nerf" or "shape"
    build_fields: Callable[[Any, torch.device], dict[str, nn.Module]]  # (config, device) -> named networks


# one entry per task, by the checkpoint's config type
TASKS: dict[type, Task] = {
    RunConfig: Task("nerf", lambda cfg, device: build_fields(cfg.field, device, cfg.render)),
    ShapeRunConfig: Task("shape", lambda cfg, device: {"field": ShapeField(cfg.field).to(device)}),
}


def task_of(cfg: RunConfig | ShapeRunConfig) -> str:
    """``nerf`` or ``shape``: the task a run's config belongs to (``TASKS``)."""
    return TASKS[type(cfg)].name


def _load_scene(cfg: RunConfig, payload: dict, data_root: Path, datadir: str | Path | None,
                images: bool | None) -> tuple[Scene, Path | None]:
    """(scene, its folder or None) by the rules of the module docstring."""
    record = (payload.get("extra") or {}).get("cameras")
    data = dataclasses.replace(cfg.data, datadir=str(datadir)) if datadir else cfg.data
    folder = find_scene_dir(data.scene, data.datadir, data_root)
    if record is not None and (images is False or (images is None and folder is None and not datadir)):
        return scene_from_cameras(record), folder
    if folder is None and record is not None and not datadir:
        where = data.datadir or f"scene {data.scene!r} under {data_root}"
        raise DataError(f"this command needs the scene's images: {where} (the folder recorded at training) not "
                        "found; pass --datadir SCENE_FOLDER")
    scene = load_scene(data, data_root, cfg.render.white_bkgd)
    if record is not None:
        trained = (len(record["poses"]), int(record["width"]), int(record["height"]))
        found = (scene.n_views, scene.width, scene.height)
        if trained != found:
            raise DataError(f"{data.datadir or data.scene}: {found[0]} views of {found[1]}x{found[2]}, but the "
                            f"checkpoint was trained on {trained[0]} views of {trained[1]}x{trained[2]}; is --datadir "
                            "the run's scene?")
    return scene, folder or find_scene_dir(data.scene, data.datadir, data_root)  # the demo is written on first use


def load_run(ckpt: str | Path, data_root: Path | None = None, device_name: str | None = None,
             task: str | None = None, datadir: str | Path | None = None, images: bool | None = None) -> LoadedRun:
    """Rebuild a run from its checkpoint: config, fields with their weights, the renderer with its
    state, the run folder, and (NeRF, with ``data_root``) the scene (module docstring).

    Args:
        device_name: ``auto`` / ``cpu`` / ``cuda``; None: the device the run was trained on.
        task: ``nerf`` or ``shape`` to refuse the other task's checkpoints; None: either.
        datadir: the scene folder, instead of the one recorded at training (``--datadir``).
        images: True: the images are needed (``enerf eval``), the folder must be found; False:
            the checkpoint's cameras suffice (the folder is not read when it carries them); None:
            the folder when it is there, else the checkpoint's cameras.

    Raises:
        CheckpointError: missing, unreadable or foreign checkpoint, the other task's checkpoint,
            or weights that do not fit the network its config describes.
        DataError: the scene folder is needed and not found (one line naming ``--datadir``), or
            ``datadir`` holds another scene.
    """
    ckpt_path = Path(ckpt)
    payload, cfg = load_checkpoint(ckpt_path)
    kind = task_of(cfg)
    if task is not None and task != kind:
        raise CheckpointError(_WRONG_TASK[task].format(ckpt=ckpt_path))
    device = select_device(device_name or cfg.train.device)
    fields = TASKS[type(cfg)].build_fields(cfg, device)
    load_weights(fields, payload["fields"], ckpt_path)
    for module in fields.values():
        module.eval()
    nerf = kind == "nerf"
    scene, scene_dir = (_load_scene(cfg, payload, Path(data_root), datadir, images) if nerf and data_root is not None
                        else (None, None))
    return LoadedRun(cfg, int(payload["step"]), fields, renderer_from_checkpoint(payload, cfg, device) if nerf else None,
                     checkpoint_run_folder(ckpt_path, cfg), ckpt_path, device, payload.get("extra") or {}, scene,
                     scene_dir)
