"""The NeRF MLP (Mildenhall et al.; nerf-pytorch's architecture) built from conditioned layers.

Layers (names used by ``conditioned_layers``)::

    trunk.0 .. trunk.{D-1}   D hidden layers of width W, ReLU; trunk.{s+1} re-reads the
                             encoded position after every s in ``skips``
    density_head             W -> 1 (ReLU-activated density)
    feature                  W -> W
    view.0                   W + encoded dirs -> view_width, ReLU
    rgb_head                 view_width -> 3 (sigmoid)
    output                   W -> 4, only when ``use_viewdirs`` is False

``conditioned_layers``: ``hidden`` (default; the trunk, i.e. the paper's 8 hidden layers),
``all``, ``none``, or a comma-separated list of layer names. The heads are left plain by
default because row equilibration turns a single-output layer (``density_head``) into
sign(W), which removes its ability to learn a scale (see ``enerf.nn.conditioning``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..config import FieldConfig
from ..errors import ConfigError
from ..nn.conditioning import ConditionedLinear
from ..nn.encoding import PositionalEncoding

__all__ = ["NeRFField"]


class NeRFField(nn.Module):
    """Radiance field: position (+ view direction) -> (rgb, density)."""

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
    ) -> None:
        super().__init__()
        self.skips = tuple(skips)
        self.use_viewdirs = use_viewdirs
        self.pos_encoding = PositionalEncoding(multires)
        self.dir_encoding = PositionalEncoding(multires_views)
        in_ch, dir_ch = self.pos_encoding.out_dim, self.dir_encoding.out_dim

        shapes: dict[str, tuple[int, int]] = {}
        for i in range(netdepth):
            fan_in = in_ch if i == 0 else netwidth + (in_ch if (i - 1) in self.skips else 0)
            shapes[f"trunk.{i}"] = (fan_in, netwidth)
        if use_viewdirs:
            shapes.update({
                "density_head": (netwidth, 1),
                "feature": (netwidth, netwidth),
                "view.0": (netwidth + dir_ch, view_width),
                "rgb_head": (view_width, 3),
            })
        else:
            shapes["output"] = (netwidth, 4)
        selected = self._select(conditioned_layers, list(shapes), netdepth)

        def make(name: str) -> ConditionedLinear:
            fan_in, fan_out = shapes[name]
            return ConditionedLinear(
                fan_in, fan_out,
                conditioning=conditioning if name in selected else "none",
                eps=conditioning_eps, detach_conditioner=detach_conditioner, passes=conditioning_passes,
            )

        self.trunk = nn.ModuleList(make(f"trunk.{i}") for i in range(netdepth))
        if use_viewdirs:
            self.density_head = make("density_head")
            self.feature = make("feature")
            self.view = nn.ModuleList([make("view.0")])
            self.rgb_head = make("rgb_head")
        else:
            self.output = make("output")

    @staticmethod
    def _select(spec: str, names: list[str], netdepth: int) -> set[str]:
        spec = spec.strip()
        if spec == "hidden":
            return {f"trunk.{i}" for i in range(netdepth)}
        if spec == "all":
            return set(names)
        if spec in ("none", ""):
            return set()
        chosen = {s.strip() for s in spec.split(",") if s.strip()}
        unknown = sorted(chosen - set(names))
        if unknown:
            raise ConfigError(
                f"--conditioned_layers names unknown layer(s) {', '.join(unknown)}; "
                f"choose hidden, all, none or from: {', '.join(names)}"
            )
        return chosen

    @classmethod
    def from_config(cls, cfg: FieldConfig) -> "NeRFField":
        return cls(
            netdepth=cfg.netdepth, netwidth=cfg.netwidth, skips=cfg.skips, multires=cfg.multires,
            multires_views=cfg.multires_views, use_viewdirs=cfg.use_viewdirs, view_width=cfg.view_width,
            conditioning=cfg.conditioning, conditioned_layers=cfg.conditioned_layers,
            detach_conditioner=cfg.detach_conditioner, conditioning_passes=cfg.conditioning_passes,
            conditioning_eps=cfg.conditioning_eps,
        )

    def layer_names(self) -> list[str]:
        return [name for name, m in self.named_modules() if isinstance(m, nn.Linear)]

    def _trunk(self, x: Tensor) -> Tensor:
        """x: [..., 3] -> features [..., netwidth]."""
        encoded = self.pos_encoding(x)
        h = encoded
        for i, layer in enumerate(self.trunk):
            h = torch.relu(layer(h))
            if i in self.skips:
                h = torch.cat([encoded, h], dim=-1)
        return h

    @staticmethod
    def _activate(raw: Tensor, noise_std: float) -> Tensor:
        if noise_std > 0:
            raw = raw + torch.randn_like(raw) * noise_std
        return torch.relu(raw)

    def query_density(self, x: Tensor, density_noise_std: float = 0.0) -> Tensor:
        """x: Tensor  # [..., 3] -> sigma: Tensor  # [...], >= 0."""
        h = self._trunk(x)
        raw = self.density_head(h) if self.use_viewdirs else self.output(h)[..., 3:]
        return self._activate(raw[..., 0], density_noise_std)

    def forward(self, x: Tensor, dirs: Tensor, density_noise_std: float = 0.0) -> tuple[Tensor, Tensor]:
        """x, dirs: Tensor  # [..., 3] -> (rgb [..., 3] in [0, 1], sigma [...] >= 0)."""
        h = self._trunk(x)
        if not self.use_viewdirs:
            out = self.output(h)
            return torch.sigmoid(out[..., :3]), self._activate(out[..., 3], density_noise_std)
        sigma = self._activate(self.density_head(h)[..., 0], density_noise_std)
        v = torch.cat([self.feature(h), self.dir_encoding(dirs)], dim=-1)
        v = torch.relu(self.view[0](v))
        return torch.sigmoid(self.rgb_head(v)), sigma
