"""The estimators by name: ``--sampler NAME`` is ``ESTIMATORS[NAME]`` (``build.build_renderer``).

A new sampler is one module with an ``Estimator`` subclass (``estimator.py``: ``sample`` and,
if it keeps state, ``update``) and one line here; docs/api.md shows one. Nothing outside this
table asks which estimator a run has: what one needs (networks of its own, a checkpoint state,
a draft copy, a batch sized by samples) it says through the ``Estimator`` methods.
The names are also the choices of ``--sampler`` (``enerf.config.nerf.SamplerName``, which
tests/unit/test_estimator_registry.py keeps equal to this table's keys).
"""

from __future__ import annotations

from ..config import RenderConfig
from ..errors import ConfigError
from .estimator import Estimator
from .grid_estimator import TorchGridEstimator
from .hierarchical import HierarchicalEstimator
from .nerfacc_backend import AutoGridEstimator, NerfaccEstimator
from .proposal import ProposalEstimator

__all__ = ["ESTIMATORS", "estimator_class", "check_sampler_options"]

ESTIMATORS: dict[str, type[Estimator]] = {
    "auto": AutoGridEstimator,  # nerfacc where it runs, else torch_grid
    "nerfacc": NerfaccEstimator,  # occupancy-grid marching through nerfacc (CUDA)
    "torch_grid": TorchGridEstimator,  # occupancy-grid marching in plain torch
    "hierarchical": HierarchicalEstimator,  # NeRF's stratified (+ importance) samples
    "proposal": ProposalEstimator,  # nerfacto's proposal networks, mip-NeRF 360's losses
}


def estimator_class(name: str) -> type[Estimator]:
    """The estimator class ``--sampler name`` names (``auto`` not yet resolved).

    Raises:
        ConfigError: an unknown name.
    """
    if name not in ESTIMATORS:
        raise ConfigError(f"sampler {name!r} is not one of {', '.join(ESTIMATORS)}", ("sampler",))
    return ESTIMATORS[name]


def check_sampler_options(cfg: RenderConfig) -> None:
    """A ConfigError (one line) for options of ``cfg`` its sampler cannot honour (``Estimator.check``);
    ``build_fields`` and ``build_renderer`` call it, so a run refuses them before it writes anything."""
    estimator_class(cfg.sampler).check(cfg)
