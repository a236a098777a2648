"""The viewer's panel: the View folder (status, output, resolution cap, cameras, splats; two
runs: layout and split) and each run's folder. Its controls set the Viewer's fields and restart
every browser's frame (``Viewer._changed``)."""

from __future__ import annotations

from ..config import VIEWER_LAYOUTS, VIEWER_OUTPUTS
from .scene import run_summary

__all__ = ["build_panel", "LAYOUT_NAMES"]

LAYOUT_NAMES = {"side": "side by side", "split": "split slider", "a": "A only", "b": "B only", "difference": "difference"}


def build_panel(viewer) -> None:
    """Add the panel of ``viewer`` (a ``server.Viewer`` with its runs attached)."""
    gui = viewer.server.gui
    with gui.add_folder("View"):
        viewer.status = gui.add_markdown("waiting for a browser")
        out = gui.add_dropdown("Output", VIEWER_OUTPUTS, initial_value=viewer.output)
        cap = gui.add_slider("Max width (px)", min=32, max=max(2048, viewer.cfg.max_width), step=16,
                             initial_value=viewer.cfg.max_width)
        show = gui.add_checkbox("Show cameras", initial_value=True)
        viewer.splat_layer.build_panel(gui)

        @out.on_update
        def _(_event) -> None:
            viewer.output = out.value
            viewer._changed()

        @cap.on_update
        def _(_event) -> None:
            viewer.max_width = int(cap.value)
            viewer._changed()

        @show.on_update
        def _(_event) -> None:
            viewer.cameras_root.visible = bool(show.value)

        viewer.gui_output, viewer.gui_cap, viewer.gui_cameras = out, cap, show
        if len(viewer.runs) == 2:
            names = [LAYOUT_NAMES[k] for k in VIEWER_LAYOUTS]
            lay = gui.add_dropdown("Layout", names, initial_value=LAYOUT_NAMES[viewer.layout])
            cut = gui.add_slider("Split", min=0.0, max=1.0, step=0.01, initial_value=viewer.split)

            @lay.on_update
            def _(_event) -> None:
                viewer.layout = VIEWER_LAYOUTS[names.index(lay.value)]
                viewer._changed()

            @cut.on_update
            def _(_event) -> None:
                viewer.split = float(cut.value)
                if viewer.layout == "split":
                    viewer._changed()

            viewer.gui_layout, viewer.gui_split = lay, cut
    viewer.run_panels = []
    for k, (run, metrics) in enumerate(zip(viewer.runs, viewer.metrics)):
        with gui.add_folder("Run" if len(viewer.runs) == 1 else f"Run {'AB'[k]}", expand_by_default=k == 0):
            viewer.run_panels.append(gui.add_markdown(run_summary(run, metrics)))
