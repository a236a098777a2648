"""Densification during the fit: which Gaussians are cloned, split and pruned, and that the
optimizer's moments follow their rows."""

from __future__ import annotations

import math

import torch

from enerf.splats.bake import _optimizer, _reindex
from enerf.splats.densify import PRUNE_OPACITY, SPLIT_SHRINK, DensityControl


def _leaves(n: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"means": torch.randn(n, 3, generator=g), "log_scales": torch.full((n, 3), math.log(0.05)),
            "quats": torch.randn(n, 4, generator=g), "opacity_logits": torch.zeros(n),
            "sh0": torch.randn(n, 1, 3, generator=g), "sh_rest": torch.zeros(n, 3, 3)}


def test_the_largest_gradients_are_cloned_or_split_and_faint_ones_pruned():
    leaves = _leaves(10)
    leaves["log_scales"][[2, 7]] = math.log(0.5)  # wider than split_size: split
    leaves["opacity_logits"][4] = math.log(PRUNE_OPACITY / 2)  # nearly transparent: pruned
    density = DensityControl(10, grow=0.3, cap=100, split_size=0.1)
    grads = torch.zeros(10, 2)
    grads[[2, 5, 7], 0] = torch.tensor([3.0, 4.0, 5.0])  # 30 % of 10: these three
    grads[4, 0] = 9.0  # largest, but pruned
    density.observe(torch.arange(10), grads)
    density.observe(torch.tensor([5]), torch.tensor([[-2.0, 0.0]]))  # 5 drawn twice: mean (4 + 2) / 2 = 3
    src, values, fresh = density.plan(leaves, torch.Generator().manual_seed(1))
    kept = [0, 1, 2, 3, 5, 6, 7, 8, 9]
    assert src.tolist() == kept + [5] + [2, 7]  # kept rows, the clone of 5, the second halves of 2 and 7
    assert fresh.tolist() == [False] * 9 + [True] * 3
    torch.testing.assert_close(values["means"][9], leaves["means"][5])  # a clone sits where it came from
    for row, old in ((2, 2), (6, 7), (10, 2), (11, 7)):  # both halves of a split: narrower, moved within it
        torch.testing.assert_close(values["log_scales"][row], leaves["log_scales"][old] - math.log(SPLIT_SHRINK))
        assert 0 < float((values["means"][row] - leaves["means"][old]).norm()) < 4 * 0.5
    assert float((values["means"][10] - values["means"][2]).norm()) > 0  # two different samples
    assert density.n == 12 and density.grad.shape == (12,) and float(density.seen.sum()) == 0


def test_the_cap_limits_growth():
    leaves = _leaves(10)
    density = DensityControl(10, grow=0.5, cap=12, split_size=1.0)
    density.observe(torch.arange(10), torch.ones(10, 2))
    src, _, _ = density.plan(leaves, torch.Generator().manual_seed(0))
    assert len(src) == 12


def test_adam_moments_follow_their_rows_and_start_at_zero_for_new_ones():
    leaves = {k: t.clone().requires_grad_(True) for k, t in _leaves(6).items()}
    opt = _optimizer(leaves, {k: 0.01 for k in leaves})
    sum(t.square().sum() for t in leaves.values()).backward()
    opt.step()
    before = {k: opt.state[t]["exp_avg"].clone() for k, t in leaves.items()}
    src = torch.tensor([0, 1, 3, 4, 5, 3])
    values = {k: t.detach()[src].clone() for k, t in leaves.items()}
    fresh = torch.tensor([False] * 5 + [True])
    new = _reindex(opt, leaves, src, values, fresh)
    for k, t in new.items():
        assert opt.param_groups[[g["name"] for g in opt.param_groups].index(k)]["params"][0] is t
        moved = opt.state[t]["exp_avg"]
        torch.testing.assert_close(moved[:5], before[k][src[:5]])
        assert float(moved[5].abs().sum()) == 0.0
    opt.zero_grad()
    sum(t.square().sum() for t in new.values()).backward()
    opt.step()  # the optimizer runs on the new rows
