"""The triplane look-up on a CPU: ``F.grid_sample`` against two other ways of computing the same thing.

    python -m studies.triplane_lookup --threads 2

Times forward and backward of the bilinear look-up that ``enerf.nn.triplane`` does per level
(3 planes of C channels, side R, n points each; align_corners, border padding) three ways:

* ``grid_sample``: what the triplane uses on CUDA (on a CPU, training reads it through
  ``enerf.nn.compiled.TriplaneLevel``: ``python -m studies.profile_step``), the 3 planes as a batch of 3;
* ``grid_sample, split k``: the points of each plane split into k batches (the CPU kernel
  parallelises over the batch only), the planes expanded to match;
* ``embedding_bag``: the planes as a channels-last table, the 4 corners of each point as a bag
  with their bilinear weights (``per_sample_weights``).

Before timing, the outputs and the planes' gradients of the other two are checked against
``grid_sample`` (the largest differences are printed). Prints milliseconds per call (median).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def grid_sample(planes, xy, k: int = 1):
    """planes [3, C, R, R], xy [3, n, 2] in [-1, 1] -> [3, n, C]."""
    three, c, r, _ = planes.shape
    n = xy.shape[1]
    if k == 1:
        out = F.grid_sample(planes, xy.view(3, n, 1, 2), align_corners=True, padding_mode="border")
        return out.view(3, c, n).transpose(1, 2)
    expanded = planes.unsqueeze(1).expand(3, k, c, r, r).reshape(3 * k, c, r, r)
    out = F.grid_sample(expanded, xy.reshape(3 * k, n // k, 1, 2), align_corners=True, padding_mode="border")
    return out.view(3, k, c, n // k).permute(0, 1, 3, 2).reshape(3, n, c)


def embedding_bag(planes, xy):
    """The same look-up as ``grid_sample`` through ``F.embedding_bag`` on a channels-last table."""
    three, c, r, _ = planes.shape
    n = xy.shape[1]
    table = planes.permute(0, 2, 3, 1).reshape(3 * r * r, c)
    g = ((xy + 1) * (0.5 * (r - 1))).clamp(0, r - 1)
    x, y = g[..., 0], g[..., 1]
    x0, y0 = x.floor().clamp(max=r - 2), y.floor().clamp(max=r - 2)
    fx, fy = x - x0, y - y0
    base = torch.arange(3).view(3, 1) * r * r + y0.long() * r + x0.long()
    corners = torch.stack([base, base + 1, base + r, base + r + 1], -1).view(3 * n, 4)
    weights = torch.stack([(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy], -1).view(3 * n, 4)
    return F.embedding_bag(corners, table, per_sample_weights=weights, mode="sum").view(3, n, c)


def forward_backward_ms(fn, planes, xy, repeats: int) -> tuple[float, float]:
    forward, backward = [], []
    for i in range(repeats + 2):
        planes.grad = None
        tic = time.perf_counter()
        out = fn(planes, xy)
        loss = out.square().sum()
        mid = time.perf_counter()
        loss.backward()
        toc = time.perf_counter()
        if i >= 2:  # two warm-up calls
            forward.append(mid - tic)
            backward.append(toc - mid)
    return 1e3 * statistics.median(forward), 1e3 * statistics.median(backward)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--channels", type=int, default=16, help="C (configs/fern_cpu.txt: 16)")
    parser.add_argument("--resolution", type=int, default=256, help="R (fern_cpu's fine level: 256)")
    parser.add_argument("--points", type=int, default=65536, help="n (fern_cpu: 1,024 rays x 64 samples)")
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    planes = (0.1 * torch.randn(3, args.channels, args.resolution, args.resolution, generator=g)).requires_grad_()
    xy = torch.rand(3, args.points, 2, generator=g) * 2 - 1
    ways = {"grid_sample": grid_sample, "grid_sample, split 2": lambda p, q: grid_sample(p, q, 2),
            "grid_sample, split 4": lambda p, q: grid_sample(p, q, 4), "embedding_bag": embedding_bag}

    reference = grid_sample(planes, xy)
    (ref_grad,) = torch.autograd.grad(reference.square().sum(), planes)
    print(f"{args.threads} thread(s), 3 planes x {args.channels} channels x {args.resolution}^2, {args.points} points")
    for name, fn in ways.items():
        out = fn(planes, xy)
        (grad,) = torch.autograd.grad(out.square().sum(), planes)
        out_err, grad_err = (out - reference).abs().max().item(), (grad - ref_grad).abs().max().item()
        fwd, bwd = forward_backward_ms(fn, planes, xy, args.repeats)
        print(f"{name:22s} forward {fwd:6.1f} ms  backward {bwd:6.1f} ms  "
              f"(max |diff| vs grid_sample: output {out_err:.1e}, gradient {grad_err:.1e})")


if __name__ == "__main__":
    main()
