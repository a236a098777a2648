"""Rays per training step, sized for a target number of samples (nerfacc's dynamic batch).

With empty-space skipping the samples per ray fall as the occupancy grid empties, so a fixed
ray batch makes steps cheaper and noisier as training goes on. nerfacc's examples instead
rescale the batch after every step::

    n_rays = n_rays * target_sample_batch_size / n_samples_rendered

so each step renders about ``target_sample_batch_size`` samples. ``RaysPerStep`` does that and
counts network queries, so the trainer can report queries per ray.
"""

from __future__ import annotations

from ..config import RunConfig

__all__ = ["RaysPerStep", "MAX_RAY_GROWTH"]

MAX_RAY_GROWTH = 16  # the batch never exceeds this many times N_rand (a nearly empty grid)


class RaysPerStep:
    """Rays for the next step, and running totals of rays, samples and queries.

    Args:
        n_rand: rays of the first step.
        target_samples: samples per step to aim for; 0 keeps ``n_rand`` rays every step.
        max_rays: upper bound on the batch (also at most the number of training pixels).
    """

    def __init__(self, n_rand: int, target_samples: int, max_rays: int) -> None:
        self.n_rays = int(n_rand)
        self.target_samples = int(target_samples)
        self.max_rays = max(1, int(max_rays))
        self.rays = 0  # rays rendered so far
        self.samples = 0  # points rendered with gradients so far
        self.queries = 0  # all points sent to the field so far (incl. early-stop pre-passes)
        self.colour_skipped = 0  # rendered points whose colour rgb_weight_threshold skipped
        self.steps = 0

    @classmethod
    def for_run(cls, cfg: RunConfig, n_pixels: int, marches_grid: bool) -> "RaysPerStep":
        """The run's batch rule: dynamic when the estimator marches an occupancy grid
        (``marches_grid``: samples per ray vary) unless ``target_sample_batch_size`` is -1."""
        target = cfg.render.target_sample_batch_size
        if not marches_grid or target < 0:
            target = 0
        elif target == 0:
            target = cfg.train.n_rand * cfg.render.n_samples
        return cls(cfg.train.n_rand, target, min(n_pixels, MAX_RAY_GROWTH * cfg.train.n_rand))

    def record(self, n_rays: int, n_samples: int, n_queries: int, n_colour_skipped: int = 0) -> None:
        """Count one step's work and size the next step's batch."""
        self.steps += 1
        self.rays += int(n_rays)
        self.samples += int(n_samples)
        self.queries += int(n_queries)
        self.colour_skipped += int(n_colour_skipped)
        if self.target_samples > 0:
            grown = int(n_rays * self.target_samples / max(int(n_samples), 1))
            self.n_rays = min(max(grown, 1), self.max_rays)

    @property
    def queries_per_ray(self) -> float:
        return self.queries / max(self.rays, 1)

    @property
    def colour_skipped_per_ray(self) -> float:
        return self.colour_skipped / max(self.rays, 1)

    @property
    def samples_per_ray(self) -> float:
        return self.samples / max(self.rays, 1)

    @property
    def rays_per_step(self) -> float:
        return self.rays / max(self.steps, 1)

    def summary(self) -> dict:
        return {
            "queries_per_ray": self.queries_per_ray,
            "colour_skipped_per_ray": self.colour_skipped_per_ray,
            "samples_per_ray": self.samples_per_ray,
            "rays_per_step": self.rays_per_step,
        }

    def state_dict(self) -> dict:
        return {"n_rays": self.n_rays, "rays": self.rays, "samples": self.samples, "queries": self.queries,
                "colour_skipped": self.colour_skipped, "steps": self.steps}

    def load_state_dict(self, state: dict | None) -> None:
        if not state:
            return
        for key in ("n_rays", "rays", "samples", "queries", "steps"):
            setattr(self, key, int(state[key]))
        self.colour_skipped = int(state.get("colour_skipped", 0))  # older checkpoints: none skipped
        self.n_rays = min(max(self.n_rays, 1), self.max_rays)
