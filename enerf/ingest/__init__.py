"""Ingestion: photos or a phone video to a scene folder enerf trains on (``enerf data colmap|images|video``).

    photos.py        the photos read (upright, one size) and the scene folder written beside its place
    colmap.py        posing with pycolmap (SIFT, matching, incremental mapping), the layouts written
    colmap_poses.py  COLMAP's poses in LLFF's poses_bounds.npy rows and transforms.json matrices
    video.py         the sharpest frame of each window of a video, then posed as photos

The folders written are read by the loaders of ``enerf.data``. Import the submodules directly.
"""
