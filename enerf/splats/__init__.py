"""Gaussian splats: a trained field baked into 3D Gaussians (3DGS), rendered on a CPU or a GPU.

Data flow: ``bake`` (start the splats from the field, fit them to the training photos) -> ``Splats``
-> ``ply`` (the 3DGS PLY layout, read by SuperSplat, Spark, gsplat, viser) -> ``rasterize`` (render a
camera: pure torch on any device, gsplat on CUDA when it is installed) -> ``enerf render / eval
--splats``, ``enerf view``, ``enerf export html``.
"""

from .gaussians import SH_C0, Splats, rgb_to_sh0, sh_basis, sh_coeffs, sh_to_rgb

__all__ = ["SH_C0", "Splats", "rgb_to_sh0", "sh_basis", "sh_coeffs", "sh_to_rgb"]
