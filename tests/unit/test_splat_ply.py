"""``enerf.splats.ply`` (the 3DGS PLY layout) read back by an independent reader (plyfile), and
``enerf.splats.frames`` (splats moved by a similarity) against numpy: means, covariances and the
colour seen along every direction."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numpy.lib.recfunctions import repack_fields
from scipy.spatial.transform import Rotation

from enerf.data.scene import Scene
from enerf.errors import DataError
from enerf.splats import Splats, sh_to_rgb
from enerf.splats.frames import rotmat_to_quat, sh_rotation, splats_into_scene, splats_to_frame
from enerf.splats.gaussians import quat_to_rotmat
from enerf.splats.ply import read_splats, write_splats

plyfile = pytest.importorskip("plyfile")


def _splats(n: int, degree: int, seed: int = 0) -> Splats:
    g = torch.Generator().manual_seed(seed)
    k = (degree + 1) ** 2
    return Splats(torch.randn(n, 3, generator=g), torch.randn(n, 3, generator=g) * 0.5 - 2.0,
                  torch.randn(n, 4, generator=g), torch.randn(n, generator=g), torch.randn(n, k, 3, generator=g) * 0.4)


def _reference_names(degree: int) -> list[str]:
    """The property list of graphdeco-inria's ``construct_list_of_attributes`` for ``degree``."""
    rest = 3 * ((degree + 1) ** 2 - 1)
    names = ["x", "y", "z", "nx", "ny", "nz"] + [f"f_dc_{i}" for i in range(3)]
    names += [f"f_rest_{i}" for i in range(rest)] + ["opacity"] + [f"scale_{i}" for i in range(3)]
    return names + [f"rot_{i}" for i in range(4)]


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_layout_read_by_plyfile_is_the_reference_layout(tmp_path, degree):
    splats = _splats(7, degree, seed=degree)
    path = tmp_path / "s.ply"
    size = write_splats(path, splats, "world")
    assert size == path.stat().st_size
    ply = plyfile.PlyData.read(str(path))
    assert ply.byte_order == "<" and not ply.text
    assert [e.name for e in ply.elements] == ["vertex"] and ply["vertex"].count == 7
    assert ply.comments == ["enerf frame world"]
    props = ply["vertex"].properties
    assert [p.name for p in props] == _reference_names(degree)
    assert all(p.val_dtype == "f4" for p in props)
    v = ply["vertex"].data
    k = (degree + 1) ** 2
    np.testing.assert_array_equal(np.stack([v["x"], v["y"], v["z"]], 1), splats.means.numpy())
    assert all(np.all(v[c] == 0) for c in ("nx", "ny", "nz"))
    np.testing.assert_array_equal(np.stack([v[f"f_dc_{c}"] for c in range(3)], 1), splats.sh[:, 0].numpy())
    for i in range(3 * (k - 1)):  # channel-major: f_rest_i is channel i // (K-1), coefficient 1 + i % (K-1)
        np.testing.assert_array_equal(v[f"f_rest_{i}"], splats.sh[:, 1 + i % (k - 1), i // (k - 1)].numpy())
    np.testing.assert_array_equal(v["opacity"], splats.opacity_logits.numpy())
    np.testing.assert_array_equal(np.stack([v[f"scale_{i}"] for i in range(3)], 1), splats.log_scales.numpy())
    np.testing.assert_array_equal(np.stack([v[f"rot_{i}"] for i in range(4)], 1), splats.quats.numpy())

    # byte for byte what the reference's writer (plyfile, PlyData([el]).write) makes of the same table
    ref = tmp_path / "ref.ply"
    plyfile.PlyData([plyfile.PlyElement.describe(v, "vertex")], byte_order="<",
                    comments=["enerf frame world"]).write(str(ref))
    assert path.read_bytes() == ref.read_bytes()

    back, frame = read_splats(path)
    assert frame == "world" and back.degree == degree
    for name, value in splats.tensors().items():
        torch.testing.assert_close(back.tensors()[name], value, rtol=0, atol=0)


def test_reads_another_tools_file_in_any_order_type_and_byte_order(tmp_path):
    """Extra properties ignored, properties in another order, doubles, big-endian and ASCII, no frame comment."""
    splats = _splats(5, 2, seed=3)
    written = tmp_path / "ours.ply"
    write_splats(written, splats, "scene")
    v = plyfile.PlyData.read(str(written))["vertex"].data
    names = list(v.dtype.names)[::-1]
    table = np.empty(len(v), [("red", "u1")] + [(n, "f8") for n in names])
    table["red"] = 200
    for n in names:
        table[n] = v[n]
    for kwargs in ({"byte_order": ">"}, {"text": True}, {"byte_order": "<"}):
        other = tmp_path / "other.ply"
        plyfile.PlyData([plyfile.PlyElement.describe(table, "vertex")], **kwargs).write(str(other))
        back, frame = read_splats(other)
        assert frame is None and back.degree == 2
        for name, value in splats.tensors().items():
            torch.testing.assert_close(back.tensors()[name], value, rtol=1e-6, atol=1e-6)


def _one_line_error(path) -> str:
    with pytest.raises(DataError) as info:
        read_splats(path)
    text = str(info.value)
    assert len(text.splitlines()) == 1 and str(path) in text
    return text


def test_bad_files_are_one_line_naming_the_file_and_what_is_missing(tmp_path):
    assert "not found" in _one_line_error(tmp_path / "absent.ply")
    junk = tmp_path / "junk.ply"
    junk.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    assert "not a PLY" in _one_line_error(junk)
    mesh = tmp_path / "mesh.ply"  # a point cloud / mesh: vertices with colours, no Gaussian parameters
    verts = np.zeros(3, [("x", "f4"), ("y", "f4"), ("z", "f4"), ("red", "u1")])
    faces = np.zeros(1, [("vertex_indices", "i4", (3,))])
    plyfile.PlyData([plyfile.PlyElement.describe(verts, "vertex"), plyfile.PlyElement.describe(faces, "face")]).write(str(mesh))
    text = _one_line_error(mesh)
    assert "not a 3DGS splat PLY" in text and "f_dc_0" in text and "rot_3" in text and " x " not in text
    v = plyfile.PlyData.read(str(_write(tmp_path / "d1.ply", _splats(4, 1))))["vertex"].data
    odd = tmp_path / "odd.ply"  # 5 f_rest: no SH degree
    keep = [n for n in v.dtype.names if not n.startswith("f_rest_") or int(n[7:]) < 5]
    plyfile.PlyData([plyfile.PlyElement.describe(repack_fields(v[keep]), "vertex")]).write(str(odd))
    assert "5 f_rest properties" in _one_line_error(odd)
    cut = tmp_path / "cut.ply"
    cut.write_bytes((tmp_path / "d1.ply").read_bytes()[:-10])
    assert "truncated" in _one_line_error(cut)


def _write(path, splats):
    write_splats(path, splats, "world")
    return path


def _similarity(seed: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    rot = Rotation.random(random_state=seed).as_matrix()
    matrix = np.eye(4)
    matrix[:3, :3] = scale * rot
    matrix[:3, 3] = [0.3, -1.2, 2.0]
    return matrix, rot


def _covariances(splats: Splats) -> np.ndarray:
    rot = quat_to_rotmat(splats.quats.double()).numpy()
    var = np.exp(2 * splats.log_scales.double().numpy())
    return np.einsum("nij,nj,nkj->nik", rot, var, rot)


@pytest.mark.parametrize("degree,scale", [(0, 2.5), (1, 0.4), (2, 3.0), (3, 1.7), (3, -0.8)])
def test_splats_to_frame_moves_means_covariances_and_view_dependent_colour(degree, scale):
    splats = _splats(64, degree, seed=10 + degree)
    matrix, rot = _similarity(degree, scale)
    moved = splats_to_frame(splats, matrix)
    linear = matrix[:3, :3]
    np.testing.assert_allclose(moved.means.numpy(), splats.means.double().numpy() @ linear.T + matrix[:3, 3], atol=1e-5)
    np.testing.assert_allclose(_covariances(moved), linear @ _covariances(splats) @ linear.T, atol=1e-5)
    torch.testing.assert_close(moved.opacity_logits, splats.opacity_logits)
    # the colour seen along world direction d is the scene-frame colour along (s R)^-1 d, normalised
    g = torch.Generator().manual_seed(degree)
    d = torch.nn.functional.normalize(torch.randn(64, 3, generator=g, dtype=torch.float64), dim=-1)
    back = d @ torch.as_tensor(np.linalg.inv(linear)).T
    back = back / back.norm(dim=-1, keepdim=True)
    after = sh_to_rgb(moved.sh.double(), d)
    before = sh_to_rgb(splats.sh.double(), back)
    assert (after - before).abs().max().item() < 1e-5
    # and back again with the inverse
    again = splats_to_frame(moved, np.linalg.inv(matrix))
    for name in ("means", "log_scales", "sh", "opacity_logits"):
        torch.testing.assert_close(again.tensors()[name], splats.tensors()[name], rtol=0, atol=2e-5)
    np.testing.assert_allclose(np.abs(np.sum(torch.nn.functional.normalize(again.quats, dim=-1).numpy()
                                             * torch.nn.functional.normalize(splats.quats, dim=-1).numpy(), -1)), 1.0,
                               atol=1e-5)


def test_band_rotation_is_orthogonal_and_the_quaternion_is_scipys():
    rot = Rotation.random(random_state=7)
    mix = sh_rotation(rot.as_matrix(), 3).numpy()
    np.testing.assert_allclose(mix @ mix.T, np.eye(16), atol=1e-10)
    x, y, z, w = rot.as_quat()
    q = rotmat_to_quat(rot.as_matrix())
    np.testing.assert_allclose(q, np.sign(w) * np.array([w, x, y, z]), atol=1e-12)
    for angle in (np.pi, np.pi - 1e-9):  # half turns: w near 0
        r = Rotation.from_rotvec(angle * np.array([0.0, 0.6, 0.8]))
        np.testing.assert_allclose(quat_to_rotmat(torch.tensor(rotmat_to_quat(r.as_matrix()))[None])[0].numpy(),
                                   r.as_matrix(), atol=1e-9)
    with pytest.raises(ValueError, match="not a similarity"):
        splats_to_frame(_splats(2, 0), np.diag([1.0, 2.0, 1.0, 1.0]))


def _scene(matrix: np.ndarray) -> Scene:
    poses = np.tile(np.eye(4)[:3], (2, 1, 1)).astype(np.float32)
    return Scene("s", np.zeros((2, 4, 4, 3), np.float32), poses, 4, 4, 4.0, np.ones((2, 2), np.float32), 0.1, 5.0,
                 False, np.arange(1), np.arange(1, 2), poses, matrix)


def test_a_file_comes_into_the_scene_from_the_frame_it_declares():
    matrix, _ = _similarity(3, 2.0)
    scene = _scene(matrix)
    splats = _splats(5, 1)
    world = splats_to_frame(splats, matrix)
    for frame, given in (("world", world), (None, world), ("scene", splats)):
        torch.testing.assert_close(splats_into_scene(given, scene, frame).means, splats.means, rtol=0, atol=1e-5)
    with pytest.raises(DataError, match="declares frame 'camera'"):
        splats_into_scene(splats, scene, "camera", "f.ply")
