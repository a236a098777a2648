"""Volume rendering: samples along rays → rgb, depth, acc (pure torch, CPU or GPU)."""

from .sampling import sample_pdf, stratified_samples
from .volume import RgbSigmaFn, composite, render_image, render_rays

__all__ = ["stratified_samples", "sample_pdf", "composite", "render_rays", "render_image", "RgbSigmaFn"]
