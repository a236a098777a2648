"""``.spz`` (Niantic) and ``.splat`` (antimatter15) as enerf writes them, read back by independent
readers written here with gzip / struct / numpy from the formats' specifications (not enerf's
readers); enerf's own readers against the values written; the SPZ's splats rendered against the
PLY's; ``enerf.splats.files``' dispatch by extension, its refusals and the finite filter."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
import torch

from enerf.errors import ConfigError, DataError
from enerf.splats import SH_C0, Splats
from enerf.splats.files import finite_splats, read_splat_file, write_splat_file
from enerf.splats.gaussians import quat_to_rotmat
from enerf.cameras.pinhole import Pinhole
from enerf.splats.rasterize import rasterize
from splat_readers import read_spz_file


def _splats(n: int, degree: int, seed: int = 0, spread: float = 1.0) -> Splats:
    g = torch.Generator().manual_seed(seed)
    k = (degree + 1) ** 2
    return Splats(torch.randn(n, 3, generator=g) * spread, torch.randn(n, 3, generator=g) * 0.5 - 3.0,
                  torch.randn(n, 4, generator=g), torch.randn(n, generator=g), torch.randn(n, k, 3, generator=g) * 0.3)


def _same_axes(quats_a: np.ndarray, quats_b: np.ndarray, atol: float) -> None:
    """The Gaussians' axes (rotation matrix columns) agree up to each column's sign."""
    ra, rb = quat_to_rotmat(torch.as_tensor(quats_a)), quat_to_rotmat(torch.as_tensor(quats_b))
    dots = torch.abs((ra * rb).sum(1)).numpy()  # [N, 3]: |column_a . column_b|
    np.testing.assert_allclose(dots, 1.0, atol=atol)


@pytest.mark.parametrize("degree", [0, 1, 3])
def test_spz_read_by_an_independent_reader(tmp_path, degree):
    splats = _splats(50, degree, seed=degree, spread=3.0)
    path = tmp_path / "s.spz"
    size = write_splat_file(path, splats, "world")
    assert size == path.stat().st_size and path.read_bytes()[:2] == b"\x1f\x8b"
    f = read_spz_file(path.read_bytes())
    assert (f["magic"], f["version"], f["n"], f["degree"], f["flags"]) == (0x5053474E, 3, 50, degree, 0)
    # fractional bits: the fewest whose step is at most 1/8 of the 25th percentile of the largest std-devs
    means = splats.means.double().numpy()
    size = np.percentile(np.exp(splats.log_scales.double().numpy()).max(1), 25)
    assert f["bits"] == int(np.ceil(np.log2(8 / size))) and 0.5 / 2 ** f["bits"] <= size / 16
    np.testing.assert_allclose(f["means"], means, atol=0.5 / 2 ** f["bits"] + 1e-6)
    np.testing.assert_allclose(f["alpha"], torch.sigmoid(splats.opacity_logits).numpy(), atol=0.5 / 255 + 1e-6)
    dc = splats.sh[:, 0].numpy().clip((0 - 127.5) / 38.25, (255 - 127.5) / 38.25)
    np.testing.assert_allclose(f["dc"], dc, atol=0.5 / 38.25 + 1e-6)
    np.testing.assert_allclose(f["log_scales"], splats.log_scales.numpy(), atol=1 / 32 + 1e-6)
    _same_axes(f["quats_wxyz"], splats.quats.double().numpy(), atol=5e-3)
    buckets = np.array([4.0 if i < 3 else 16.0 for i in range((degree + 1) ** 2 - 1)])[:, None]
    rest = splats.sh[:, 1:].double().numpy().clip(-1.0, 127 / 128)
    assert np.all(np.abs(f["sh"] - rest) <= buckets / 256 + 1 / 256 + 1e-6)

    back, frame = read_splat_file(path)  # enerf's reader: the written values within the same steps
    assert frame is None and back.degree == degree and len(back) == 50
    np.testing.assert_allclose(back.means.numpy(), f["means"], atol=1e-5)
    np.testing.assert_allclose(back.sh[:, 1:].numpy(), f["sh"], atol=1e-5)
    np.testing.assert_allclose(back.log_scales.numpy(), f["log_scales"], atol=1e-5)
    _same_axes(back.quats.double().numpy(), f["quats_wxyz"], atol=1e-5)


def test_splat_read_by_an_independent_reader(tmp_path):
    splats = _splats(40, 2, seed=7)
    path = tmp_path / "s.splat"
    assert write_splat_file(path, splats, "world") == 40 * 32 == path.stat().st_size
    rows = np.frombuffer(path.read_bytes(), np.dtype([("p", "<f4", 3), ("s", "<f4", 3), ("c", "u1", 4), ("r", "u1", 4)]))
    opacity = torch.sigmoid(splats.opacity_logits).numpy()
    key = np.exp(splats.log_scales.double().numpy().sum(1)) * opacity
    order = np.argsort(-key)
    np.testing.assert_array_equal(rows["p"], splats.means.numpy()[order])
    np.testing.assert_allclose(rows["s"], np.exp(splats.log_scales.numpy()[order]), rtol=1e-6)
    rgb = np.clip(0.5 + SH_C0 * splats.sh[:, 0].numpy(), 0, 1)[order]
    np.testing.assert_allclose(rows["c"][:, :3] / 255.0, rgb, atol=0.5 / 255 + 1e-6)
    np.testing.assert_allclose(rows["c"][:, 3] / 255.0, opacity[order], atol=0.5 / 255 + 1e-6)
    _same_axes((rows["r"] - 128.0) / 128.0, splats.quats.double().numpy()[order], atol=2e-2)

    back, frame = read_splat_file(path)
    assert frame is None and back.degree == 0
    np.testing.assert_array_equal(back.means.numpy(), rows["p"])
    np.testing.assert_allclose(back.log_scales.numpy(), np.log(rows["s"]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("suffix", [".spz", ".splat"])
def test_rendered_like_the_ply(tmp_path, suffix):
    """A synthetic scene of 400 splats in front of a camera: the quantised file renders as the PLY."""
    g = torch.Generator().manual_seed(3)
    n = 400
    means = torch.rand(n, 3, generator=g) * torch.tensor([2.0, 2.0, 1.0]) - torch.tensor([1.0, 1.0, 4.0])
    splats = Splats(means, torch.rand(n, 3, generator=g) * 1.0 - 3.5, torch.randn(n, 4, generator=g),
                    torch.randn(n, generator=g) + 1.0, torch.randn(n, 4, 3, generator=g) * 0.3)
    if suffix == ".splat":
        splats = Splats(splats.means, splats.log_scales, splats.quats, splats.opacity_logits, splats.sh[:, :1])
    write_splat_file(tmp_path / "s.ply", splats, "world")
    write_splat_file(tmp_path / f"s{suffix}", splats, "world")
    camera = Pinhole(torch.eye(4)[:3], 96, 96, 100.0)  # at the origin, looking down -z
    images = [rasterize(read_splat_file(tmp_path / name)[0], camera, backend="torch")["rgb"]
              for name in ("s.ply", f"s{suffix}")]
    mse = float(((images[0] - images[1]) ** 2).mean())
    assert float(images[0].std()) > 0.05  # something is drawn
    assert 10 * np.log10(1.0 / mse) > 40.0


def test_bad_files_and_extensions(tmp_path):
    splats = _splats(10, 1)
    good = tmp_path / "s.spz"
    write_splat_file(good, splats, "world")
    raw = good.read_bytes()
    cases = {"t.spz": raw[: len(raw) // 2], "g.spz": b"not gzip at all", "v4.spz": struct.pack("<I", 0x5053474E) + b"x" * 20,
             "short.spz": gzip.compress(gzip.decompress(raw)[:-5]), "magic.spz": gzip.compress(b"\0" * 64),
             "odd.splat": b"\0" * 33}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DataError, match=name):
            read_splat_file(tmp_path / name)
    (tmp_path / "s.xyz").write_bytes(b"")
    with pytest.raises(DataError, match=r"extension '\.xyz'"):
        read_splat_file(tmp_path / "s.xyz")
    with pytest.raises(DataError, match="not found"):
        read_splat_file(tmp_path / "missing.spz")
    with pytest.raises(ConfigError, match="cannot record its frame"):
        write_splat_file(tmp_path / "scene.spz", splats, "scene")
    assert not (tmp_path / "scene.spz").exists()
    with pytest.raises(DataError, match="24-bit"):
        write_splat_file(tmp_path / "far.spz", _splats(3, 0, spread=1e7), "world")
    assert not (tmp_path / "far.spz").exists()


def test_finite_splats():
    splats = _splats(6, 1)
    splats.means[1, 0] = float("nan")
    splats.sh[4, 2, 1] = float("inf")
    kept, dropped = finite_splats(splats)
    assert dropped == 2 and len(kept) == 4
    np.testing.assert_array_equal(kept.means.numpy(), splats.means.numpy()[[0, 2, 3, 5]])


def test_the_cli_suffixes_are_the_registry():
    from enerf.config.export import SPLAT_SUFFIXES
    from enerf.splats.files import FORMATS

    assert SPLAT_SUFFIXES == tuple(FORMATS)


@pytest.mark.parametrize("suffix", [".ply", ".spz"])
def test_the_mip_filter_flag_travels_in_the_file(tmp_path, suffix):
    """Antialiased splats say so in the file (SPZ's flags bit 1, read by the spec's reader; a PLY header comment)
    and read back antialiased; plain ones read back plain."""
    for antialiased in (False, True):
        splats = _splats(20, 1)
        splats.antialiased = antialiased
        path = tmp_path / f"s{int(antialiased)}{suffix}"
        write_splat_file(path, splats, "world")
        if suffix == ".spz":
            assert read_spz_file(path.read_bytes())["flags"] == int(antialiased)
        else:
            assert (b"comment enerf antialiased\n" in path.read_bytes()[:300]) == antialiased
        assert read_splat_file(path)[0].antialiased == antialiased
        assert read_splat_file(path)[0].select(torch.arange(3)).antialiased == antialiased
