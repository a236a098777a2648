"""``--device auto|cpu|cuda|mps`` and the preset each (device, scene layout) pair gets, with CUDA and
Apple's MPS faked where the machine has none; the divergence guard that reads its sums every
``log_every`` steps on a GPU; the ray sampler's permutation kept where the batches are made; freed step
buffers reused without page faults."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import enerf.device
from enerf.cli import main
from enerf.cli.train import build_train_parser, train_config
from enerf.config.presets import preset_line
from enerf.data.sampler import RaySampler
from enerf.errors import ConfigError, DivergenceError
from enerf.synthetic.scene import make_synthetic_scene
from enerf.data.loaders import load_scene
from enerf.config import DataConfig
from enerf.train.divergence import FiniteGuard, guard_every

# layout -> the flags that fix it without a scene folder (scene_layout / scene_kind read them first)
LAYOUTS = {"llff": ["--dataset_type", "llff", "--scene_kind", "forward"],
           "capture": ["--dataset_type", "nerfstudio", "--scene_kind", "walkaround"],
           "blender": ["--dataset_type", "blender"]}
# (device, layout) -> (preset, example file, factor, rays a step, sampler): the presets' values, by hand
EXPECTED = {
    ("cpu", "llff"): ("cpu", "fern_cpu.txt", 0, 1024, "hierarchical"),
    ("cpu", "capture"): ("cpu", "capture_cpu.txt", 0, 1024, "proposal"),
    ("cpu", "blender"): ("cpu", "lego_cpu.txt", 0, 1024, "torch_grid"),
    ("cuda", "llff"): ("cuda", "fern_cuda.txt", 4, 4096, "hierarchical"),
    ("cuda", "capture"): ("cuda", "capture_cuda.txt", 2, 4096, "proposal"),
    ("cuda", "blender"): ("cuda", "lego_cuda.txt", 1, 4096, "auto"),
    ("mps", "llff"): ("cpu", "fern_cpu.txt", 0, 1024, "hierarchical"),
    ("mps", "capture"): ("cpu", "capture_cpu.txt", 0, 1024, "proposal"),
    ("mps", "blender"): ("cpu", "lego_cpu.txt", 0, 1024, "torch_grid"),
}


def _fake(monkeypatch, cuda: bool = False, mps: bool = False) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(enerf.device, "mps_available", lambda: mps)


def _resolve(argv: list[str]):
    args = build_train_parser().parse_args([*argv, "--datadir", "no_such_scene"])
    cfg, preset, device, why = train_config(args, Path("no_data_root"))
    return preset, device, why, cfg


@pytest.mark.parametrize("device, layout", sorted(EXPECTED), ids=["-".join(k) for k in sorted(EXPECTED)])
def test_the_preset_of_each_device_and_layout(device, layout, monkeypatch):
    _fake(monkeypatch, cuda=device == "cuda", mps=device == "mps")
    flags = ["--device", "mps"] if device == "mps" else []  # auto never picks MPS
    preset, chosen, why, cfg = _resolve([*LAYOUTS[layout], *flags])
    name, file, factor, n_rand, renderer = EXPECTED[(device, layout)]
    assert chosen == device and (preset.name, preset.layout, f"{preset.recipe}.txt") == (name, layout, file)
    assert (cfg.data.factor, cfg.train.n_rand, cfg.render.sampler) == (factor, n_rand, renderer)
    if name == "cuda":  # the GPU presets: 5 minutes, the decay stretched to a GPU's steps
        assert (cfg.train.time_budget, cfg.train.lrate_decay) == (300.0, 30)
    else:  # 10 minutes; a photo capture (transforms.json) splits them with its splats: 7 for the field
        assert cfg.train.time_budget == (420.0 if layout == "capture" else 600.0)
    line = preset_line(preset, "auto", chosen, why)
    assert line.startswith(f"{device} (--device {'mps' if device == 'mps' else 'auto'}: ")
    assert f"from enerf's preset {file[:-4]} (example file: configs/{file}) for what no flag sets" in line


def test_auto_is_cuda_when_torch_sees_one_else_the_cpu_and_mps_is_named(monkeypatch):
    _fake(monkeypatch, cuda=True, mps=True)
    assert enerf.device.choose_device("auto") == ("cuda", "--device auto: torch sees a CUDA GPU")
    _fake(monkeypatch, cuda=False, mps=True)
    assert enerf.device.choose_device("auto") == ("cpu", "--device auto: torch sees no CUDA GPU; Apple's MPS is "
                                                  "present: --device mps tries it, untested")
    assert enerf.device.choose_device("mps") == ("mps", "--device mps: Apple's MPS backend, untested: no machine "
                                                 "enerf is measured on has one")
    assert enerf.device.select_device("mps") == torch.device("mps")
    _fake(monkeypatch)
    assert enerf.device.choose_device("auto") == ("cpu", "--device auto: torch sees no CUDA GPU")
    assert enerf.device.choose_device("cpu") == ("cpu", "--device cpu")


@pytest.mark.parametrize("device, words", [("mps", "torch has no Apple MPS backend here (torch.backends.mps.is_available() "
                                                   "is False)"), ("cuda", "torch sees no CUDA GPU")])
def test_a_device_torch_does_not_see_is_refused_in_one_line(device, words, monkeypatch, tmp_path, capsys):
    _fake(monkeypatch)
    with pytest.raises(ConfigError) as info:
        enerf.device.select_device(device)
    assert str(info.value) == f"device {device} was asked for but {words}; use device cpu or auto"
    code = main(["train", "--device", device, "--basedir", str(tmp_path), "--iters", "1", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == f"enerf: error: --device {device} was asked for but {words}; use --device cpu or auto"
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_paper_without_settings_for_the_scene_takes_the_devices_preset(monkeypatch):
    _fake(monkeypatch, cuda=True)
    preset, _, why, _ = _resolve([*LAYOUTS["capture"], "--preset", "paper"])
    assert (preset.name, preset.recipe) == ("cuda", "capture_cuda")
    assert preset_line(preset, "paper", "cuda", why).startswith(
        "--preset paper (none for this scene: cuda) on cuda (--device auto: torch sees a CUDA GPU): ")


# ----------------------------------------------------------------------------- the divergence guard


def test_guard_every_is_one_on_the_cpu():
    assert guard_every([torch.zeros(2)], 100) == 1
    assert guard_every([torch.zeros(2, device="meta")], 100) == 100  # any parameter off the CPU


def _guard(every: int):
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    w.grad = torch.zeros(2)
    return w, FiniteGuard([("w", w)], lrate=1e-3, every=every)


def test_a_deferred_guard_reads_every_n_steps_and_names_the_first_bad_step():
    w, guard = _guard(every=5)
    for step in (1, 2):
        guard.check(step, torch.tensor(0.1), Path("ck.pt"), None)
    assert [s for s, _, _ in guard.pending] == [1, 2]
    assert float(guard.pending[0][1]) == pytest.approx(0.1 + 0.0 + 5.0)  # loss + |grad| + |w|, on the device
    guard.check(3, torch.tensor(float("nan")), Path("ck.pt"), None)  # read at step 5, not now
    guard.check(4, torch.tensor(0.1), Path("ck.pt"), None)
    with pytest.raises(DivergenceError, match=r"^training diverged at step 3: the loss \(nan\) went non-finite; no "
                                              r"checkpoint was written"):
        guard.check(5, torch.tensor(0.1), Path("ck.pt"), None)
    assert guard.pending == []


def test_a_deferred_guard_flushes_before_a_checkpoint():
    w, guard = _guard(every=100)
    guard.check(1, torch.tensor(0.1), Path("ck.pt"), None)
    guard.flush(Path("ck.pt"), None)  # finite: nothing happens
    with torch.no_grad():
        w[0] = float("inf")
    guard.check(2, torch.tensor(0.1), Path("ck.pt"), 1)
    with pytest.raises(DivergenceError, match=r"at step 2: the weights \(w\) went non-finite; the last good "
                                              r"checkpoint ck.pt \(step 1\) is kept"):
        guard.flush(Path("ck.pt"), 1)


# ----------------------------------------------------------------------------- the sampler's permutation


def test_the_sampler_draws_the_same_batches_with_its_permutation_on_the_device(tmp_path):
    """The permutation lives where the batches are made (one copy an epoch); the pixels drawn are
    the CPU generator's permutation, in order."""
    folder = make_synthetic_scene(tmp_path / "s", n_views=4, width=8, height=6, seed=1)
    scene = load_scene(DataConfig(datadir=str(folder), factor=1, llffhold=0), Path("."))
    views = list(range(4))
    sampler = RaySampler(scene, views, 50, torch.Generator().manual_seed(3))
    drawn = torch.cat([sampler.draw() for _ in range(3)])
    expected = torch.randperm(4 * 6 * 8, generator=torch.Generator().manual_seed(3), dtype=torch.int32)[:150].long()
    assert torch.equal(drawn, expected) and sampler._order.device == sampler.device


# ----------------------------------------------------------------------------- the device benchmark's summary


def test_the_benchmark_checks_the_issues_figures_at_their_times():
    from benchmarks.device_bench import mark_record, ratios, targets

    def run(scene, preset, marks):
        records = [{"mark": t, **mark_record(t + 0.01, steps, rays, psnr)} for t, steps, rays, psnr in marks]
        return {"scene": scene, "preset": preset, "marks": records, **records[-1]}

    runs = [run("fox", "cuda", [(30, 1000, 4_096_000, 30.9), (60, 2000, 8_192_000, 31.6)]),
            run("fox", "cpu", [(30, 2500, 2_560_000, 30.0)]),
            run("fern", "cuda", [(30, 900, 3_686_400, 24.0), (90, 2700, 11_059_200, 25.5)])]
    fox_psnr, fox_rate, boardgame_rate, fern_psnr = [(t["measured"], t["met"]) for t in targets(runs)]
    assert fox_psnr == (31.6, True)  # the 60-s mark
    assert fox_rate == (pytest.approx(8_192_000 / 60.01), False)  # 136,511 rays/s < 283,000
    assert boardgame_rate == (None, None) and fern_psnr == (None, None)  # no such run; no 300-s mark
    assert ratios(runs) == {"fox": pytest.approx((8_192_000 / 60.01) / (2_560_000 / 30.01))}


_FAULTS = """
import resource, sys, torch
sys.path.insert(0, {root!r})
if {reuse}:
    from enerf.device import select_device
    select_device("cpu")
def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        x = torch.empty(10 << 20)  # 40 MB: above the 32 MB ceiling of glibc's moving mmap threshold
        x.fill_(1.0)
        del x
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults()
print(faults())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's; elsewhere a no-op")
def test_a_step_s_freed_buffers_are_reused_without_page_faults():
    """20 allocations of 40 MB fault in their 10 k pages each time under glibc's defaults (about 200 k faults,
    counted by the kernel: getrusage); after select_device they reuse the heap's pages (none after the first)."""
    root = str(Path(__file__).resolve().parents[2])
    counts = {}
    for reuse in (False, True):
        done = subprocess.run([sys.executable, "-c", _FAULTS.format(root=root, reuse=reuse)], capture_output=True,
                              text=True, check=True)
        counts[reuse] = int(done.stdout.split()[-1])
    assert counts[False] > 20 * 10240 * 0.5, counts  # the default maps each block anew
    assert counts[True] < 20 * 10240 * 0.05, counts
