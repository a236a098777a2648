"""Cameras: everything about where a camera is and which rays it casts, used by data/ (the
loaders), render/, export/ and viewer/ alike; plain numpy / torch, nothing from the rest of enerf
but its errors.

    rays.py             Rays (origins, viewdirs, near, far), pixel-centre rays, the NDC warp
    lens.py             lens models of COLMAP / transforms.json cameras, undistortion to a pinhole
    normalize.py        nerfstudio's orientation and scaling of captured camera poses
    scene_kind.py       forward-facing or walk-around, from the poses alone
    paths.py            render paths: LLFF spiral, sphere, ellipse, splines through keyframes
    path_file.py        enerf's camera path file (CameraPath: enerf view saves it, enerf render reads it)
    nerfstudio_path.py  nerfstudio's camera_path.json, both ways
    visibility.py       which cameras' frusta hold a point (the visibility loss, psnr_seen)

Import the submodules directly; only the ray types are re-exported here.
"""

from .rays import Rays, flatten_rays, index_rays, make_rays, ndc_rays, pixel_rays

__all__ = ["Rays", "pixel_rays", "ndc_rays", "make_rays", "flatten_rays", "index_rays"]
