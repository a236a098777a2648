"""The browser viewer (``enerf view``, ``enerf train --viewer``), on viser (the ``viewer`` extra).

    render.py    render_view: the one call into the renderer (a run, a camera, a size -> an image)
    frames.py    one frame from one or two runs: side by side, split slider, difference, labels
    scene.py     camera conventions, frustums, the initial view, the panel's text (numpy only)
    server.py    Viewer: the viser server, progressive per-browser rendering, panel, keyframes
    training.py  TrainingViewer: the viewer fed between training steps
    app.py       open_view: load checkpoints and serve them (``enerf view``)

Only ``server.py`` (and what imports it) needs viser; ``render.py``, ``frames.py`` and
``scene.py`` work without it.
"""

from .render import OUTPUTS, render_view

__all__ = ["OUTPUTS", "render_view"]
