"""The browser viewer (``enerf view``, ``enerf train --viewer``), on viser (the ``viewer`` extra).

    render.py    render_camera: the one call into the renderer (a run, a camera, a size -> an image)
    draft.py     the draft renderer: the run's renderer with fewer samples, for frames before the exact one
    frames.py    one frame from one or two runs: side by side, split slider, difference, labels
    scene.py     camera conventions, frustums, the initial view, the panel's text (numpy only)
    server.py    Viewer: the viser server, progressive per-browser rendering
    panel.py     the panel: output, resolution cap, cameras, layout, each run's summary
    splats.py    Gaussian splats as the browser draws them (covariances, colours, frames; numpy)
    splat_layer.py SplatLayer: the browser's own splats while the camera moves, or alone
    keyframes.py the camera-path editor's keyframes and files (enerf's, nerfstudio's camera_path.json)
    editor.py    PathEditor: the panel's camera-path folder, the keyframes in the scene, the preview
    training.py  TrainingViewer: the viewer fed between training steps
    app.py       open_view: load checkpoints and / or splats and serve them (``enerf view``)

Only ``server.py``, ``editor.py``, ``panel.py`` and ``splat_layer.py`` (and what imports them) need
viser's server; ``render.py``, ``draft.py``, ``frames.py``, ``keyframes.py``, ``scene.py`` and
``splats.py`` work without it.
"""

from .render import OUTPUTS, render_camera

__all__ = ["OUTPUTS", "render_camera"]
