"""Scenes: the Scene container, the loaders that fill it from a folder, and the training batches.

    scene.py              Scene: images, cameras, bounds and splits, never mutated after loading
    images.py             Images: a scene's images kept as 8-bit codes, decoded when read
    loaders.py            load_scene: a config's scene, by dataset type (llff, blender, nerfstudio)
    resolve.py            a scene name / folder from the config -> a folder on disk
    llff.py               LLFF layout (poses_bounds.npy), nerf-pytorch's load_llff_data
    blender.py            Blender / NeRF-synthetic layout (transforms_{train,val,test}.json)
    nerfstudio.py         nerfstudio / instant-ngp captures (transforms.json), undistorted
    transforms_reader.py  transforms.json read: frames, splits, each frame's camera
    transforms_writer.py  transforms.json written (enerf data colmap, enerf export depth)
    camera_record.py      the cameras a checkpoint carries, and a Scene rebuilt from them
    sampler.py            RaySampler: random ray batches over all training pixels

Cameras and rays are ``enerf.cameras``; making scene folders from photos or a video is
``enerf.ingest``; the synthetic demo scene is ``enerf.synthetic``. Import the submodules
directly; only ``Scene`` is re-exported here.
"""

from .scene import Scene

__all__ = ["Scene"]
