"""The NeRF MLP (Mildenhall et al.; nerf-pytorch's ``NeRF`` class) built from conditioned layers.

Layers, in order (the names ``conditioned_layers`` and ``layer_names()`` use)::

    trunk.0 .. trunk.{D-1}   D layers of width W with ReLU; trunk.0 reads the encoded
                             position, and after trunk.s for every s in ``skips`` the encoded
                             position is concatenated in front: [gamma(x), h] (so trunk.{s+1}
                             has W + in_ch inputs)
    density_head             W -> 1, ReLU-activated density    (nerf-pytorch alpha_linear)
    feature                  W -> W, no activation              (feature_linear)
    view.0                   [feature, gamma(d)] -> view_width, ReLU   (views_linears[0])
    rgb_head                 view_width -> 3, sigmoid           (rgb_linear)
    output                   W -> 4 (rgb, density), only when ``use_viewdirs`` is False

``conditioned_layers`` picks which layers get ``conditioning``; the rest are plain:
``hidden`` (default: the trunk, i.e. the paper's 8 hidden layers), ``all``, ``none``, or a
comma-separated list of layer names (which may also contain ``hidden``).

Why ``hidden`` is the default: equilibration degenerates on layers with a single unit on one
side. Under ``row`` a layer with a single output (``density_head``: the paper's W is W x 1)
becomes sign(W) and loses its scale; under ``col`` a layer with a single input does.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..config import FieldConfig
from ..nn.contraction import CONTRACTED_BOX, Contraction
from ..nn.encoding import PositionalEncoding
from ..nn.mlp import ConditionedMLP, MLPField, active_skips, skip_trunk
from ..nn.triplane import TriPlaneEncoding

__all__ = ["NeRFField"]


class NeRFField(MLPField):
    """Radiance field: position (+ view direction) -> (rgb, density), nerf-pytorch architecture.

    Args:
        cfg: the network (``enerf.config.FieldConfig``, the home of every default and check):
            trunk depth and width, ``skips`` (trunk indices after which the encoded position is
            re-read; >= netdepth are ignored, as in nerf-pytorch), the position ``encoding``
            (``frequency``: NeRF's sinusoids of ``multires`` frequencies; ``triplane``: a learned
            TensoRF VM feature volume, ``enerf.nn.triplane``), the scene ``contraction`` in front
            of it (``enerf.nn.contraction``; the triplane then covers [-2, 2]^3), ``use_viewdirs`` and
            ``view_width``, and the weight conditioning (``conditioning``,
            ``conditioned_layers``, ...; see ``enerf.nn.conditioning``).
    """

    def __init__(self, cfg: FieldConfig = FieldConfig()) -> None:
        super().__init__()
        self.cfg = cfg
        self.skips = active_skips(cfg.skips, cfg.netdepth)
        self.use_viewdirs = bool(cfg.use_viewdirs)
        # Unbounded scenes: positions are contracted into [-2, 2]^3 first, the triplane's box.
        self.contraction = Contraction(cfg.contraction) if cfg.contraction != "none" else None
        box = CONTRACTED_BOX if self.contraction is not None else cfg.grid_aabb
        self.pos_encoding = (PositionalEncoding(cfg.multires) if cfg.encoding == "frequency" else
                             TriPlaneEncoding(cfg.grid_resolutions, cfg.grid_components, box))
        self.dir_encoding = PositionalEncoding(cfg.multires_views)
        in_ch, dir_ch, width = self.pos_encoding.out_dim, self.dir_encoding.out_dim, cfg.netwidth

        if self.use_viewdirs:
            heads = {"density_head": (width, 1), "feature": (width, width),
                     "view.0": (width + dir_ch, cfg.view_width), "rgb_head": (cfg.view_width, 3)}
        else:
            heads = {"output": (width, 4)}
        mlp = ConditionedMLP("trunk", in_ch, cfg.netdepth, width, self.skips, heads, cfg.conditioning,
                             cfg.conditioned_layers, cfg.init_weights,
                             detach_conditioner=cfg.detach_conditioner, passes=cfg.conditioning_passes)
        # Created in this order (seeded initialisation), under these names (checkpoints).
        self.trunk = mlp.trunk()
        if self.use_viewdirs:
            self.density_head = mlp.layer("density_head")
            self.feature = mlp.layer("feature")
            self.view = nn.ModuleList([mlp.layer("view.0")])
            self.rgb_head = mlp.layer("rgb_head")
        else:
            self.output = mlp.layer("output")

    def _trunk(self, x: Tensor) -> Tensor:
        """x: Tensor  # [..., 3] -> h: Tensor  # [..., netwidth] (x contracted first, with ``contraction``)."""
        if self.contraction is not None:
            x = self.contraction(x)
        relu = torch.relu if torch.is_grad_enabled() else torch.relu_  # in place when nothing needs the input
        return skip_trunk(self.pos_encoding(x), self.trunk, relu, self.skips)

    @staticmethod
    def _activate(raw: Tensor, noise_std: float) -> Tensor:
        """Density: relu(raw + N(0, noise_std^2)) (nerf-pytorch raw2outputs with raw_noise_std)."""
        if noise_std > 0:
            raw = raw + torch.randn_like(raw) * noise_std
        return torch.relu(raw)

    def _raw_density_of(self, h: Tensor) -> Tensor:
        """h: Tensor  # [..., netwidth] the trunk's output -> Tensor  # [...] pre-activation density."""
        return self.density_head(h)[..., 0] if self.use_viewdirs else self.output(h)[..., 3]

    def _raw_density(self, x: Tensor) -> Tensor:
        return self._raw_density_of(self._trunk(x))

    def mean_density(self, x: Tensor, noise_std: float = 0.0) -> Tensor:
        """The density training renders on average: E[relu(raw + N(0, s^2))], s = ``noise_std``.

        = s phi(raw / s) + raw Phi(raw / s) (phi, Phi: the standard normal pdf and cdf), always
        > 0 for s > 0; relu(raw) for s = 0. x: Tensor  # [..., 3] -> Tensor  # [...].
        """
        raw = self._raw_density(x)
        if noise_std <= 0:
            return torch.relu(raw)
        z = raw / noise_std
        pdf = torch.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        return noise_std * pdf + raw * torch.special.ndtr(z)

    def densities(self, x: Tensor) -> list[Tensor]:
        """[density: Tensor  # [...]] at x: Tensor  # [..., 3], with gradients: the densities this field
        has (``ProposalNetworks.densities`` has one a level; ``enerf.train.visibility`` penalises them)."""
        return [self.mean_density(x)]

    def density(self, x: Tensor, noise_std: float = 0.0) -> tuple[Tensor, Tensor]:
        """Density, and the features colour is read from (``color``), so that colour can be
        computed at a subset of the points. x: Tensor  # [..., 3] -> (sigma: Tensor  # [...] >= 0,
        h: Tensor  # [..., netwidth] the trunk's output); ``noise_std``: N(0, s^2) noise on the
        pre-activation density (nerf-pytorch's ``raw_noise_std``, while training)."""
        h = self._trunk(x)
        return self._activate(self._raw_density_of(h), noise_std), h

    def forward(self, x: Tensor, dirs: Tensor, noise_std: float = 0.0) -> tuple[Tensor, Tensor]:
        """x: Tensor  # [..., 3], dirs: Tensor  # [..., 3] (unit; unused without use_viewdirs)
        -> (rgb: Tensor  # [..., 3] in [0, 1], sigma: Tensor  # [...] >= 0): ``density`` then ``color``."""
        sigma, h = self.density(x, noise_std)
        return self.color(h, dirs), sigma

    def color(self, h: Tensor, dirs: Tensor) -> Tensor:
        """h: Tensor  # [..., netwidth] (``density``), dirs: Tensor  # [..., 3]
        -> rgb: Tensor  # [..., 3] in [0, 1]."""
        if not self.use_viewdirs:
            return torch.sigmoid(self.output(h)[..., :3])
        v = torch.cat([self.feature(h), self.dir_encoding(dirs)], dim=-1)
        return torch.sigmoid(self.rgb_head(torch.relu(self.view[0](v))))
