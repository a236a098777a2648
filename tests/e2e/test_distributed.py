"""Data-parallel training (enerf.distributed): 2 processes on gloo equal 1 process with the same
global batch; a 2-process checkpoint resumes on 1 process; a dead rank stops the other."""

from __future__ import annotations

import io
import os
import pickle
import socket
import sys
import time
from contextlib import redirect_stderr
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from enerf.checkpoint import load_checkpoint
from enerf.config import DataConfig, FieldConfig, RenderConfig, RunConfig, TrainConfig
from enerf.synthetic.scene import make_synthetic_scene
from enerf.distributed import process_group, shard_bounds
from enerf.train.nerf import prepare_run, train_nerf

STEPS = 6
WORLD = 2


def _config(scene: Path, basedir: Path, mode: str) -> RunConfig:
    """A tiny run; ``perturb`` off so one process and two draw the same samples. ``none`` renders
    hierarchically; ``row`` and ``row+bnp`` march an occupancy grid updated every 2 steps (past
    its warm-up: random cells), with a dynamic ray batch and occlusion culling."""
    conditioning, _, precond = mode.partition("+")
    grid = conditioning != "none"
    return RunConfig(
        expname=mode, basedir=str(basedir), data=DataConfig(datadir=str(scene), factor=1, llffhold=4),
        field=FieldConfig(netdepth=2, netwidth=32, view_width=16, multires=4, multires_views=2, skips=(),
                          conditioning=conditioning),
        render=RenderConfig(n_samples=8, n_importance=0 if grid else 4, perturb=False, chunk=1024,
                            sampler="torch_grid" if grid else "hierarchical", render_step_size=1 / 32,
                            grid_resolution=16, grid_update_every=2, grid_warmup=2, cull_occluded=grid),
        train=TrainConfig(iters=STEPS, n_rand=64, lrate=5e-4, log_every=STEPS, kappa_every=0, compute_lpips=False,
                          precond=precond or "none", dist_timeout=300.0, device="cpu"),
    )


def _state(run) -> dict:
    """Weights of every field and the occupancy grid (if any), as CPU tensors."""
    state = {f"{name}.{k}": v.detach().clone() for name, f in run.fields.items() for k, v in f.state_dict().items()}
    grid = getattr(run.renderer.estimator, "grid", None)
    if grid is not None:
        state.update({"grid.occs": grid.occs.clone(), "grid.binaries": grid.binaries.clone()})
    state["n_rays"] = torch.tensor(run.rays_per_step.n_rays)
    return state


def _steps(cfg: RunConfig) -> dict:
    run = prepare_run(cfg, Path("data"))
    for step in range(STEPS):
        run.step(step)
    return _state(run)


def _env(rank: int, port: int) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(WORLD), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    torch.set_num_threads(1)


def _equivalence_worker(rank: int, port: int, scene: Path, out: Path, modes: list[str]) -> None:
    _env(rank, port)
    with process_group("cpu", 300.0):
        states = {mode: _steps(_config(scene, out / "steps", mode)) for mode in modes}
        train_nerf(replace(_config(scene, out, "row+bnp"), expname="two"), progress=False)  # rank 0 checkpoints
    (out / f"rank{rank}.pkl").write_bytes(pickle.dumps(states))


def _dead_rank_worker(rank: int, port: int, scene: Path, out: Path) -> None:
    _env(rank, port)
    argv = ["train", "--preset", "none", "--datadir", str(scene), "--factor", "1", "--llffhold", "4", "--basedir", str(out),
            "--expname", "dead", "--iters", "50", "--netdepth", "2", "--netwidth", "32", "--view_width", "16",
            "--N_samples", "8", "--N_rand", "64", "--no_lpips", "--quiet", "--device", "cpu", "--dist_timeout", "20"]
    if rank == 1:  # dies at its 3rd step, as a killed process would
        from enerf.train.nerf import NerfRun

        real = NerfRun.step
        NerfRun.step = lambda run, step, *rest: os._exit(1) if step == 2 else real(run, step, *rest)
    from enerf.cli import main

    err = io.StringIO()
    tic = time.perf_counter()
    with redirect_stderr(err):
        code = main(argv)
    (out / f"dead{rank}.pkl").write_bytes(pickle.dumps((code, err.getvalue(), time.perf_counter() - tic)))
    # Exit without the interpreter's teardown: after its peer died, the surviving process sometimes
    # aborts there ("terminate called without an active exception", SIGABRT) in a thread torch's
    # gloo group leaves behind, after main has returned. What main returned is checked from the
    # pickle; that teardown abort is a known open defect, not what this test is about.
    sys.stdout.flush()
    os._exit(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(fn, *args) -> list[int]:
    """Run ``fn(rank, port, *args)`` in WORLD fresh processes; their exit codes."""
    ctx = mp.get_context("spawn")
    port = _free_port()
    procs = [ctx.Process(target=fn, args=(rank, port, *args)) for rank in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=900)
        if p.is_alive():
            p.kill()
    return [p.exitcode for p in procs]


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_synthetic_scene(tmp_path_factory.mktemp("scene") / "tiny", n_views=8, width=40, height=30, seed=1)


def test_shards_partition_the_batch():
    for n in (64, 65, 7):
        bounds = [shard_bounds(n, 3, r) for r in range(3)]
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        assert max(b - a for a, b in bounds) - min(b - a for a, b in bounds) <= 1


@pytest.mark.skipif(sys.platform == "win32", reason="gloo over TCP on localhost")
def test_two_processes_equal_one_and_resume_on_one(scene, tmp_path):
    modes = ["none", "row", "row+bnp"]
    assert _spawn(_equivalence_worker, scene, tmp_path, modes) == [0, 0]
    ranks = [pickle.loads((tmp_path / f"rank{r}.pkl").read_bytes()) for r in range(WORLD)]
    for mode in modes:
        one = _steps(_config(scene, tmp_path / "one", mode))
        for key, value in one.items():
            for r in range(WORLD):
                got = ranks[r][mode][key]
                if value.dtype == torch.bool or key == "n_rays":
                    assert torch.equal(got, value), (mode, key, r)
                else:
                    assert torch.allclose(got, value, rtol=0, atol=1e-5), (mode, key, r, (got - value).abs().max())
        assert any(k.startswith("grid.") for k in one) == (mode != "none")
        if mode != "none":
            assert 0 < one["grid.binaries"].float().mean() < 1  # a grid with empty and occupied cells
        initial = _state(prepare_run(_config(scene, tmp_path / "init", mode), Path("data")))
        moved = max((one[k] - initial[k]).abs().max() for k in one if k.startswith("coarse."))
        assert moved > 1e-3  # the steps moved the weights far more than the tolerance

    # the 2-process checkpoint (STEPS steps) resumed on one process to 2 * STEPS ...
    cfg = replace(_config(scene, tmp_path, "row+bnp"), expname="two")
    two_payload, _ = load_checkpoint(tmp_path / "two" / "checkpoints" / "latest.pt")
    assert two_payload["step"] == STEPS
    longer = replace(cfg, train=replace(cfg.train, iters=2 * STEPS))
    train_nerf(longer, resume=True, progress=False)
    # ... equals one process trained 2 * STEPS steps straight
    train_nerf(replace(longer, expname="straight"), progress=False)
    resumed, _ = load_checkpoint(tmp_path / "two" / "checkpoints" / "latest.pt")
    straight, _ = load_checkpoint(tmp_path / "straight" / "checkpoints" / "latest.pt")
    assert resumed["step"] == straight["step"] == 2 * STEPS
    for name in straight["fields"]:
        for key, value in straight["fields"][name].items():
            assert torch.allclose(resumed["fields"][name][key], value, rtol=0, atol=1e-5), (name, key)
    assert torch.equal(resumed["extra"]["renderer"]["grid"]["binaries"], straight["extra"]["renderer"]["grid"]["binaries"])


def test_a_dead_rank_stops_the_other_with_one_line(scene, tmp_path):
    codes = _spawn(_dead_rank_worker, scene, tmp_path)
    assert codes == [0, 1]  # rank 0 returned from main; rank 1 died
    code, err, seconds = pickle.loads((tmp_path / "dead0.pkl").read_bytes())
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "another rank stopped" in lines[0], err
    assert seconds < 20 + 15  # within --dist_timeout (plus start-up), not a hang
    assert not (tmp_path / "dead" / "metrics.json").exists()
