"""Splat files by extension: the one door through which enerf reads a splat file a user gives
(``--splats``) and writes one (``enerf export splats --out``).

=========  ==============================================  ========================================
suffix     layout                                          keeps
=========  ==============================================  ========================================
``.ply``   3DGS PLY (``enerf.splats.ply``)                 float32, every SH band, the frame's name
``.spz``   Niantic's SPZ v3 (``enerf.splats.spz``)         quantised (8-24 bits), every SH band
``.splat`` antimatter15's 32 bytes a splat (``dotsplat``)  band 0 only, colour and opacity in 8 bits
=========  ==============================================  ========================================

Only the PLY names its frame (``comment enerf frame NAME``); the others are read as ``world`` (the
capture's frame), so writing them in another frame is refused rather than silently mislabelled.
``read_splats_into_scene`` is the one way a splat file comes into a run's frame (``enerf render / eval
--splats``, ``enerf view``, ``enerf export splats --splats --ckpt``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..data.scene import Scene
from ..errors import ConfigError, DataError
from .dotsplat import read_dotsplat, write_dotsplat
from .frames import splats_into_scene
from .gaussians import Splats
from .ply import read_splats, write_splats
from .spz import read_spz, write_spz

__all__ = ["SplatFormat", "FORMATS", "SUFFIXES", "splat_format", "read_splat_file", "read_splats_into_scene",
           "write_splat_file", "finite_splats"]


@dataclass(frozen=True)
class SplatFormat:
    """One splat file layout: its reader ``(path) -> (Splats, frame or None)``, its writer ``(path,
    splats, frame) -> bytes written`` (atomic), whether the file records its frame, and the highest
    SH degree it keeps."""

    what: str
    read: Callable[[Path], tuple[Splats, str | None]]
    write: Callable[[Path, Splats, str], int]
    records_frame: bool
    max_degree: int = 3


FORMATS = {
    ".ply": SplatFormat("a 3DGS PLY", read_splats, write_splats, True),
    ".spz": SplatFormat("an SPZ file (Niantic)", read_spz, write_spz, False),
    ".splat": SplatFormat("a .splat file (antimatter15)", read_dotsplat, write_dotsplat, False, max_degree=0),
}
SUFFIXES = tuple(FORMATS)


def splat_format(path: str | Path) -> SplatFormat:
    """The format of ``path`` by its extension (any case).

    Raises:
        DataError: an extension of none of ``FORMATS`` (one line naming the file).
    """
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise DataError(f"{path}: not a splat file enerf reads (extension {suffix or 'none'!r}; "
                        f"{', '.join(SUFFIXES)} are)")
    return FORMATS[suffix]


def read_splat_file(path: str | Path) -> tuple[Splats, str | None]:
    """Read the splat file ``path`` by its extension.

    Returns:
        (Splats on the CPU, float32; the frame the file names, None where it names none: taken as world)
    Raises:
        DataError: one line naming ``path``: missing, an unknown extension, or the reader's own.
    """
    path = Path(path)
    fmt = splat_format(path)
    if not path.is_file():
        raise DataError(f"{path}: splat file not found" if not path.exists() else f"{path} is not a file")
    return fmt.read(path)


def read_splats_into_scene(path: str | Path, scene: Scene | None, device: torch.device | str | None = None,
                           read: tuple[Splats, str | None] | None = None) -> tuple[Splats, str | None]:
    """Read the splat file ``path`` and bring it into ``scene``'s normalised frame, the frame a run trained
    and keeps its cameras in, from the frame the file declares (``world`` where it names none:
    ``enerf.splats.frames.splats_into_scene``); without ``scene``, the splats stay in the file's frame.

    Args:
        read: ``read_splat_file(path)``'s answer where the caller read the file already (to fail in one
            line before a run loads); None: read here
        device: where the splats go (None: the CPU, as read)
    Returns:
        (Splats, the frame the file declares: None where it names none)
    Raises:
        DataError: ``read_splat_file``'s; a declared frame enerf does not know (one line naming ``path``).
    """
    splats, frame = read if read is not None else read_splat_file(path)
    if scene is not None:
        splats = splats_into_scene(splats, scene, frame, str(path))
    return (splats if device is None else splats.map(lambda t: t.to(device))), frame


def write_splat_file(path: str | Path, splats: Splats, frame: str) -> int:
    """Write ``splats`` (in ``frame``) at ``path`` by its extension, atomically; returns the bytes written.

    Raises:
        DataError: an unknown extension.
        ConfigError: ``frame`` is not world and the format cannot record it.
    """
    fmt = splat_format(path)
    if not fmt.records_frame and frame != "world":
        raise ConfigError(f"{path}: {fmt.what} cannot record its frame ({frame}) and is read as world; "
                          "write .ply, or --frame world", fields=("frame",))
    return fmt.write(Path(path), splats, frame)


def finite_splats(splats: Splats) -> tuple[Splats, int]:
    """(the splats whose every parameter is finite, how many were dropped)."""
    ok = torch.ones(len(splats), dtype=torch.bool, device=splats.means.device)
    for value in splats.tensors().values():
        ok &= torch.isfinite(value.reshape(len(splats), -1)).all(1)
    dropped = int((~ok).sum())
    return (splats.select(ok) if dropped else splats), dropped
