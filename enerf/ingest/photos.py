"""The photo folders of ``enerf data colmap|images|video``: the photos read (upright, one size, at
least ``MIN_IMAGES``) and the scene folder written beside its final place and renamed into it at the
end (``built_beside``), so an output folder is absent or complete."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from ..data.llff import IMAGE_SUFFIXES
from ..errors import DataError

__all__ = ["MIN_IMAGES", "collect_photos", "upright_size", "copy_upright", "built_beside", "check_out"]

MIN_IMAGES = 3
EXIF_ORIENTATION = 0x0112


def collect_photos(folder: Path) -> tuple[list[Path], list[str], tuple[int, int]]:
    """The photos of ``folder`` (png / jpg, sorted by name) and the names of the other files.

    Returns:
        photos: the image files, sorted by name
        skipped: names of files (and folders) that are not png / jpg images
        size: (width, height) shared by every photo, upright (EXIF orientation applied)
    Raises:
        DataError: missing folder, fewer than ``MIN_IMAGES`` photos, an unreadable photo, photos of
            different sizes or two photos with the same name stem.
    """
    from PIL import Image

    if not folder.is_dir():
        raise DataError(f"{folder}: --images folder not found")
    entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    photos = [p for p in entries if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES]
    skipped = [p.name + ("/" if p.is_dir() else "") for p in entries if p not in photos]
    if len(photos) < MIN_IMAGES:
        raise DataError(f"{folder}: {len(photos)} png / jpg photo(s) found, at least {MIN_IMAGES} are needed "
                        "(take overlapping photos of the scene from several positions)")
    stems: dict[str, str] = {}
    for p in photos:
        if p.stem in stems:
            raise DataError(f"{folder}: {stems[p.stem]} and {p.name} share a name stem (downscaled copies would "
                            "collide); rename one")
        stems[p.stem] = p.name
    sizes = []
    for p in photos:
        try:
            with Image.open(p) as img:
                sizes.append(upright_size(img))
        except Exception as exc:
            raise DataError(f"{p}: unreadable image ({type(exc).__name__}); remove it or convert it to png / jpg") from None
        if sizes[-1] != sizes[0]:
            raise DataError(f"{folder}: photos of different sizes ({photos[0].name} is {sizes[0][0]}x{sizes[0][1]}, "
                            f"{p.name} is {sizes[-1][0]}x{sizes[-1][1]}); resize them to one size first")
    return photos, skipped, sizes[0]


def upright_size(img) -> tuple[int, int]:
    """(width, height) of PIL image ``img`` once its EXIF orientation is applied (tags 5-8 turn
    it by 90 degrees)."""
    orientation = img.getexif().get(EXIF_ORIENTATION, 1)
    return (img.height, img.width) if orientation in (5, 6, 7, 8) else img.size


def copy_upright(src: Path, dst: Path) -> None:
    """Copy photo ``src`` to ``dst``: unchanged, or, when its EXIF orientation is not 1, turned
    upright (PIL's ``ImageOps.exif_transpose``, which also drops the tag) and saved again (JPEG
    at quality 95), since COLMAP and enerf's loaders read the pixels as stored."""
    from PIL import Image, ImageOps

    with Image.open(src) as img:
        if img.getexif().get(EXIF_ORIENTATION, 1) != 1:
            upright = ImageOps.exif_transpose(img)
            upright.save(dst, **({"quality": 95} if dst.suffix.lower() in (".jpg", ".jpeg") else {}))
            return
    shutil.copy2(src, dst)


@contextlib.contextmanager
def built_beside(out: Path, overwrite: bool):
    """Yield a temporary folder beside ``out``; renamed to ``out`` when the block succeeds, removed otherwise."""
    if out.exists() and not overwrite:
        raise DataError(f"{out}: already exists; choose another --out or pass --overwrite")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.colmap-", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / "scene")
            shutil.rmtree(old, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def check_out(out: Path, overwrite: bool, source: Path) -> None:
    """Raise DataError when ``out`` exists without ``overwrite``, or would replace ``source``."""
    if out.exists() and not overwrite:
        raise DataError(f"{out}: already exists; choose another --out or pass --overwrite")
    if out.exists() and out.resolve() in (source.resolve(), *source.resolve().parents):
        raise DataError(f"{source}: lies inside --out {out}, which --overwrite replaces as a whole; "
                        "move it out of it first")
