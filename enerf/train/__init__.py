"""Training: the loop every task runs and the NeRF task on it (the shape task is ``enerf.shapes.train``).

    loop.py           the loop: steps, logging, evaluation cadence, checkpoints, time budget
    nerf.py           the NeRF task: its step and its run
    state.py          the optimizer a config asks for, the loop's resumable state
    losses.py         the NeRF loss terms, by name
    rays_per_step.py  rays per step sized for a target number of samples
    evaluate.py       held-out evaluation: PSNR / SSIM / LPIPS, the record metrics.json keeps
    eval_run.py       a checkpoint scored on its held-out views (enerf eval): the field, or a splat file
    splat_stage.py    training that ends in splats: the bake, then the splats scored
    estimate.py       the run's duration, said after its first steps
    short_run.py      a short run's final evaluation and preview video cut to its training time
    divergence.py     a non-finite loss, gradient or weight stops the run
"""
