"""The shapes application (``enerf shape train|mesh|eval``): occupancy / SDF networks fitted to one
mesh, their surface extracted and scored.

    field.py     ShapeField: the occupancy / SDF MLP built from conditioned layers
    builtin.py   the built-in meshes (trimesh primitives, the Stanford bunny)
    mesh.py      meshes loaded, normalised, points labelled and sampled, samples cached
    samples.py   ShapeData: the points a run trains and is scored on
    losses.py    the loss terms (bce; l1 + eikonal)
    train.py     ShapeRun on the shared loop (enerf.train.loop), train_shape, evaluation
    extract.py   marching cubes of a trained field (enerf.export.isosurface)

What NeRF shares with it lives outside: the config (``enerf.config.shape``), the command line
(``enerf.cli.shape``), the mesh metrics (``enerf.metrics``, ``enerf.mesh_distance``) and marching
cubes (``enerf.export.isosurface``); no NeRF module imports this package.
"""

from ..fields.shape import ShapeField

__all__ = ["ShapeField"]
