"""enerf's .spz, .ply and .splat read by the ecosystem's own tool, PlayCanvas' ``splat-transform``
(Niantic's SPZ code compiled to WebAssembly inside): each converted to a PLY by it and read back
with plyfile holds enerf's splats within the format's steps (the same axes: SPZ's RUB flipped
back), and an SPZ it writes (version 3) reads in enerf as the PLY it came from.

The tool is looked for at $ENERF_SPLAT_TRANSFORM, then in the gitignored ``.npm/`` folder that
``.ci/run`` installs it into (``npm install --prefix .npm @playcanvas/splat-transform``), then on
PATH; without it (or without node) the test skips, saying so."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from enerf.splats import Splats
from enerf.splats.files import read_splat_file, write_splat_file

plyfile = pytest.importorskip("plyfile")
ROOT = Path(__file__).resolve().parents[2]


def _tool() -> str | None:
    for candidate in (os.environ.get("ENERF_SPLAT_TRANSFORM"), ROOT / ".npm" / "node_modules" / ".bin" / "splat-transform",
                      shutil.which("splat-transform")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    return None


TOOL = _tool()
pytestmark = pytest.mark.skipif(TOOL is None or shutil.which("node") is None,
                                reason="splat-transform not found (npm install --prefix .npm @playcanvas/splat-transform, "
                                       "or set ENERF_SPLAT_TRANSFORM) or node missing")


def _convert(src: Path, dst: Path, *flags: str) -> None:
    done = subprocess.run([TOOL, "-q", "-w", str(src), *flags, str(dst)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and dst.is_file(), done.stderr[-2000:]


def _columns(path: Path, *names: str) -> np.ndarray:
    v = plyfile.PlyData.read(str(path))["vertex"].data
    return np.stack([np.asarray(v[n], np.float64) for n in names], 1)


def test_splat_transform_reads_what_enerf_writes(tmp_path):
    g = torch.Generator().manual_seed(2)
    n = 300
    splats = Splats(torch.randn(n, 3, generator=g) * 3, torch.randn(n, 3, generator=g) * 0.5 - 3,
                    torch.randn(n, 4, generator=g), torch.randn(n, generator=g), torch.randn(n, 4, 3, generator=g) * 0.3)
    for suffix in (".ply", ".spz", ".splat"):
        write_splat_file(tmp_path / f"e{suffix}", splats, "world")
        _convert(tmp_path / f"e{suffix}", tmp_path / f"from{suffix}.ply")
    ply = _columns(tmp_path / "from.ply.ply", "x", "y", "z")
    np.testing.assert_allclose(ply, splats.means.numpy(), atol=1e-6)
    spz = _columns(tmp_path / "from.spz.ply", "x", "y", "z", "f_dc_0", "f_rest_0", "f_rest_3", "scale_0")
    np.testing.assert_allclose(spz[:, :3], splats.means.numpy(), atol=0.5 / 4096 + 1e-6)  # y and z not flipped
    np.testing.assert_allclose(spz[:, 3], splats.sh[:, 0, 0].numpy(), atol=0.5 / 38.25 + 1e-4)
    np.testing.assert_allclose(spz[:, 4:6], splats.sh[:, 1, :2].numpy().clip(-1, 1), atol=4.5 / 128)  # f_rest_0, f_rest_3: red's, green's first
    np.testing.assert_allclose(spz[:, 6], splats.log_scales[:, 0].numpy(), atol=1 / 32 + 1e-4)
    dotsplat = _columns(tmp_path / "from.splat.ply", "x", "y", "z")
    assert sorted(map(tuple, dotsplat)) == sorted(map(tuple, splats.means.numpy().astype(np.float64)))

    _convert(tmp_path / "e.ply", tmp_path / "theirs.spz", "--spz-version", "3")
    theirs, frame = read_splat_file(tmp_path / "theirs.spz")
    assert frame is None and len(theirs) == n and theirs.degree == 1
    np.testing.assert_allclose(theirs.means.numpy(), splats.means.numpy(), atol=0.5 / 4096 + 1e-6)
    np.testing.assert_allclose(theirs.sh[:, 1:].numpy(), splats.sh[:, 1:].numpy().clip(-1, 1), atol=4.5 / 128)
