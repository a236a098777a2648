"""The ray sampler makes rays per batch from pixel indices over 8-bit images: every pixel once
per epoch, a state of a few kilobytes that resumes the same batches, rays and colours
bit-identical to precomputing every pixel's ray as enerf did before, checkpoints that do not
grow with the pixels."""

from __future__ import annotations

import json

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from enerf.checkpoint import load_checkpoint
from enerf.cli import main
from enerf.data.blender import load_blender
from enerf.data.llff import load_llff
from enerf.cameras.rays import Rays, flatten_rays, ndc_rays, ray_extent
from enerf.data.sampler import RaySampler
from helpers import training_rays
from enerf.synthetic.scene import make_synthetic_scene
from enerf.render import rays_aabb

TINY = ["--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "32", "--view_width", "16",
        "--multires", "4", "--multires_views", "2", "--N_samples", "8", "--N_rand", "64", "--no_lpips", "--quiet",
        "--device", "cpu", "--eval_every", "0"]


def _old_rays(scene, views) -> Rays:
    """Every training pixel's ray as enerf precomputed them before per-batch rays: the camera
    directions as one matmul per image ([H, W, 3] @ R^T), origins broadcast, NDC warp."""
    out = []
    for v in views:
        c2w = torch.tensor(scene.poses[v], dtype=torch.float32)
        j, i = torch.meshgrid(torch.arange(scene.height, dtype=torch.float32) + 0.5,
                              torch.arange(scene.width, dtype=torch.float32) + 0.5, indexing="ij")
        cam = torch.stack([(i - 0.5 * scene.width) / scene.focal, -(j - 0.5 * scene.height) / scene.focal,
                           -torch.ones_like(i)], dim=-1)
        d = cam @ c2w[:3, :3].T
        o = c2w[:3, 3].expand(d.shape)
        vd = d / d.norm(dim=-1, keepdim=True)
        near, far = scene.near, scene.far
        if scene.use_ndc:
            o, d = ndc_rays(scene.height, scene.width, scene.focal, 1.0, o, d)
            near, far = 0.0, 1.0
        shape = o.shape[:-1] + (1,)
        out.append(flatten_rays(Rays(o, d, vd, torch.full(shape, float(near)), torch.full(shape, float(far)))))
    return Rays(*(torch.cat([getattr(r, f) for r in out]) for f in Rays._fields))


def _numpy_directions(scene, view, y, x) -> np.ndarray:
    """The camera directions of pixels (y, x) computed in numpy float32, left to right: x_c r + y_c u - b."""
    rot = scene.poses[view][:3, :3].astype(np.float32)
    cx = ((x.astype(np.float32) + np.float32(0.5)) - np.float32(0.5 * scene.width)) / np.float32(scene.focal)
    cy = -((y.astype(np.float32) + np.float32(0.5)) - np.float32(0.5 * scene.height)) / np.float32(scene.focal)
    return cx[:, None] * rot[:, 0] + cy[:, None] * rot[:, 1] + np.float32(-1.0) * rot[:, 2]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_synthetic_scene(tmp_path_factory.mktemp("s") / "tiny", n_views=6, width=40, height=30, seed=2)


@pytest.fixture(scope="module")
def blender_dir(tmp_path_factory):
    """A Blender scene of 3 train + 2 test RGBA frames of 16 x 12 with partial alpha, made in code."""
    root = tmp_path_factory.mktemp("b") / "s"
    rng = np.random.default_rng(5)
    for split, n in (("train", 3), ("test", 2)):
        (root / split).mkdir(parents=True)
        frames = []
        for k in range(n):
            iio.imwrite(root / split / f"r_{k}.png", rng.integers(0, 256, (12, 16, 4), dtype=np.uint8))
            angle = 2 * np.pi * (k + 0.3 * (split == "test")) / n
            c2w = np.eye(4)
            c2w[:3, :3] = [[np.cos(angle), 0, np.sin(angle)], [0, 1, 0], [-np.sin(angle), 0, np.cos(angle)]]
            c2w[:3, 3] = 4 * c2w[:3, 2]
            frames.append({"file_path": f"./{split}/r_{k}", "transform_matrix": c2w.tolist()})
        (root / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": 0.69, "frames": frames}))
    return root


def _scenes(tiny_dir, blender_dir):
    return {"ndc": load_llff(tiny_dir, factor=1), "no_ndc": load_llff(tiny_dir, factor=1, use_ndc=False),
            "half": load_llff(tiny_dir, factor=2), "blender": load_blender(blender_dir, white_bkgd=True),
            "blender_black": load_blender(blender_dir, white_bkgd=False)}


def test_images_stay_codes_and_decode_as_the_loaders_did(tiny_dir, blender_dir):
    scenes = _scenes(tiny_dir, blender_dir)
    llff = scenes["ndc"].images
    assert llff.data.dtype == np.uint8 and llff.nbytes == 6 * 30 * 40 * 3  # 3 bytes a pixel, not 12
    files = sorted((tiny_dir / "images").glob("*.png"))
    want = np.stack([iio.imread(f) for f in files]).astype(np.float32) / np.float32(255)
    np.testing.assert_array_equal(llff[:], want)
    assert llff[2].dtype == np.float32 and llff.shape == want.shape
    assert scenes["half"].images.data.dtype == np.float32  # block averages are not codes: kept as values
    for name, bg in (("blender", 1.0), ("blender_black", 0.0)):
        images = scenes[name].images
        assert images.data.dtype == np.uint8 and images.data.shape == (5, 12, 16, 4)
        rgba = np.stack([iio.imread(blender_dir / s / f"r_{k}.png") for s, n in (("train", 3), ("test", 2))
                         for k in range(n)]).astype(np.float32) / np.float32(255)
        np.testing.assert_array_equal(images[:], rgba[..., :3] * rgba[..., 3:] + np.float32(bg) * (1 - rgba[..., 3:]))
        view, y, x = (torch.tensor(a) for a in ([0, 4, 2, 4], [0, 11, 5, 3], [15, 0, 7, 3]))
        np.testing.assert_array_equal(images.pixels(view, y, x).numpy(), images[:][view, y, x])


def test_an_epoch_draws_every_pixel_once_in_the_order_of_a_seeded_permutation(tiny_dir):
    scene = load_llff(tiny_dir, factor=1)
    sampler = RaySampler(scene, scene.i_train, 300, torch.Generator().manual_seed(7))
    n = len(scene.i_train) * 30 * 40
    assert len(sampler) == n and n % 300 == 0
    drawn = torch.cat([sampler.draw() for _ in range(n // 300)]).numpy()
    np.testing.assert_array_equal(np.sort(drawn), np.arange(n))  # each pixel once
    # the same draws as before (one torch.randperm of all pixels per epoch from the run's generator)
    np.testing.assert_array_equal(drawn, torch.randperm(n, generator=torch.Generator().manual_seed(7)).numpy())
    view, y, x = (t.numpy() for t in sampler.pixels(torch.from_numpy(drawn)))
    want = np.unravel_index(drawn, (len(scene.i_train), 30, 40))
    for got, ref in zip((view, y, x), want):
        np.testing.assert_array_equal(got, ref)
    _, rgb = sampler.batch(torch.from_numpy(drawn[:500]))
    np.testing.assert_array_equal(rgb.numpy(), scene.images[:][scene.i_train[view[:500]], y[:500], x[:500]])
    second = torch.cat([sampler.draw() for _ in range(n // 300)]).numpy()
    np.testing.assert_array_equal(np.sort(second), np.arange(n))
    assert not np.array_equal(second, drawn)


def test_center_draws_stay_in_the_central_box(tiny_dir):
    scene = load_llff(tiny_dir, factor=1)
    gen = torch.Generator().manual_seed(3)
    sampler = RaySampler(scene, scene.i_train, 4000, gen, precrop_frac=0.5)
    idx = sampler.draw(center_only=True)
    # the same draws as before: uniform picks into the nonzero() list of the boxes' mask
    mask = torch.zeros(30, 40, dtype=torch.bool)
    mask[15 - 7 : 15 + 7, 20 - 10 : 20 + 10] = True
    index = mask.reshape(-1).repeat(len(scene.i_train)).nonzero().squeeze(-1)
    want = index[torch.randint(index.numel(), (4000,), generator=torch.Generator().manual_seed(3))]
    assert torch.equal(idx, want)


def test_state_round_trip_resumes_the_same_batches(tiny_dir):
    scene = load_llff(tiny_dir, factor=1)
    gen = torch.Generator().manual_seed(11)
    a = RaySampler(scene, scene.i_train, 1000, gen)
    per_epoch = len(a) // 1000  # batches in an epoch (the rest of the permutation is not drawn)
    for k in range(per_epoch + 3):  # two center batches, then one epoch and one batch of the next
        a.sample(center_only=k < 2)
    state, gen_state = a.state_dict(), gen.get_state()
    assert (state["epoch"], state["pos"]) == (2, 1000)
    tensors = [v for v in state.values() if torch.is_tensor(v)]
    assert sum(t.numel() * t.element_size() for t in tensors) < 8192  # the generator state, not the pixels
    state = torch.load(_saved(state), weights_only=False)  # as a checkpoint holds it
    b = RaySampler(scene, scene.i_train, 1000, torch.Generator().set_state(gen_state))
    b.load_state_dict(state)
    for k in range(10):  # crosses two epoch boundaries
        (ra, ca), (rb, cb) = a.sample(center_only=k == 3), b.sample(center_only=k == 3)
        assert torch.equal(ca, cb) and all(torch.equal(u, v) for u, v in zip(ra, rb))


def _saved(obj):
    import io

    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return buf


def test_batch_rays_equal_the_old_precomputed_rays(tmp_path, tiny_dir, blender_dir):
    scenes = _scenes(tiny_dir, blender_dir)
    # configs/demo.txt's cameras (24 views, seed 0), at half the size it trains on (63 x 47)
    scenes["demo"] = load_llff(make_synthetic_scene(tmp_path / "demo", n_views=24, width=63, height=47), factor=1)
    for name, scene in scenes.items():
        old = _old_rays(scene, scene.i_train)
        sampler = RaySampler(scene, scene.i_train, 997, torch.Generator().manual_seed(0))
        idx = torch.randperm(len(sampler), generator=torch.Generator().manual_seed(1))[:3000]
        rays, rgb = sampler.batch(idx)
        for field in Rays._fields:  # bit-equal here; on the GPU machines' CPUs NDC origins differed in the last bit
            torch.testing.assert_close(getattr(rays, field), getattr(old, field)[idx], rtol=0, atol=1e-6, msg=f"{name}: {field}")
        whole, whole_rgb = training_rays(scene, scene.i_train, torch.device("cpu"))  # make_rays, as the renderer
        for field in Rays._fields:
            torch.testing.assert_close(getattr(whole, field), getattr(old, field), rtol=0, atol=1e-6, msg=f"{name}: {field}")
        assert torch.equal(rgb, whole_rgb[idx]), name
        if not scene.use_ndc:  # world directions against an independent numpy computation
            view, y, x = (t.numpy() for t in sampler.pixels(idx))
            for v in np.unique(view):
                pick = view == v
                want = _numpy_directions(scene, scene.i_train[v], y[pick], x[pick])
                np.testing.assert_array_equal(rays.directions[torch.from_numpy(pick)].numpy(), want)
        # the occupancy grid's figures, made in chunks, as over all rays at once
        extent = sampler.extent(chunk=1000)
        box = rays_aabb(old.origins, old.directions, old.near, old.far)
        close = dict(rtol=0, atol=1e-6, msg=name)
        torch.testing.assert_close(torch.cat([extent.lo, extent.hi]), box, **close)
        assert extent.mean_direction_norm == pytest.approx(float(old.directions.norm(dim=-1).mean()), abs=1e-6), name
        at_once = ray_extent([old], old.origins.shape[0])
        torch.testing.assert_close(at_once.lo, extent.lo, **close)
        torch.testing.assert_close(at_once.hi, extent.hi, **close)
        assert at_once.mean_direction_norm == pytest.approx(extent.mean_direction_norm, abs=1e-6), name


def test_checkpoint_does_not_grow_with_the_pixels(tmp_path):
    sizes = {}
    for w, h in ((24, 18), (96, 72)):  # 16 x the pixels
        scene = make_synthetic_scene(tmp_path / f"s{w}", n_views=5, width=w, height=h, seed=2)
        assert main(["train", "--datadir", str(scene), "--basedir", str(tmp_path), "--expname", f"r{w}",
                     "--iters", "2", *TINY, "--llffhold", "5"]) == 0
        ckpt = tmp_path / f"r{w}" / "checkpoints" / "latest.pt"
        payload, _ = load_checkpoint(ckpt)
        state = payload["extra"]["sampler"]
        assert state["n_pixels"] == 4 * w * h and "order" not in state  # view 0 held out
        sizes[w] = ckpt.stat().st_size
    # the 96 x 72 scene's permutation alone (int64, 4 views) would add 221 kB
    assert abs(sizes[96] - sizes[24]) < 2048, sizes


def test_a_checkpoint_holding_the_old_permutation_still_resumes(tiny_dir):
    scene = load_llff(tiny_dir, factor=1)
    order = torch.randperm(5 * 1200, generator=torch.Generator().manual_seed(4))
    sampler = RaySampler(scene, scene.i_train, 100, torch.Generator().manual_seed(0))
    sampler.load_state_dict({"order": order, "pos": 700})  # the format written before per-batch rays
    assert torch.equal(sampler.draw(), order[700:800]) and torch.equal(sampler.draw(), order[800:900])
