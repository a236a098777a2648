"""Conditioning beyond MLPs, on real handwritten images: scikit-learn's bundled 8 x 8 digits
(1,797 images of 10 classes; a stratified 3 : 1 train / test split drawn per seed).

* A small CNN (conv 3x3 -> BN -> ReLU, twice, valid padding: 8x8 -> 6x6 -> 4x4; then a
  linear classifier on the 512 features), trained with SGD (momentum 0.9):
  BN, BN + E (``row`` equilibration on the first convolution and the last linear layer, the
  paper's placement), BN + ws and BN + wn (the same two layers), and BN + E(conv1) (E on the
  first convolution only, to tell the two layers' parts apart), each with and without BNP
  (``enerf.optim.BNP`` on every conv / linear layer), at several learning rates.
* A tiny ViT (2 x 2 patches, 2 pre-LN blocks of width 32, 4 heads), trained with AdamW:
  LN and LN + E (``row`` on every linear layer: patch embedding, qkv, projections, MLPs, head).

Every variant of a seed starts from the same initial weights (the plain model is built under
the seed, then ``enerf.nn.condition_model`` converts it) and sees the same batches. The step
time is measured apart from training: each variant's steps in turn on one batch, interleaved
over several rounds. Writes into ``--out``: ``classify_digits.md`` (test accuracy mean ± std
over seeds, the paired difference to the baseline at the same learning rate with its 95 % CI,
final training loss, step time and its ratio to the baseline), ``classify_digits.json`` (every
run's history) and ``loss_curves.png`` / ``accuracy_curves.png`` (per epoch and per training
CPU second, mean ± std over seeds).

    OMP_NUM_THREADS=1 nice -n 19 flock -s /tmp/enerf-cpu.lock python -m studies.classify_digits --out runs/digits

Needs scikit-learn (``pip install -e ".[bench]"``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from enerf.atomic import atomic_write_bytes
from enerf.compare.plots import curves_figure, figure_png
from enerf.compare.table import cell_stats, paired_ci
from enerf.errors import EnerfError
from enerf.nn import condition_model
from enerf.optim import BNP

from benchmarks.harness import write_report_files


PAPER_CNN_LAYERS = ("conv1", "fc")  # the paper's placement: first convolution, last linear layer
# norm -> (conditioning, the CNN layers it goes on); "BN+E(conv1)": E on the first convolution only
CNN_NORMS = {"BN": (None, ()), "BN+E": ("row", PAPER_CNN_LAYERS), "BN+ws": ("ws", PAPER_CNN_LAYERS),
             "BN+wn": ("wn", PAPER_CNN_LAYERS), "BN+E(conv1)": ("row", ("conv1",))}
VIT_NORMS = {"LN": None, "LN+E": "row"}  # norm -> conditioning of every linear layer
ARCH_NAMES = {"cnn": "CNN", "vit": "ViT"}


def load_digits_split(seed: int, test_fraction: float = 0.25) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(x_train, y_train, x_test, y_test): images / 16 as Tensor  # [n, 1, 8, 8] and labels
    Tensor  # [n]; the split is stratified by class, drawn with ``seed``."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError:
        raise EnerfError('scikit-learn is missing; install it with: pip install -e ".[bench]"') from None
    digits = load_digits()
    x = torch.from_numpy(digits.images.astype(np.float32) / 16.0).unsqueeze(1)
    y = torch.from_numpy(digits.target.astype(np.int64))
    train, test = train_test_split(np.arange(len(y)), test_size=test_fraction, stratify=digits.target,
                                   random_state=seed)
    return x[train], y[train], x[test], y[test]


def build_cnn(width: int = 16) -> nn.Sequential:
    """The plain BN CNN: [n, 1, 8, 8] -> logits [n, 10]. Valid padding keeps BNP's per-channel
    statistics those of the BN step it matches (Prop. 7 of the BNP paper)."""
    return nn.Sequential(
        OrderedDict(conv1=nn.Conv2d(1, width, 3), bn1=nn.BatchNorm2d(width), relu1=nn.ReLU(),
                    conv2=nn.Conv2d(width, 2 * width, 3), bn2=nn.BatchNorm2d(2 * width), relu2=nn.ReLU(),
                    flatten=nn.Flatten(), fc=nn.Linear(2 * width * 16, 10))
    )


class Attention(nn.Module):
    """Multi-head self-attention written with ``nn.Linear`` layers (``nn.MultiheadAttention``
    reads its projection weights directly, so conditioned layers would be bypassed)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        """x: Tensor  # [n, tokens, dim] -> Tensor  # [n, tokens, dim]."""
        n, t, d = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        out = nn.functional.scaled_dot_product_attention(q, k, v)  # [n, heads, tokens, dim / heads]
        return self.proj(out.transpose(1, 2).reshape(n, t, d))


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, dim: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(dim), Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyViT(nn.Module):
    """[n, 1, 8, 8] -> 16 patches of 2 x 2 pixels + a class token -> ``depth`` blocks -> logits [n, 10]."""

    def __init__(self, dim: int = 32, depth: int = 2, heads: int = 4, hidden: int = 64, patch: int = 2) -> None:
        super().__init__()
        self.patch = patch
        tokens = (8 // patch) ** 2
        self.embed = nn.Linear(patch * patch, dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, tokens + 1, dim))
        self.blocks = nn.Sequential(*(Block(dim, heads, hidden) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x: Tensor) -> Tensor:
        n, p = x.shape[0], self.patch
        side = 8 // p
        patches = x.reshape(n, side, p, side, p).permute(0, 1, 3, 2, 4).reshape(n, side * side, p * p)
        tokens = torch.cat([self.cls.expand(n, -1, -1), self.embed(patches)], dim=1) + self.pos
        return self.head(self.norm(self.blocks(tokens)[:, 0]))


def make_model(arch: str, norm: str, seed: int) -> nn.Module:
    """The plain model built under ``seed``, then conditioned as ``norm`` says."""
    torch.manual_seed(seed)
    if arch == "cnn":
        model, (mode, layers) = build_cnn(), CNN_NORMS[norm]
    else:
        model, mode, layers = TinyViT(), VIT_NORMS[norm], (lambda name, m: isinstance(m, nn.Linear))
    if mode is not None:
        condition_model(model, mode, layers=list(layers) if isinstance(layers, tuple) else layers)
    return model


def make_optimizer(arch: str, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    if arch == "cnn":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, bnp: BNP | None, x: Tensor, y: Tensor) -> float:
    """One step on the batch x [n, 1, 8, 8], y [n]: cross-entropy, backward, BNP (if any), step.
    Returns the loss before the step."""
    model.train()
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if bnp is not None:
        bnp.precondition()
    optimizer.step()
    return loss.item()


@torch.no_grad()
def accuracy(model: nn.Module, x: Tensor, y: Tensor) -> float:
    model.eval()
    return float((model(x).argmax(1) == y).float().mean())


def train_run(arch: str, norm: str, use_bnp: bool, seed: int, data, epochs: int, lr: float, batch: int) -> dict:
    """One training run; history per epoch: step (the epoch), train_seconds (the process's CPU
    time in training steps: with one torch thread, what the steps cost without the waits that
    other processes on the machine cause), train_loss, test_acc."""
    x_train, y_train, x_test, y_test = data
    model = make_model(arch, norm, seed)
    optimizer = make_optimizer(arch, model, lr)
    bnp = BNP(model) if use_bnp else None
    order = torch.Generator().manual_seed(seed)
    history, elapsed = [], 0.0
    for epoch in range(1, epochs + 1):
        perm = torch.randperm(len(y_train), generator=order)
        losses = []
        tic = time.process_time()
        for start in range(0, len(perm), batch):
            idx = perm[start:start + batch]
            losses.append(train_step(model, optimizer, bnp, x_train[idx], y_train[idx]))
        elapsed += time.process_time() - tic
        history.append({"step": epoch, "train_seconds": elapsed, "train_loss": float(np.mean(losses)),
                        "test_acc": accuracy(model, x_test, y_test)})
    return {"arch": arch, "lr": lr, "method": _method(norm, use_bnp), "seed": seed, "history": history,
            "test_acc": history[-1]["test_acc"], "train_loss": history[-1]["train_loss"]}


def _method(norm: str, use_bnp: bool) -> str:
    return f"{norm}+BNP" if use_bnp else norm


def variants(arch: str) -> list[tuple[str, bool]]:
    """(norm, BNP) of every run of ``arch``; the first is its baseline."""
    if arch == "cnn":
        return [(norm, bnp) for bnp in (False, True) for norm in CNN_NORMS]
    return [(norm, False) for norm in VIT_NORMS]


def time_steps(archs: list[str], data, batch: int, rounds: int = 5, steps: int = 30) -> dict[tuple[str, str], float]:
    """{(arch, method): ms per training step}: ``steps`` steps of each variant in turn, ``rounds``
    times (interleaved, so a change in the machine's load hits every variant alike); the fastest
    round's mean step time (forward, backward, BNP, optimizer step) in CPU time of this process,
    the least disturbed by other processes."""
    x, y = data[0][:batch], data[1][:batch]
    setups = {}
    for arch in archs:
        for norm, use_bnp in variants(arch):
            model = make_model(arch, norm, 0)
            setups[(arch, _method(norm, use_bnp))] = (model, make_optimizer(arch, model, 1e-3),
                                                      BNP(model) if use_bnp else None)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in setups}
    for round_ in range(rounds + 1):  # round 0 warms up
        for key, (model, optimizer, bnp) in setups.items():
            tic = time.process_time()
            for _ in range(steps):
                train_step(model, optimizer, bnp, x, y)
            if round_:
                times[key].append(1e3 * (time.process_time() - tic) / steps)
    return {key: min(values) for key, values in times.items()}


def summarize(runs: list[dict], step_ms: dict[tuple[str, str], float]) -> list[dict]:
    """One row per (arch, lr, method): accuracy and loss statistics over seeds, the paired
    difference to the baseline of that (arch, lr) (its first method), the step time and its
    ratio to the arch's baseline."""
    rows = []
    for arch, lr in dict.fromkeys((r["arch"], r["lr"]) for r in runs):
        mine = [r for r in runs if (r["arch"], r["lr"]) == (arch, lr)]
        methods = list(dict.fromkeys(r["method"] for r in mine))
        by = {(r["method"], r["seed"]): r for r in mine}
        seeds = sorted({r["seed"] for r in mine})
        base_acc = [100 * by[(methods[0], s)]["test_acc"] for s in seeds]
        for method in methods:
            acc = [100 * by[(method, s)]["test_acc"] for s in seeds]
            rows.append({
                "arch": arch, "lr": lr, "method": method, "baseline": method == methods[0], "seeds": seeds, "acc": acc,
                "acc_stats": cell_stats(acc), "delta": float(np.mean(np.subtract(acc, base_acc))),
                "delta_ci95": paired_ci(acc, base_acc),
                "loss_stats": cell_stats([by[(method, s)]["train_loss"] for s in seeds]),
                "step_ms": step_ms[(arch, method)], "time_ratio": step_ms[(arch, method)] / step_ms[(arch, methods[0])],
            })
    return rows


def _pm(stats: tuple, fmt: str) -> str:
    mean, std = stats
    return format(mean, fmt) + ("" if std is None else f" ± {format(std, fmt)}")


def to_markdown(rows: list[dict], settings: dict) -> str:
    lines = [
        "| model | lr | method | test accuracy % | Δ vs baseline (pp) [95 % CI] | final train loss | step ms "
        "| step time / baseline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ci = r["delta_ci95"]
        delta = "baseline" if r["baseline"] else (
            f"{r['delta']:+.2f}" + ("" if ci is None else f" [{ci[0]:+.2f}, {ci[1]:+.2f}]"))
        lines.append(f"| {ARCH_NAMES[r['arch']]} | {r['lr']:g} | {r['method']} | {_pm(r['acc_stats'], '.2f')} | {delta} "
                     f"| {_pm(r['loss_stats'], '.4f')} | {r['step_ms']:.2f} | {r['time_ratio']:.2f} |")
    s = settings
    lines += ["", f"Seeds {', '.join(map(str, s['seeds']))} (split, initialisation and batch order); mean ± sample std "
              f"over seeds; Δ: mean of the per-seed paired differences to the baseline at the same learning rate, with "
              f"the t interval. CNN: SGD momentum 0.9, {s['epochs_cnn']} epochs; ViT: AdamW, weight decay 0.05, "
              f"{s['epochs_vit']} epochs; batch {s['batch']}; {s['n_train']} training / {s['n_test']} test images. "
              f"Step time: forward, backward, BNP and optimizer step on one batch, process CPU time with "
              f"{s['threads']} torch thread(s), "
              f"variants interleaved, fastest of {s['timing_rounds']} rounds."]
    return "\n".join(lines) + "\n"


def run(archs: list[str], seeds: list[int], epochs: dict[str, int], lrs: dict[str, list[float]], batch: int,
        log=print) -> list[dict]:
    """Every (seed, arch, lr, variant) run, in that order."""
    runs = []
    for seed in seeds:
        data = load_digits_split(seed)
        for arch in archs:
            for lr in lrs[arch]:
                for norm, use_bnp in variants(arch):
                    tic = time.perf_counter()
                    r = train_run(arch, norm, use_bnp, seed, data, epochs[arch], lr, batch)
                    runs.append(r)
                    log(f"seed {seed} {arch} lr {lr:g} {r['method']}: test acc {100 * r['test_acc']:.2f} %, "
                        f"loss {r['train_loss']:.4f}, {time.perf_counter() - tic:.1f} s")
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/classify_digits", help="output folder")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--models", nargs="+", choices=["cnn", "vit"], default=["cnn", "vit"])
    parser.add_argument("--epochs_cnn", type=int, default=12)
    parser.add_argument("--epochs_vit", type=int, default=20)
    parser.add_argument("--lr_cnn", type=float, nargs="+", default=[0.01, 0.05, 0.2],
                        help="SGD learning rate(s)")
    parser.add_argument("--lr_vit", type=float, nargs="+", default=[1e-3, 3e-3],
                        help="AdamW learning rate(s)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--timing_rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    log = lambda text: print(text, flush=True)  # noqa: E731
    try:
        runs = run(args.models, args.seeds, {"cnn": args.epochs_cnn, "vit": args.epochs_vit},
                   {"cnn": args.lr_cnn, "vit": args.lr_vit}, args.batch, log=log)
        data = load_digits_split(args.seeds[0])
    except EnerfError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    step_ms = time_steps(args.models, data, args.batch, rounds=args.timing_rounds)
    settings = dict(seeds=args.seeds, epochs_cnn=args.epochs_cnn, epochs_vit=args.epochs_vit, batch=args.batch,
                    threads=torch.get_num_threads(), timing_rounds=args.timing_rounds, n_train=len(data[1]),
                    n_test=len(data[3]))
    table = to_markdown(summarize(runs, step_ms), settings)
    curves: dict[str, dict[str, list]] = {}
    for r in runs:
        panel = f"{ARCH_NAMES[r['arch']]}, lr {r['lr']:g}"
        curves.setdefault(panel, {}).setdefault(r["method"], []).append(r["history"])
    out = Path(args.out)
    atomic_write_bytes(out / "loss_curves.png", figure_png(curves_figure(curves, "train_loss", "training loss")))
    atomic_write_bytes(out / "accuracy_curves.png", figure_png(curves_figure(curves, "test_acc", "test accuracy")))
    record = {"settings": settings, "step_ms": {f"{a} {m}": v for (a, m), v in step_ms.items()}, "runs": runs}
    write_report_files(out, "classify_digits", record, table, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
