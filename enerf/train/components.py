"""Build the pieces of a NeRF run from its config: device, scene, fields, render callables."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from torch import Tensor

from ..config import DataConfig, FieldConfig, RunConfig
from ..data.blender import load_blender
from ..data.llff import load_llff
from ..data.resolve import resolve_scene_dir
from ..data.scene import Scene
from ..errors import ConfigError, DataError
from ..fields.nerf import NeRFField
from ..render import FieldFns

__all__ = ["select_device", "LOADERS", "dataset_type_of", "load_scene", "build_fields", "render_fn", "field_fns", "run_dir"]

RgbSigmaFn = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


def select_device(name: str) -> torch.device:
    """``auto`` picks CUDA when available; ``cuda`` without a GPU is a config error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda was asked for but torch sees no CUDA device; use --device cpu or auto")
    if name not in ("cpu", "cuda"):
        raise ConfigError(f"--device {name!r} is not one of auto, cpu, cuda")
    return torch.device(name)


def _load_llff(cfg: DataConfig, scene_dir: Path, white_bkgd: bool) -> Scene:
    return load_llff(scene_dir, factor=cfg.factor or 8, recenter=cfg.recenter, bd_factor=cfg.bd_factor,
                     spherify=cfg.spherify, llffhold=cfg.llffhold, use_ndc=cfg.use_ndc)


def _load_blender(cfg: DataConfig, scene_dir: Path, white_bkgd: bool) -> Scene:
    return load_blender(scene_dir, half_res=cfg.half_res, factor=cfg.factor or 1, testskip=cfg.testskip,
                        white_bkgd=white_bkgd)


# dataset_type -> loader(cfg, scene folder, white_bkgd); "auto" looks at the folder's files.
LOADERS: dict[str, Callable[[DataConfig, Path, bool], Scene]] = {"llff": _load_llff, "blender": _load_blender}


def dataset_type_of(scene_dir: Path, dataset_type: str) -> str:
    """``dataset_type``, or for ``auto``: blender when the folder has a ``transforms_*.json``,
    llff when it has ``poses_bounds.npy`` (or an ``images*/`` folder, so the LLFF loader names what is missing).

    Raises:
        DataError: ``auto`` on a folder with none of these.
    """
    if dataset_type != "auto":
        return dataset_type
    scene_dir = Path(scene_dir)
    if any((scene_dir / f"transforms_{split}.json").is_file() for split in ("train", "val", "test")):
        return "blender"
    if (scene_dir / "poses_bounds.npy").is_file() or any(
        p.is_dir() and p.name.startswith("images") for p in scene_dir.iterdir()
    ):
        return "llff"
    raise DataError(f"{scene_dir}: neither transforms_train.json (Blender) nor poses_bounds.npy (LLFF) found; "
                    "is this the scene folder?")


def load_scene(cfg: DataConfig, data_root: Path, white_bkgd: bool = False) -> Scene:
    """Resolve ``cfg.scene`` / ``cfg.datadir`` and load it with its dataset's loader (``LOADERS``).

    ``white_bkgd``: Blender frames are composited on white (else black), as the renderer's background."""
    if cfg.dataset_type not in (*LOADERS, "auto"):
        raise ConfigError(f"dataset_type {cfg.dataset_type!r} is not one of auto, {', '.join(LOADERS)}")
    scene_dir = resolve_scene_dir(cfg.scene, cfg.datadir, data_root)
    return LOADERS[dataset_type_of(scene_dir, cfg.dataset_type)](cfg, scene_dir, white_bkgd)


def build_fields(cfg: FieldConfig, with_fine: bool, device: torch.device) -> dict[str, NeRFField]:
    """The coarse field, plus a fine one of the same shape when ``with_fine``."""
    fields = {"coarse": NeRFField.from_config(cfg).to(device)}
    if with_fine:
        fields["fine"] = NeRFField.from_config(cfg).to(device)
    return fields


def render_fn(field: NeRFField | None, density_noise_std: float = 0.0) -> RgbSigmaFn | None:
    """Wrap a field as the renderer's ``rgb_sigma_fn(points, viewdirs) -> (rgb, sigma)``."""
    if field is None:
        return None

    def rgb_sigma_fn(points: Tensor, viewdirs: Tensor) -> tuple[Tensor, Tensor]:
        return field(points, viewdirs, density_noise_std=density_noise_std)

    return rgb_sigma_fn


def field_fns(fields: dict[str, NeRFField], density_noise_std: float = 0.0) -> FieldFns:
    """The renderer's callables for ``fields``: coarse rgb_sigma (with ``density_noise_std``),
    its density for grid updates and the early-stop pre-pass, and the fine field's rgb_sigma if any.

    That density is the one rendering sees on average, E[relu(raw + noise)]: with noise it is
    never exactly zero, so a ReLU density head that has gone negative everywhere (which the
    noise lets training recover from) does not empty the occupancy grid for good.
    """
    coarse = fields["coarse"]

    def sigma_fn(points: Tensor) -> Tensor:
        return coarse.mean_density(points, density_noise_std)

    return FieldFns(
        rgb_sigma=render_fn(coarse, density_noise_std),
        sigma=sigma_fn,
        fine_rgb_sigma=render_fn(fields.get("fine"), density_noise_std),
    )


def run_dir(cfg: RunConfig) -> Path:
    return Path(cfg.basedir) / cfg.expname
