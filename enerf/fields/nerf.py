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

from ..errors import ConfigError
from ..nn.encoding import PositionalEncoding
from ..nn.mlp import ConditionedMLP, MLPField, skip_trunk, valid_skips
from ..nn.triplane import TriPlaneEncoding

__all__ = ["NeRFField"]


class NeRFField(MLPField):
    """Radiance field: position (+ view direction) -> (rgb, density), nerf-pytorch architecture.

    Args:
        netdepth, netwidth: trunk depth D and width W.
        skips: trunk indices after which the encoded position is re-read (< D - 1; indices
            >= D are ignored, as in nerf-pytorch).
        multires, multires_views: positional-encoding frequencies for positions / directions.
        encoding: how positions enter the trunk: ``frequency`` (NeRF's sinusoids, ``multires``)
            or ``triplane`` (a learned TensoRF VM feature volume, ``enerf.nn.triplane``, of
            ``grid_resolutions`` x ``grid_components`` over ``grid_aabb``).
        use_viewdirs: view-dependent colour branch; otherwise one W -> 4 output layer.
        view_width: width of the view branch (W // 2 in NeRF).
        conditioning: ``none`` | ``row`` | ``col`` | ``rowcol`` (see ``enerf.nn.conditioning``).
        conditioned_layers: ``hidden`` | ``all`` | ``none`` | comma-separated layer names.
        detach_conditioner, conditioning_passes, conditioning_eps: passed to every
            ConditionedLinear.
    """

    def __init__(
        self,
        netdepth: int = 8,
        netwidth: int = 256,
        skips: tuple[int, ...] = (4,),
        multires: int = 10,
        multires_views: int = 4,
        use_viewdirs: bool = True,
        view_width: int = 128,
        conditioning: str = "none",
        conditioned_layers: str = "hidden",
        detach_conditioner: bool = False,
        conditioning_passes: int = 1,
        conditioning_eps: float = 1e-8,
        encoding: str = "frequency",
        grid_resolutions: tuple[int, ...] = (64, 256),
        grid_components: int = 8,
        grid_aabb: tuple[float, ...] = (-1.5, -1.67, -1.0, 1.5, 1.67, 1.0),
    ) -> None:
        super().__init__()
        if netdepth < 1:
            raise ConfigError(f"--netdepth must be >= 1, got {netdepth}")
        self.skips = valid_skips(skips, netdepth)
        self.use_viewdirs = bool(use_viewdirs)
        if encoding == "frequency":
            self.pos_encoding = PositionalEncoding(multires)
        elif encoding == "triplane":
            self.pos_encoding = TriPlaneEncoding(grid_resolutions, grid_components, grid_aabb)
        else:
            raise ConfigError(f"--encoding {encoding!r} is not one of frequency, triplane")
        self.dir_encoding = PositionalEncoding(multires_views)
        in_ch, dir_ch = self.pos_encoding.out_dim, self.dir_encoding.out_dim

        if self.use_viewdirs:
            heads = {"density_head": (netwidth, 1), "feature": (netwidth, netwidth),
                     "view.0": (netwidth + dir_ch, view_width), "rgb_head": (view_width, 3)}
        else:
            heads = {"output": (netwidth, 4)}
        mlp = ConditionedMLP("trunk", in_ch, netdepth, netwidth, self.skips, heads, conditioning, conditioned_layers,
                             eps=conditioning_eps, detach_conditioner=detach_conditioner, passes=conditioning_passes)
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
        """x: Tensor  # [..., 3] -> h: Tensor  # [..., netwidth]."""
        return skip_trunk(self.pos_encoding(x), self.trunk, torch.relu, self.skips)

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

    def query_density(self, x: Tensor, density_noise_std: float = 0.0) -> Tensor:
        """x: Tensor  # [..., 3] -> sigma: Tensor  # [...], >= 0."""
        return self._activate(self._raw_density(x), density_noise_std)

    def mean_density(self, x: Tensor, density_noise_std: float = 0.0) -> Tensor:
        """The density training renders on average: E[relu(raw + N(0, s^2))], s = ``density_noise_std``.

        = s phi(raw / s) + raw Phi(raw / s) (phi, Phi: the standard normal pdf and cdf), always
        > 0 for s > 0; relu(raw) for s = 0. x: Tensor  # [..., 3] -> Tensor  # [...].
        """
        raw = self._raw_density(x)
        if density_noise_std <= 0:
            return torch.relu(raw)
        z = raw / density_noise_std
        pdf = torch.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
        return density_noise_std * pdf + raw * torch.special.ndtr(z)

    def forward(self, x: Tensor, dirs: Tensor, density_noise_std: float = 0.0) -> tuple[Tensor, Tensor]:
        """x: Tensor  # [..., 3], dirs: Tensor  # [..., 3] (unit; unused without use_viewdirs)
        -> (rgb: Tensor  # [..., 3] in [0, 1], sigma: Tensor  # [...] >= 0)."""
        if not self.use_viewdirs:  # one output layer gives both
            out = self.output(self._trunk(x))
            return torch.sigmoid(out[..., :3]), self._activate(out[..., 3], density_noise_std)
        sigma, h = self.density_and_features(x, density_noise_std)
        return self.color(h, dirs), sigma

    def density_and_features(self, x: Tensor, density_noise_std: float = 0.0) -> tuple[Tensor, Tensor]:
        """The first of two passes (the second: ``color``), so that colour can be computed at a
        subset of the points. x: Tensor  # [..., 3] -> (sigma: Tensor  # [...] >= 0,
        h: Tensor  # [..., netwidth] the trunk's output). With ``forward``'s random draws."""
        h = self._trunk(x)
        return self._activate(self._raw_density_of(h), density_noise_std), h

    def color(self, h: Tensor, dirs: Tensor) -> Tensor:
        """h: Tensor  # [..., netwidth] (``density_and_features``), dirs: Tensor  # [..., 3]
        -> rgb: Tensor  # [..., 3] in [0, 1]."""
        if not self.use_viewdirs:
            return torch.sigmoid(self.output(h)[..., :3])
        v = torch.cat([self.feature(h), self.dir_encoding(dirs)], dim=-1)
        return torch.sigmoid(self.rgb_head(torch.relu(self.view[0](v))))
