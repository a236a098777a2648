"""The synthetic demo scene (``--scene demo``, ``enerf data synth``): known exactly, made in numpy.

    scene.py             make_synthetic_scene: cameras placed, views ray-traced, an LLFF folder written
    geometry.py          the textured planes, spheres and boxes, and their ray tracer (trace_rays)
    textures.py          textures cut from scikit-image's bundled photographs
    surface_distance.py  exact distance to the scene's surfaces (scores meshes extracted from it)

Import the submodules directly.
"""
