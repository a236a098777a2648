"""benchmarks.worst_views' figures against independent computations (scipy's Laplacian, closed forms)."""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from benchmarks.worst_views import diagnose, sharpness


def test_sharpness_is_the_variance_of_scipys_laplacian_inside_the_border():
    image = np.random.default_rng(0).random((20, 30, 3))
    assert np.isclose(sharpness(image), ndimage.laplace(image.mean(-1))[1:-1, 1:-1].var())


def test_an_exposure_change_is_undone_by_the_affine_fit():
    """A colour matrix and offset applied to the photo: the fit takes it out (PSNR far above the raw one)."""
    photo = np.random.default_rng(1).random((16, 16, 3)) * 0.6 + 0.2
    mix = np.array([[0.9, 0.05, 0.0], [0.0, 1.1, 0.02], [0.03, 0.0, 1.0]])
    shifted = photo @ mix.T + np.array([0.06, -0.05, 0.04])
    d = diagnose(photo, photo, shifted, np.ones((16, 16)), background=np.zeros(3), drawn_on=np.zeros(3))
    raw = -10 * np.log10(((shifted - photo) ** 2).mean())
    assert raw < 30 and d["psnr_affine"] > 80


def test_a_hole_its_share_of_the_error_and_the_background_that_fills_it():
    rng = np.random.default_rng(2)
    photo = np.full((10, 10, 3), 0.5) + rng.normal(0, 0.01, (10, 10, 3))
    splats, acc = photo.copy(), np.ones((10, 10))
    splats[:, :2], acc[:, :2] = 0.0, 0.0  # a black strip the splats leave: 20 % of the pixels
    splats[5, 5] += 0.1  # and one pixel off
    d = diagnose(photo, photo, splats, acc, background=np.full(3, 0.5), drawn_on=np.zeros(3))
    hole_error = (photo[:, :2] ** 2).sum() / 3
    assert np.isclose(d["uncovered"], 0.2)
    assert np.isclose(d["uncovered_error"], hole_error / (hole_error + 0.01))
    filled = splats.copy()
    filled[:, :2] = 0.5  # composited on the background where the opacity is 0
    assert np.isclose(d["psnr_background"], -10 * np.log10(((filled - photo) ** 2).mean()))
    assert np.allclose(d["offset"], (splats - photo).reshape(-1, 3).mean(0))
