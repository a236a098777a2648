"""``condition_model``: weight conditioning for the ``nn.Linear`` / ``nn.Conv2d`` layers of any
torch model, in place; ``fold_module`` gives the plain model back.

Example (the paper's CNN placement: the first convolution and the last linear layer)::

    from enerf.nn import condition_model, fold_module
    condition_model(cnn, "row", layers=["features.0", "classifier"])
    ...                                # train as usual
    plain = fold_module(cnn)           # nn.Conv2d / nn.Linear with the conditioned weights
"""

from __future__ import annotations

from typing import Callable, Iterable

from torch import nn

from ..errors import ConfigError
from .conditioned_conv import ConditionedConv2d
from .conditioners import check_conditioning
from .conditioning import ConditionedLinear, replace_submodules

__all__ = ["condition_model", "conditioned_copy"]

LayerSelection = Iterable[str] | Callable[[str, nn.Module], bool] | None
_PLAIN = (nn.Linear, nn.Conv2d)


def conditioned_copy(layer: nn.Linear | nn.Conv2d, mode: str, eps: float = 1e-8, detach_conditioner: bool = False,
                     passes: int = 1) -> ConditionedLinear | ConditionedConv2d:
    """The conditioned layer that applies ``mode`` to ``layer``'s weight: the same geometry,
    training flag and the same ``weight`` / ``bias`` Parameter objects (``wn`` then re-parametrizes
    ``weight`` as g · v / ||v||, starting from the same values)."""
    if type(layer) is nn.Conv2d:
        new = ConditionedConv2d(layer.in_channels, layer.out_channels, layer.kernel_size, stride=layer.stride,
                                padding=layer.padding, dilation=layer.dilation, groups=layer.groups,
                                bias=layer.bias is not None, padding_mode=layer.padding_mode, device="meta")
    else:
        new = ConditionedLinear(layer.in_features, layer.out_features, bias=layer.bias is not None, device="meta")
    new.weight = layer.weight  # the meta placeholders give way to the layer's own parameters
    new.bias = layer.bias
    new.train(layer.training)
    new._set_conditioning(mode, eps, detach_conditioner, passes)
    return new


def _selected(model: nn.Module, layers: LayerSelection) -> set[int]:
    """ids of the plain ``nn.Linear`` / ``nn.Conv2d`` modules that ``layers`` picks."""
    plain = {name: m for name, m in model.named_modules() if type(m) in _PLAIN}
    if layers is None:
        return {id(m) for m in plain.values()}
    if callable(layers):
        return {id(m) for name, m in plain.items() if layers(name, m)}
    names = [layers] if isinstance(layers, str) else list(layers)
    modules = dict(model.named_modules())
    unknown = [n for n in names if n not in modules]
    if unknown:
        raise ConfigError(f"condition_model: no layer named {', '.join(unknown)}; "
                          f"nn.Linear / nn.Conv2d layers of this model: {', '.join(plain) or 'none'}")
    for name in names:
        if type(modules[name]) not in _PLAIN:
            raise ConfigError(
                f"condition_model: {name} is a {type(modules[name]).__name__}, not a plain nn.Linear / nn.Conv2d "
                "(already conditioned layers are folded back with fold_module; nn.MultiheadAttention reads its "
                "projection weights directly, so write attention with nn.Linear layers to condition it)")
    return {id(modules[n]) for n in names}


def condition_model(model: nn.Module, mode: str, layers: LayerSelection = None, *, eps: float = 1e-8,
                    detach_conditioner: bool = False, passes: int = 1) -> list[str]:
    """Replace the selected ``nn.Linear`` / ``nn.Conv2d`` layers of ``model`` by conditioned ones,
    in place, and leave every other module alone.

    Each replacement (``conditioned_copy``) keeps the layer's Parameter objects, so an optimizer
    built before still updates them, except under ``wn`` (new g, v); forward hooks on the old
    layers (e.g. ``enerf.optim.BNP``'s) are not carried over: build BNP after this call.
    ``fold_module(model)`` returns a copy with plain layers that compute the same function.

    Args:
        model: any torch module (the model itself cannot be a single layer: wrap it).
        mode: a key of ``enerf.nn.CONDITIONERS`` (``row`` is the paper's E).
        layers: None (every plain ``nn.Linear`` / ``nn.Conv2d``), module names as in
            ``model.named_modules()``, or a predicate ``(name, module) -> bool`` asked about each
            plain ``nn.Linear`` / ``nn.Conv2d`` (subclasses such as ``nn.MultiheadAttention``'s
            ``out_proj``, and conditioned layers, are never candidates).
        eps, detach_conditioner, passes: as ``ConditionedLinear``.

    Returns:
        The names of the converted layers.

    Raises:
        ConfigError: an unknown mode or name, or a named module that is not a plain layer.
    """
    check_conditioning(mode, eps, detach_conditioner, passes)
    chosen = _selected(model, layers)
    return replace_submodules(
        model,
        lambda name, m: conditioned_copy(m, mode, eps, detach_conditioner, passes) if id(m) in chosen else None,
    )
