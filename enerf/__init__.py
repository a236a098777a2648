"""enerf: neural radiance fields and neural shapes with equilibrated weight conditioning.

The packages import one way, down the data flow: a module imports from its own package and from the
layers below its own, never from one above or beside it (``|`` separates the packages of one layer), at
module level or inside a function. ``tests/unit/test_layers.py`` reads this list and checks every import.

Layers, top first
- python -m enerf: __main__
- commands: cli
- applications: viewer | compare
- shapes: shapes
- exports: export
- training: train
- splats: splats
- a run's views: views
- a trained run: loaded_run
- rendering: render
- networks and optimisers: fields | optim | ingest | checkpoint
- scenes: data | device | runfolder | distributed
- configuration: config
- cameras and layers: cameras | nn | metrics | synthetic
- helpers: mesh_distance | download
- foundations: errors | atomic | rng | progress
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
