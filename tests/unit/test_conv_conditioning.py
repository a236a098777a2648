"""Conditioning beyond MLPs: ``ConditionedConv2d`` and ``condition_model`` against numpy
references, BNP's conv step against the BN step (Prop. 7) on the digits benchmark's layer shapes,
and studies/classify_digits.py's models and training step against an independent computation."""

from __future__ import annotations

import copy
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from enerf.errors import ConfigError
from enerf.nn import ConditionedConv2d, ConditionedLinear, condition_model, condition_number, fold_module
from enerf.optim import BNP

ROOT = Path(__file__).resolve().parents[2]
MODES = ["none", "row", "col", "rowcol", "wn", "ws"]


def _tool():
    from studies import classify_digits

    return classify_digits


def conditioned_matrix(w: np.ndarray, mode: str) -> np.ndarray:
    """numpy reference of the conditioned matrix [out, in] (torch layout; wn at initialisation,
    g = ||v||, is v itself)."""
    if mode == "row":  # unit columns (one per input)
        return w / np.linalg.norm(w, axis=0, keepdims=True)
    if mode == "col":  # unit rows (one per output)
        return w / np.linalg.norm(w, axis=1, keepdims=True)
    if mode == "rowcol":
        return conditioned_matrix(conditioned_matrix(w, "row"), "col")
    if mode == "ws":
        return (w - w.mean(axis=1, keepdims=True)) / np.sqrt(w.var(axis=1, keepdims=True) + 1e-8)
    return w


def kappa(a: np.ndarray) -> float:
    s = np.linalg.svd(a, compute_uv=False)
    return s[0] / s[-1]


@pytest.mark.parametrize("mode", MODES)
def test_conv_kernel_is_conditioned_as_out_by_in_k_k_and_fold_is_equivalent(mode):
    """E w equals the numpy conditioning of the kernel reshaped to [out, in/groups · k · k]; the
    layer equals conv2d with that kernel and its fold() to 1e-6 (stride, padding, groups)."""
    torch.manual_seed(0)
    conv = ConditionedConv2d(4, 6, 3, stride=2, padding=1, groups=2, conditioning=mode)
    with torch.no_grad():  # a badly column-scaled kernel, so every mode changes it
        conv.stored_weight().mul_(torch.logspace(-1, 1, 18).view(1, 2, 3, 3))
    w = conv.stored_weight().detach().double().numpy()
    ref = conditioned_matrix(w.reshape(6, -1), mode).reshape(w.shape)
    if mode == "wn":  # g · v / ||v|| per output channel, g kept from before the scaling
        g = conv.parametrizations.weight.original0.detach().double().numpy()
        ref = g * conditioned_matrix(w.reshape(6, -1), "col").reshape(w.shape)
    np.testing.assert_allclose(conv.conditioned_weight().detach().double().numpy(), ref, rtol=1e-5, atol=1e-6)
    x = torch.randn(3, 4, 9, 7)
    y = conv(x)
    expected = nn.functional.conv2d(x, torch.from_numpy(ref).float(), conv.bias, stride=2, padding=1, groups=2)
    torch.testing.assert_close(y, expected, rtol=0, atol=1e-5)
    folded = conv.fold()
    assert type(folded) is nn.Conv2d and folded.groups == 2 and folded.stride == (2, 2)
    torch.testing.assert_close(folded(x), y, rtol=0, atol=1e-6)


@pytest.mark.parametrize("mode", ["row", "col", "rowcol", "ws"])
def test_one_by_one_conv_equals_the_conditioned_linear_on_channels(mode):
    """A 1x1 convolution is a linear layer over channels: the conditioned conv must give what
    ConditionedLinear gives on every pixel, gradients included (the layouts agree)."""
    torch.manual_seed(1)
    conv = ConditionedConv2d(5, 3, 1, conditioning=mode).double()
    lin = ConditionedLinear(5, 3, conditioning=mode).double()
    lin.load_state_dict({"weight": conv.weight.detach()[:, :, 0, 0], "bias": conv.bias.detach()})
    x = torch.randn(2, 5, 4, 4, dtype=torch.float64)
    out = conv(x)
    torch.testing.assert_close(out, lin(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2), rtol=1e-12, atol=1e-12)
    (out ** 2).sum().backward()
    (lin(x.permute(0, 2, 3, 1)) ** 2).sum().backward()
    torch.testing.assert_close(conv.weight.grad[:, :, 0, 0], lin.weight.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["none", "row", "wn"])
def test_kappa_of_a_conv_layer_is_that_of_the_reshaped_kernel(mode):
    torch.manual_seed(2)
    conv = ConditionedConv2d(3, 8, 3, conditioning=mode).double()
    with torch.no_grad():
        conv.stored_weight().mul_(torch.logspace(-1, 1, 27, dtype=torch.float64).view(1, 3, 3, 3))
    w = conv.stored_weight().detach().numpy().reshape(8, 27)
    k_w, k_ew = condition_number(conv)
    assert k_w == pytest.approx(kappa(w), rel=1e-9)
    assert k_ew == pytest.approx(kappa(conv.conditioned_weight().detach().numpy().reshape(8, 27)), rel=1e-9)
    if mode == "row":
        assert k_ew == pytest.approx(kappa(conditioned_matrix(w, "row")), rel=1e-9) and k_ew < k_w
    plain = nn.Conv2d(3, 8, 3).double()
    assert condition_number(plain) == pytest.approx((kappa(plain.weight.detach().numpy().reshape(8, 27)),) * 2)


class _Net(nn.Module):
    """Conv and linear layers at several depths, plus a LayerNorm that must stay untouched."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3))
        self.norm = nn.LayerNorm(16)
        self.head = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))

    def forward(self, x):
        return self.head(self.norm(self.features(x).flatten(1)))


def _manual(layer: nn.Module, mode: str) -> nn.Module:
    """The conditioned layer built by hand: constructor, then the plain layer's values."""
    if isinstance(layer, nn.Conv2d):
        new = ConditionedConv2d(layer.in_channels, layer.out_channels, layer.kernel_size, padding=layer.padding,
                                conditioning=mode)
    else:
        new = ConditionedLinear(layer.in_features, layer.out_features, conditioning=mode)
    with torch.no_grad():
        if mode == "wn":  # g · v / ||v|| with v = W, g = ||W|| per output
            new.parametrizations.weight.original1.copy_(layer.weight)
            new.parametrizations.weight.original0.copy_(
                torch.linalg.vector_norm(layer.weight.flatten(1), dim=1).view_as(new.parametrizations.weight.original0))
        else:
            new.weight.copy_(layer.weight)
        new.bias.copy_(layer.bias)
    return new


@pytest.mark.parametrize("mode", ["row", "ws", "wn"])
def test_condition_model_converts_only_the_selection_and_equals_manual_conversion(mode):
    torch.manual_seed(3)
    net = _Net()
    x = torch.randn(5, 2, 4, 4)
    manual = copy.deepcopy(net)
    manual.features[0] = _manual(manual.features[0], mode)
    manual.head[2] = _manual(manual.head[2], mode)
    original = copy.deepcopy(net)
    untouched = {name: m for name, m in net.named_modules() if name not in ("features.0", "head.2")}
    first_weight = net.features[0].weight

    names = condition_model(net, mode, layers=["features.0", "head.2"])

    assert names == ["features.0", "head.2"]
    # (under wn torch's parametrization subclasses them: ParametrizedConditionedConv2d)
    assert isinstance(net.features[0], ConditionedConv2d) and isinstance(net.head[2], ConditionedLinear)
    assert net.features[0].conditioning == mode and net.head[2].conditioning == mode
    for name, module in net.named_modules():
        if name in untouched:
            assert module is untouched[name]  # the very same objects, not copies
    assert (net.features[0].weight is first_weight) == (mode != "wn")  # optimizers keep their parameters
    torch.testing.assert_close(net(x), manual(x), rtol=0, atol=1e-6)
    # wn starts as the plain layer (g = ||v||); row and ws change the function
    assert torch.allclose(net(x), original(x), rtol=0, atol=1e-6) == (mode == "wn")

    folded = fold_module(net)
    assert [type(m) for m in folded.modules() if isinstance(m, (nn.Linear, nn.Conv2d))] == \
        [nn.Conv2d, nn.Conv2d, nn.Linear, nn.Linear]
    torch.testing.assert_close(folded(x), net(x), rtol=0, atol=1e-6)
    assert set(folded.state_dict()) == set(_Net().state_dict())


def test_condition_model_with_a_predicate_and_refusals():
    net = _Net()
    linear_weights = [m.weight.detach().clone() for m in net.head if isinstance(m, nn.Linear)]
    names = condition_model(net, "row", layers=lambda name, m: isinstance(m, nn.Conv2d))
    assert names == ["features.0", "features.2"]
    assert [type(m) for m in net.head if isinstance(m, nn.Linear)] == [nn.Linear, nn.Linear]
    for before, m in zip(linear_weights, [m for m in net.head if isinstance(m, nn.Linear)]):
        torch.testing.assert_close(m.weight, before, rtol=0, atol=0)
    # conditioned layers are no candidates of a second call
    assert condition_model(net, "ws") == ["head.0", "head.2"]
    with pytest.raises(ConfigError, match="already conditioned"):
        condition_model(net, "row", layers=["features.0"])
    with pytest.raises(ConfigError, match="no layer named features.9"):
        condition_model(_Net(), "row", layers=["features.9"])
    with pytest.raises(ConfigError, match="is not one of"):
        condition_model(_Net(), "nope")
    attention = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
    with pytest.raises(ConfigError, match="MultiheadAttention"):
        condition_model(attention, "row", layers=["self_attn.out_proj"])


def test_docs_transformer_block_example_runs_and_folds():
    """The LN + E example in docs/api.md, executed as written."""
    text = (ROOT / "docs" / "api.md").read_text()
    code = next(block for block in re.findall(r"```python\n(.*?)```", text, re.S) if "class Block" in block)
    scope: dict = {}
    exec(compile(code, "api.md", "exec"), scope)
    block = scope["block"]
    assert {type(m) for m in block.modules() if isinstance(m, nn.Linear)} == {ConditionedLinear}
    assert sum(isinstance(m, nn.LayerNorm) for m in block.modules()) == 2


# -- BNP on the benchmark CNN's layers (Proposition 7 of the BNP paper) -------------------------


def _benchmark_layer_inputs() -> list[tuple[nn.Module, torch.Tensor]]:
    """Each conv / linear layer of studies/classify_digits.py's CNN with its input on a batch of 64
    images in [0, 1] (the benchmark's batch size and image range), in float64."""
    torch.manual_seed(4)
    cnn = _tool().build_cnn().double()
    seen = []
    for m in cnn.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            m.register_forward_pre_hook(lambda mod, args: seen.append((mod, args[0].detach().clone())))
    cnn(torch.rand(64, 1, 8, 8, dtype=torch.float64))
    return seen


@pytest.mark.parametrize("index", [0, 1, 2])
def test_bnp_step_equals_the_bn_step_on_the_benchmark_layers(index):
    """One SGD step of BNP (ρ = 0, ε₁ = 0, ε₂ = BN's ε) on the plain layer = one SGD step
    (learning rate / q²) of torch's BatchNorm (no affine, batch statistics) followed by the layer,
    mapped back with Ŵ = W diag(1/σ_H), b̂ = b - W diag(μ_H / σ_H), σ_H² = var + ε."""
    layer, h = _benchmark_layer_inputs()[index]
    conv = isinstance(layer, nn.Conv2d)
    n, lr, eps = h.shape[0], 0.5, 1e-5
    if conv:  # q² = max(c k² / N, sqrt(r s)) (Algorithm 3), statistics per channel over N, r, s
        q2 = max(layer.weight[0].numel() / n, math.sqrt(h.shape[2] * h.shape[3]))
        mu, var = h.mean(dim=(0, 2, 3)), h.var(dim=(0, 2, 3), unbiased=False)
    else:  # q² = max(n_in / N, 1) (Algorithm 2)
        q2 = max(h.shape[1] / n, 1.0)
        mu, var = h.mean(0), h.var(0, unbiased=False)
    keep = var > 1e-12  # inputs the ReLU left constant cannot be normalized: leave them out
    h, mu, sigma = h[:, keep], mu[keep], (var[keep] + eps).sqrt()
    per_input = (lambda t: t.view(1, -1, 1, 1)) if conv else (lambda t: t.view(1, -1))
    w_hat, b_hat = layer.weight.detach()[:, keep].clone(), layer.bias.detach().clone()
    op = nn.functional.conv2d if conv else nn.functional.linear
    torch.manual_seed(5)
    readout = torch.randn(op(h, w_hat, b_hat)[0].numel(), dtype=torch.float64)

    def loss_of(out):
        return (torch.relu(out).flatten(1) @ readout - 1.0).pow(2).mean()

    # BN side: torch's BatchNorm (batch statistics, no affine) before the layer W = Ŵ diag(σ), b = b̂ + Ŵ μ
    norm = (nn.BatchNorm2d if conv else nn.BatchNorm1d)(h.shape[1], eps=eps, affine=False,
                                                        track_running_stats=False).double()
    w_bn = (w_hat * per_input(sigma)).requires_grad_(True)
    b_bn = (b_hat + (w_hat * per_input(mu)).flatten(1).sum(1)).requires_grad_(True)
    loss_of(op(norm(h), w_bn, b_bn)).backward()
    with torch.no_grad():
        w_bn -= lr / q2 * w_bn.grad
        b_bn -= lr / q2 * b_bn.grad
    w_back = w_bn.detach() / per_input(sigma)
    b_back = b_bn.detach() - (w_back * per_input(mu)).flatten(1).sum(1)
    # BNP side: the plain layer on h itself
    plain = (nn.Conv2d(w_hat.shape[1], w_hat.shape[0], layer.kernel_size) if conv
             else nn.Linear(w_hat.shape[1], w_hat.shape[0])).double()
    with torch.no_grad():
        plain.weight.copy_(w_hat)
        plain.bias.copy_(b_hat)
    bnp = BNP(plain, rho=0.0, eps1=0.0, eps2=eps)
    sgd = torch.optim.SGD(plain.parameters(), lr=lr)
    loss_of(plain(h)).backward()
    bnp.precondition()
    sgd.step()
    assert bnp.states[0].q2 == pytest.approx(q2)
    torch.testing.assert_close(plain.weight.detach(), w_back, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(plain.bias.detach(), b_back, rtol=1e-9, atol=1e-10)
    assert (w_back - w_hat).abs().max() > 1e-4  # the step moved the weights


# -- studies/classify_digits.py -------------------------------------------------------------------


def _equilibrated_plain(tool, arch: str, seed: int, names) -> nn.Module:
    """The plain benchmark model under ``seed`` with numpy row equilibration written into the
    weights of ``names``: what the conditioned model computes at its first step."""
    plain = tool.make_model(arch, "BN" if arch == "cnn" else "LN", seed)
    with torch.no_grad():
        for name in names:
            layer = plain.get_submodule(name)
            w = layer.weight.detach().double().numpy()
            ref = conditioned_matrix(w.reshape(w.shape[0], -1), "row").reshape(w.shape)
            layer.weight.copy_(torch.from_numpy(ref))
    return plain


def _numpy_cross_entropy(logits: np.ndarray, y: np.ndarray) -> float:
    shifted = logits - logits.max(1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


@pytest.mark.parametrize("arch, norm", [("cnn", "BN+E"), ("vit", "LN+E")])
def test_benchmark_models_and_training_step(arch, norm):
    """The conditioned layers are the paper's placement (CNN: conv1 and fc; ViT: every linear
    layer); the first step's loss equals numpy's cross-entropy of the plain model carrying
    numpy-equilibrated weights; steps on one batch lower the loss."""
    pytest.importorskip("sklearn")
    tool = _tool()
    torch.set_num_threads(1)
    from sklearn.datasets import load_digits

    x, y, _, y_test = tool.load_digits_split(0)
    per_class = np.bincount(load_digits().target)
    assert len(y) + len(y_test) == per_class.sum()  # stratified: each class split 3 : 1 to within a sample
    assert np.abs(np.bincount(y.numpy()) - 0.75 * per_class).max() <= 1
    x, y = x[:64], y[:64]
    model = tool.make_model(arch, norm, seed=0)
    conditioned = [name for name, m in model.named_modules() if isinstance(m, (ConditionedLinear, ConditionedConv2d))]
    plain_layers = [name for name, m in tool.make_model(arch, "BN" if arch == "cnn" else "LN", 0).named_modules()
                    if isinstance(m, (nn.Linear, nn.Conv2d))]
    assert conditioned == (["conv1", "fc"] if arch == "cnn" else plain_layers)
    reference = _equilibrated_plain(tool, arch, 0, conditioned).train()
    with torch.no_grad():
        expected = _numpy_cross_entropy(reference(x).double().numpy(), y.numpy())
    optimizer = tool.make_optimizer(arch, model, lr=0.05 if arch == "cnn" else 3e-3)
    bnp = BNP(model) if arch == "cnn" else None
    losses = [tool.train_step(model, optimizer, bnp, x, y) for _ in range(8)]
    assert losses[0] == pytest.approx(expected, rel=1e-5)
    assert losses[-1] < 0.8 * losses[0]


def test_benchmark_table_statistics():
    """summarize / to_markdown on runs with known accuracies: mean ± sample std, the paired
    difference and its t interval (numpy / scipy), the step-time ratio."""
    from scipy import stats

    tool = _tool()
    rng = np.random.default_rng(6)
    acc = {"BN": rng.uniform(0.9, 1.0, 5), "BN+E": rng.uniform(0.9, 1.0, 5)}
    runs = [{"arch": "cnn", "lr": 0.05, "method": m, "seed": s, "test_acc": float(acc[m][s]), "train_loss": 0.1 * s}
            for m in acc for s in range(5)]
    rows = tool.summarize(runs, {("cnn", "BN"): 2.0, ("cnn", "BN+E"): 3.0})
    d = 100 * (acc["BN+E"] - acc["BN"])
    half = stats.t.ppf(0.975, 4) * d.std(ddof=1) / np.sqrt(5)
    assert rows[1]["delta"] == pytest.approx(d.mean())
    assert rows[1]["delta_ci95"] == pytest.approx((d.mean() - half, d.mean() + half))
    assert rows[1]["time_ratio"] == pytest.approx(1.5)
    md = tool.to_markdown(rows, dict(seeds=list(range(5)), epochs_cnn=1, epochs_vit=1, batch=64, n_train=1, n_test=1,
                                     threads=1, timing_rounds=5))
    a = 100 * acc["BN+E"]
    assert f"| CNN | 0.05 | BN+E | {a.mean():.2f} ± {a.std(ddof=1):.2f} | {d.mean():+.2f} [" in md
    assert "| CNN | 0.05 | BN | " in md and "| baseline |" in md


def test_benchmark_without_scikit_learn_says_what_to_install(monkeypatch, capsys, tmp_path):
    for name in ["sklearn", *(m for m in sys.modules if m.startswith("sklearn."))]:
        monkeypatch.setitem(sys.modules, name, None)  # import sklearn... -> ImportError
    assert _tool().main(["--out", str(tmp_path / "out"), "--seeds", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install -e ".[bench]"' in err[0]
    assert not (tmp_path / "out").exists()
