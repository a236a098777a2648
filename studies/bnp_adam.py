"""What of BNP survives under Adam: BNP's gradient transform split into its two parts, measured
along real training runs, and BNP trained as its paper trains it (SGD with momentum) and as
enerf's default does (Adam).

BNP (``enerf.optim.bnp``) maps a dense layer's gradients (G_W, G_b) to
    full      G_W <- (G_W - G_b μᵀ) / (q² σ̃²),  G_b <- G_b / q² - G_W μ
    centring  the same with q² = 1, σ̃² = 1 (only the shift by the input means μ)
    scaling   the same with μ = 0 (only the per-input 1/(q² σ̃²))
Along a run trained with ``--precond bnp`` (the full transform), this tool feeds each variant's
gradients, and the plain gradients, to a shadow copy of the optimizer's own state (Adam's two
moments, or SGD's momentum buffer) and compares the updates each would take at every step:
cos(u_full, u_centring) and ||u_full|| / ||u_centring||. Under Adam a per-coordinate rescaling
that changes slowly cancels (1/q² exactly, 1/σ̃² nearly), so u_full ≈ u_centring; under SGD it
does not. All parameters of the preconditioned layers count (weights and biases).

Tasks: ``shape`` (configs/shape_paper_cpu.txt, occupancy on the bunny: 8 x 256) and ``demo``
(configs/demo.txt, the demo NeRF). ``--train`` also trains {none, bnp} x {adam, sgd} without
probes and records the final IoU (shape) or held-out PSNR (demo).

    python -m studies.bnp_adam --task shape --steps 100
    python -m studies.bnp_adam --task demo --steps 300 --train --sgd_lrates 0.01 0.1

Writes benchmarks/bnp_adam.json (merged per task).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch


from enerf.optim.bnp import bnp_linear_transform, weight_parameter

from benchmarks.harness import ROOT, load_average, write_record

VARIANTS = ("full", "centring", "scaling", "plain")


def make_task(task: str, flags: list[str]):
    """A training task (``enerf.train.loop`` protocol) from the task's config file and ``flags``."""
    if task == "demo":
        from enerf.config import DATA_ROOT
        from enerf.cli.train import build_train_parser, run_config_from_args
        from enerf.train.nerf import prepare_run

        args = build_train_parser().parse_args(["--config", "configs/demo.txt", "--basedir", "/tmp/bnp_adam", *flags])
        return prepare_run(run_config_from_args(args), DATA_ROOT)
    from enerf.cli.common import config_from_args
    from enerf.cli.shape import build_shape_train_parser
    from enerf.config import ShapeRunConfig
    from enerf.shapes.samples import load_shape_data
    from enerf.fields.shape import ShapeField
    from enerf.rng import seed_everything
    from enerf.shapes.train import ShapeRun
    from enerf.train.state import LoopState, optimizer_from_config

    args = build_shape_train_parser().parse_args(["--config", "configs/shape_paper_cpu.txt", "--mesh", "bunny",
                                                  "--kind", "occupancy", "--basedir", "/tmp/bnp_adam", *flags])
    cfg = config_from_args(ShapeRunConfig, args)
    generator = seed_everything(cfg.train.seed)
    data = load_shape_data(cfg.data, cfg.train.eval_points)
    field = ShapeField(cfg.field)
    return ShapeRun(cfg, torch.device("cpu"), data, field, optimizer_from_config(field, cfg.train), generator,
                     LoopState())


class Probe:
    """Wraps ``optimizer.step`` of a BNP run: before the real step, the shadow updates of each variant."""

    def __init__(self, optimizer) -> None:
        self.opt, self.real_step = optimizer, optimizer.step
        optimizer.step = self.step
        self.inner = optimizer.optimizer
        self.adam = isinstance(self.inner, torch.optim.Adam)
        self.layers = []  # (state, weight, bias)
        for s in optimizer.bnp.states:
            self.layers.append((s, weight_parameter(s.layer), s.layer.bias))
        self.shadow = {v: {} for v in VARIANTS}
        self.t = 0
        self.records = []

    def _variant_grads(self) -> dict[str, list[torch.Tensor]]:
        out = {v: [] for v in VARIANTS}
        for s, w, b in self.layers:
            if w.grad is None:
                continue
            gw, gb = w.grad, b.grad if b is not None else None
            var_tilde = self.opt.bnp._var_tilde(s)
            parts = {"full": bnp_linear_transform(gw, gb, s.mean, var_tilde, s.q2),
                     "centring": bnp_linear_transform(gw, gb, s.mean, torch.ones_like(var_tilde), 1.0),
                     "scaling": bnp_linear_transform(gw, gb, torch.zeros_like(s.mean), var_tilde, s.q2),
                     "plain": (gw, gb)}
            for v, (nw, nb) in parts.items():
                out[v].append(nw.detach().clone())
                if nb is not None:
                    out[v].append(nb.detach().clone())
        return out

    def _update(self, variant: str, grads: list[torch.Tensor]) -> torch.Tensor:
        group = self.inner.param_groups[0]
        state = self.shadow[variant]
        if self.adam:
            b1, b2 = group["betas"]
            eps = group["eps"]
            m = state.setdefault("m", [torch.zeros_like(g) for g in grads])
            v = state.setdefault("v", [torch.zeros_like(g) for g in grads])
            ups = []
            for mi, vi, g in zip(m, v, grads):
                mi.mul_(b1).add_(g, alpha=1 - b1)
                vi.mul_(b2).addcmul_(g, g, value=1 - b2)
                ups.append((mi / (1 - b1 ** self.t)) / ((vi / (1 - b2 ** self.t)).sqrt() + eps))
        else:
            mom = group["momentum"]
            buf = state.setdefault("buf", [torch.zeros_like(g) for g in grads])
            ups = []
            for bi, g in zip(buf, grads):
                bi.mul_(mom).add_(g)  # torch SGD, dampening 0 (the first step gives g)
                ups.append(bi.clone())
        return torch.cat([u.flatten() for u in ups])

    def step(self) -> None:
        bnp = self.opt.bnp
        if bnp.pending:
            bnp.update_statistics()  # the real step then finds nothing pending and uses these statistics
        self.t += 1
        updates = {v: self._update(v, g) for v, g in self._variant_grads().items()}
        full = updates["full"]
        rec = {"step": self.t}
        for v in ("centring", "scaling", "plain"):
            u = updates[v]
            rec[f"cos_full_{v}"] = float(torch.nn.functional.cosine_similarity(full, u, dim=0))
            rec[f"ratio_full_{v}"] = float(full.norm() / u.norm().clamp_min(1e-30))
        self.records.append(rec)
        self.real_step()


def summary(records: list[dict], skip: int) -> dict:
    """Median and 5th-95th percentiles of each measured quantity over the steps after ``skip``."""
    kept = records[skip:]
    out = {}
    for key in kept[0]:
        if key == "step":
            continue
        values = np.array([r[key] for r in kept])
        out[key] = {"median": float(np.median(values)), "p05": float(np.percentile(values, 5)),
                    "p95": float(np.percentile(values, 95))}
    return out


def final_score(task_name: str, task, steps: int) -> float:
    if task_name == "demo":
        return float(task.evaluate(steps).record["psnr"])
    from enerf.shapes.train import evaluate_shape
    m, _ = evaluate_shape(task.field, task.data, task.cfg, task.device, surface=False)
    return float(m["iou"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("shape", "demo"), default="shape")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--skip", type=int, default=10, help="steps left out of the summaries (Adam's warm-up)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sgd_lrate", type=float, default=0.01, help="learning rate of the probed SGD run")
    parser.add_argument("--train", action="store_true", help="also train {none, bnp} x {adam, sgd} and score them")
    parser.add_argument("--skip_probes", action="store_true", help="keep the task's recorded probes, only --train")
    parser.add_argument("--sgd_lrates", type=float, nargs="+", default=[0.001, 0.01, 0.1])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "bnp_adam.json"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    base = ["--seed", str(args.seed), "--iters", str(args.steps)]
    out_path = Path(args.out)
    record = json.loads(out_path.read_text()) if out_path.is_file() else {}
    earlier = record.get(args.task, {})
    result: dict = {"probes": earlier.get("probes", {}) if args.skip_probes else {}, "training": {}}
    if args.skip_probes:
        result["probes_command"] = earlier.get("probes_command", earlier.get("command"))
    for opt, lr in () if args.skip_probes else (("adam", None), ("sgd", args.sgd_lrate)):
        flags = [*base, "--precond", "bnp", "--optimizer", opt] + (["--lrate", str(lr)] if lr else [])
        task = make_task(args.task, flags)
        probe = Probe(task.optimizer)
        for step in range(args.steps):
            task.step(step)
        result["probes"][opt] = {"flags": flags, "summary": summary(probe.records, args.skip),
                                 "every_10": probe.records[::10]}
        s = result["probes"][opt]["summary"]
        print(f"{args.task} bnp+{opt}: cos(full, centring) median {s['cos_full_centring']['median']:.4f} "
              f"[{s['cos_full_centring']['p05']:.4f}, {s['cos_full_centring']['p95']:.4f}], "
              f"|full|/|centring| {s['ratio_full_centring']['median']:.3g}; "
              f"cos(full, plain) {s['cos_full_plain']['median']:.4f}", flush=True)
    if args.train:
        settings = [("adam", None)] + [("sgd", lr) for lr in args.sgd_lrates]
        for opt, lr in settings:
            for precond in ("none", "bnp"):
                flags = [*base, "--precond", precond, "--optimizer", opt] + (["--lrate", str(lr)] if lr else [])
                task = make_task(args.task, flags)
                for step in range(args.steps):
                    task.step(step)
                score = final_score(args.task, task, args.steps)
                key = f"{precond}+{opt}" + (f"@{lr:g}" if lr else "")
                result["training"][key] = {"flags": flags, "psnr" if args.task == "demo" else "iou": score}
                print(f"{args.task} {key}: {score:.4f}", flush=True)
    record["what"] = ("BNP's transform split into centring and scaling; cosine and norm ratio of the updates the run's "
                      "optimizer (shadow state) would take with the full transform vs centring only / scaling only / "
                      "plain gradients, median and 5th-95th percentiles over steps; and final scores of {none, bnp} x "
                      "{adam, sgd+momentum 0.9} at equal steps")
    record[args.task] = {"command": "python -m studies.bnp_adam " + " ".join(argv if argv is not None else sys.argv[1:]),
                         "load_1min": load_average()[0], **result}
    write_record(out_path, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
