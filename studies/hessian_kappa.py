"""Condition number κ of the exact Hessian of the loss with respect to one layer's weights,
for a small coordinate MLP fitted to a real photograph, under none / row / col / rowcol / wn /
ws conditioning and under BNP (the setting of the BNP paper's Fig. 8: two hidden layers of
100 units, Hessian of one layer's [bias, weight] block along training).

Data: ``skimage.data.astronaut()`` resized to ``--size`` pixels per side; inputs are pixel
coordinates in [-1, 1]² with a positional encoding of ``--freqs`` octaves (NeRF's γ), targets
the RGB values in [0, 1]. Network: γ(x) -> 100 -> 100 -> 3 with ReLU; loss: mean squared
error over a fixed mini-batch of ``--batch`` pixels. Each method trains its own network from
the same initial weights with Adam (its own parametrization, or vanilla + BNP) on random
mini-batches; at the listed steps the tool computes, for the output layer (``--layer``):

* H = ∇²L with respect to that layer's stored parameters [vec(W) (out x in, row-major), b]
  (for wn: [vec(v), b], the gain held fixed), exactly, with ``torch.autograd.functional.hessian``
  in float64;
* for ``bnp``: the preconditioned Hessian Pᵀ H P of eq. (15), P = (1/q) [[1, -μᵀ], [0, I]]
  · diag(1, 1/σ̃) per output unit, from BNP's running statistics as its last training step
  used them (the Hessian in z; at step 0 they are the initial μ = 0, σ = 1);
* κ = max |λ| / min |λ| over the eigenvalues with |λ| > 1e-10 max |λ| (the paper's κ* for
  singular Hessians; conditioned parametrizations make H indefinite away from a minimum);
* κ(W) and κ(EW) of the same layer (``enerf.nn.condition_number``).

    python -m studies.hessian_kappa                       # defaults: about 20 s on 2 CPU cores
    python -m studies.hessian_kappa --steps 0 200 1000 --layer hidden.1
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch
from torch import nn

from enerf.nn.conditioning import ConditionedLinear, condition_number
from enerf.optim import BNP, weight_parameter

METHODS = ("none", "row", "col", "rowcol", "wn", "ws", "bnp")


def photo_data(size: int, freqs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(γ(coords): Tensor  # [size², 2 + 4 freqs], rgb: Tensor  # [size², 3]) from astronaut()."""
    from skimage.data import astronaut
    from skimage.transform import resize

    image = resize(astronaut(), (size, size), anti_aliasing=True)  # float64 in [0, 1]
    axis = np.linspace(-1.0, 1.0, size)
    yy, xx = np.meshgrid(axis, axis, indexing="ij")
    coords = np.stack([xx.ravel(), yy.ravel()], axis=1)
    bands = [coords] + [f(coords * (2.0 ** k) * math.pi) for k in range(freqs) for f in (np.sin, np.cos)]
    return torch.from_numpy(np.concatenate(bands, axis=1)), torch.from_numpy(image.reshape(-1, 3))


class MLP(nn.Module):
    """in -> width -> width -> out with ReLU; the hidden layers (and the output layer when
    ``output_too``) ConditionedLinear of one mode, the rest plain."""

    def __init__(self, n_in: int, width: int, n_out: int, conditioning: str, output_too: bool = True) -> None:
        super().__init__()
        self.hidden = nn.ModuleList([ConditionedLinear(n_in, width, conditioning=conditioning),
                                     ConditionedLinear(width, width, conditioning=conditioning)])
        self.output = ConditionedLinear(width, n_out, conditioning=conditioning if output_too else "none")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.output(x)


def layer_hessian(model: MLP, layer: ConditionedLinear, x: torch.Tensor, y: torch.Tensor,
                  unit: int | None = None) -> np.ndarray:
    """Exact ∇²L of the MSE with respect to [vec(stored W), b] of ``layer`` (or, with ``unit``,
    to [W[unit, :], b[unit]] with the other units held fixed): [n, n] float64."""
    weight, bias = weight_parameter(layer), layer.bias
    w0, b0 = weight.detach(), bias.detach()
    if unit is None:
        flat0 = torch.cat([w0.reshape(-1), b0])
    else:
        flat0 = torch.cat([w0[unit], b0[unit:unit + 1]])
    params = {name: p for name, p in model.named_parameters()}
    w_name = next(n for n, p in params.items() if p is weight)
    b_name = next(n for n, p in params.items() if p is bias)

    def loss_of(flat: torch.Tensor) -> torch.Tensor:
        if unit is None:
            w, b = flat[:w0.numel()].reshape(w0.shape), flat[w0.numel():]
        else:
            w = torch.cat([w0[:unit], flat[None, :-1], w0[unit + 1:]])
            b = torch.cat([b0[:unit], flat[-1:], b0[unit + 1:]])
        out = torch.func.functional_call(model, {**params, w_name: w, b_name: b}, (x,))
        return ((out - y) ** 2).mean()

    return torch.autograd.functional.hessian(loss_of, flat0, vectorize=True).numpy()


def bnp_matrix(bnp: BNP, layer: nn.Module, n_out: int) -> np.ndarray:
    """P of eq. (15) (times 1/q) for [vec(W), b] ordering: [n, n] float64."""
    state = next(s for s in bnp.states if s.layer is layer)
    mu = state.mean.double().numpy()
    inv_sigma = 1.0 / np.sqrt(bnp._var_tilde(state).double().numpy())
    n_in = mu.size
    n = n_out * n_in + n_out
    P = np.zeros((n, n))
    for i in range(n_out):
        rows = np.arange(i * n_in, (i + 1) * n_in)
        bias = n_out * n_in + i
        P[rows, rows] = inv_sigma  # w_i = D z_w
        P[bias, bias] = 1.0  # b_i = z_b - μᵀ D z_w
        P[bias, rows] = -mu * inv_sigma
    return P / math.sqrt(state.q2)


def kappa(matrix: np.ndarray, rtol: float = 1e-10) -> tuple[float, int]:
    """(max|λ| / min|λ| over |λ| > rtol max|λ|, number of eigenvalues below that)."""
    lam = np.abs(np.linalg.eigvalsh((matrix + matrix.T) / 2))
    keep = lam > rtol * lam.max()
    return float(lam[keep].max() / lam[keep].min()), int((~keep).sum())


def run(methods=METHODS, steps=(0, 100, 500), size=64, freqs=4, width=100, batch=512, lr=1e-3,
        layer_name="output", seed=0, unit: int | None = None, output_too: bool = True) -> list[dict]:
    """Train each method and measure κ at ``steps``; returns one dict per (method, step)."""
    torch.set_default_dtype(torch.float64)
    try:
        feats, rgb = photo_data(size, freqs)
        gen = torch.Generator().manual_seed(seed)
        probe = torch.randperm(feats.shape[0], generator=gen)[:batch]
        x_probe, y_probe = feats[probe], rgb[probe]
        torch.manual_seed(seed)
        init = MLP(feats.shape[1], width, 3, "none").state_dict()
        rows = []
        for method in methods:
            model = MLP(feats.shape[1], width, 3, "none" if method == "bnp" else method, output_too)
            state = dict(init)
            if method == "wn":  # same initial function: v = W, g = ||W_j||
                for prefix in ("hidden.0", "hidden.1", "output")[:3 if output_too else 2]:
                    w = state.pop(f"{prefix}.weight")
                    state[f"{prefix}.parametrizations.weight.original1"] = w
                    state[f"{prefix}.parametrizations.weight.original0"] = w.norm(dim=1, keepdim=True)
            model.load_state_dict(state)
            layer = model.get_submodule(layer_name)
            bnp = BNP(model) if method == "bnp" else None
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            batch_gen = torch.Generator().manual_seed(seed + 1)
            done = 0
            for target in sorted(steps):
                while done < target:
                    idx = torch.randint(0, feats.shape[0], (batch,), generator=batch_gen)
                    loss = ((model(feats[idx]) - rgb[idx]) ** 2).mean()
                    opt.zero_grad()
                    loss.backward()
                    if bnp is not None:
                        bnp.precondition()
                    opt.step()
                    done += 1
                hess = layer_hessian(model, layer, x_probe, y_probe, unit)
                if bnp is not None:  # BNP's running statistics as its last step used them
                    P = bnp_matrix(bnp, layer, layer.out_features if unit is None else 1)
                    hess = P.T @ hess @ P
                k_h, dropped = kappa(hess)
                k_w, k_ew = condition_number(layer)
                kappas = {name: condition_number(m) for name, m in model.named_modules()
                          if isinstance(m, ConditionedLinear)}
                with torch.no_grad():
                    probe_loss = float(((model(x_probe) - y_probe) ** 2).mean())
                rows.append({"method": method, "step": target, "kappa_hessian": k_h, "dropped": dropped,
                             "kappa_W": k_w, "kappa_EW": k_ew, "loss": probe_loss, "n": hess.shape[0],
                             "kappa_layers": kappas})
        return rows
    finally:
        torch.set_default_dtype(torch.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--steps", nargs="+", type=int, default=[0, 100, 500])
    parser.add_argument("--size", type=int, default=64, help="photo side in pixels after resizing")
    parser.add_argument("--freqs", type=int, default=4, help="positional-encoding octaves")
    parser.add_argument("--width", type=int, default=100)
    parser.add_argument("--batch", type=int, default=512, help="pixels per mini-batch (and in the Hessian)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--layer", default="output", help="output, hidden.0 or hidden.1")
    parser.add_argument("--unit", type=int, default=None,
                        help="Hessian of this output unit's [weights, bias] only (default: the whole layer)")
    parser.add_argument("--plain_output", action="store_true", help="leave the output layer unconditioned")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = run(args.methods, args.steps, args.size, args.freqs, args.width, args.batch, args.lr, args.layer, args.seed,
               args.unit, not args.plain_output)
    print(f"astronaut {args.size}x{args.size}, γ with {args.freqs} octaves, MLP {args.width}-{args.width}-3, "
          f"batch {args.batch}, Adam lr {args.lr}, output layer {'plain' if args.plain_output else 'conditioned'}; "
          f"Hessian of layer '{args.layer}'{'' if args.unit is None else f' unit {args.unit}'} ({rows[0]['n']} parameters); "
          f"κ(W), κ(EW) of that layer")
    print(f"{'method':8s}{'step':>6s}{'κ(Hessian)':>14s}{'dropped':>9s}{'κ(W)':>10s}{'κ(EW)':>10s}{'MSE':>10s}")
    for r in rows:
        print(f"{r['method']:8s}{r['step']:6d}{r['kappa_hessian']:14.4g}{r['dropped']:9d}"
              f"{r['kappa_W']:10.4g}{r['kappa_EW']:10.4g}{r['loss']:10.4g}")


if __name__ == "__main__":
    main()
