"""The splats each browser draws itself: shown while the camera moves, the field's exact frame
when it rests (or the splats alone).

Each browser gets its own splat node (``/splats``: viser's ``add_gaussian_splats``, from
``splats.py``), so one browser can show splats while another shows a field frame. What a
browser shows:

* **while moving: splats** (one run with splats, output rgb): a camera move clears the field
  frame and shows the splats at once (the browser draws them at its own frame rate); once the
  camera has rested ``rest_seconds`` the server renders the field's exact frame at the resolution
  cap, no drafts, and that frame replaces the splats. A frame whose camera moved on while it
  rendered is dropped: it would cover the splats with a stale view.
* **while moving: draft**: as without splats (previews, drafts, the exact frame); the splats
  stay hidden.
* **show: splats**: the splats alone, no field rendering (``enerf view --splats F.ply`` without
  ``--ckpt`` always).

Two runs (``--ckpt A --ckpt B``) have no splats: their layouts stay as they are.
"""

from __future__ import annotations

import threading
import time

from ..config.commands import VIEWER_MOVING
from ..splats.viewpoint import default_view
from .splats import ViewerSplats, scaled_for_viser

__all__ = ["SplatLayer", "SHOW_MODES"]

SHOW_MODES = ("field", "splats")


class SplatLayer:
    """The splats of one ``server.Viewer`` and, per browser, whether they or a field frame show.

    Args:
        viewer: the Viewer (its runs, output, cfg; ``_changed`` restarts every browser's frame).
        splats: what the browsers draw, in the viewer's frame; None: no splats.
        note: a line for the panel (why there are none, e.g. the command that makes them).
    """

    def __init__(self, viewer, splats: ViewerSplats | None = None, note: str = "") -> None:
        self.viewer, self.splats, self.note = viewer, splats, note
        self.moving = viewer.cfg.moving
        self.show = "field"
        self.lock = threading.RLock()  # orders "show the splats" against "send a field frame"
        self._arrays = scaled_for_viser(splats) if splats is not None else None

    # ------------------------------------------------------------------ what shows

    @property
    def only(self) -> bool:
        """The splats alone: no run, or "show: splats" (no field frames are rendered)."""
        return self.splats is not None and (not self.viewer.runs or self.show == "splats")

    def stands_in(self) -> bool:
        """Whether the splats stand in for the field while the camera moves (one run, rgb output)."""
        return (self.splats is not None and self.moving == "splats" and len(self.viewer.runs) == 1
                and self.viewer.output == "rgb")

    def ready(self, browser) -> bool:
        """Whether the field's frame of ``browser``'s camera may start: with the splats standing
        in, only once the camera has rested ``rest_seconds``."""
        return not self.stands_in() or time.perf_counter() - browser.moved_at >= self.viewer.cfg.rest_seconds

    # ------------------------------------------------------------------ browsers

    def connect(self, browser) -> None:
        """Give a new browser its splat node, shown at once when the splats show first."""
        if self._arrays is None:
            return
        centers, covariances, scale = self._arrays
        show = self.only or self.stands_in()
        with self.lock:
            browser.splats = browser.client.scene.add_gaussian_splats(
                "/splats", centers, covariances, self.splats.rgbs, self.splats.opacities, scale=scale, visible=show)
            browser.showing_splats = show

    def moved(self, browser) -> None:
        """``browser``'s camera moved: the splats replace its field frame when they stand in."""
        browser.moved_at = time.perf_counter()
        if self.only or self.stands_in():
            self._set(browser, True)

    def send(self, browser, version: int, send_frame) -> bool:
        """Call ``send_frame()`` (it sets ``browser``'s background image) unless the splats stand
        in and the camera moved on since ``version``; hide the splats once it is sent. Returns
        whether it was sent."""
        with self.lock:
            if self.stands_in() and browser.version != version:
                return False
            send_frame()
            self._set(browser, False)
            return True

    def _set(self, browser, on: bool) -> None:
        with self.lock:
            if browser.splats is None or browser.showing_splats == on:
                return
            if on:
                browser.client.scene.set_background_image(None)  # the old field frame: another camera's
            browser.splats.visible = on
            browser.showing_splats = on

    # ------------------------------------------------------------------ panel

    def build_panel(self, gui) -> None:
        """The panel's splat lines and, with a run, the "While moving" and "Show" dropdowns."""
        if self.splats is None:
            if self.note:
                gui.add_markdown(self.note)
            return
        self.gui_note = gui.add_markdown(self.splats.describe() + (" · drawn by the browser" if not self.viewer.runs
                                                                   else ""))
        if not self.viewer.runs:
            return
        moving = gui.add_dropdown("While moving", VIEWER_MOVING, initial_value=self.moving,
                                  hint="splats: drawn by the browser; draft: the field's preview frames")
        show = gui.add_dropdown("Show", SHOW_MODES, initial_value=self.show,
                                hint="field: its exact frame when the camera rests; splats: the splats alone")

        @moving.on_update
        def _(_event) -> None:
            self.moving = moving.value
            self.viewer._changed()

        @show.on_update
        def _(_event) -> None:
            self.show = show.value
            if self.show == "splats":
                for browser in self.viewer.browsers().values():
                    self._set(browser, True)
            self.viewer._changed()

        self.gui_moving, self.gui_show = moving, show

    def attach_alone(self) -> None:
        """Set a Viewer without runs up for the splats alone: the first view looks at them
        (``enerf.splats.viewpoint.default_view``, as the page does), the cameras' folder is empty, the
        panel names the file."""
        server, view = self.viewer.server, default_view(self.splats.centers)
        server.scene.set_up_direction(tuple(float(v) for v in view["up"]))
        server.initial_camera.position = tuple(float(v) for v in view["position"])
        server.initial_camera.look_at = tuple(float(v) for v in view["look_at"])
        server.initial_camera.up = tuple(float(v) for v in view["up"])
        server.initial_camera.fov = float(view["fov"])
        self.viewer.cameras_root = server.scene.add_frame("/cameras", show_axes=False)
        self.viewer.frustum_handles, self.viewer.n_frustums, self.viewer.n_train = [], 0, 0
        with server.gui.add_folder("View"):
            self.viewer.status = server.gui.add_markdown("splats only (no field: give --ckpt for its frames)")
            self.build_panel(server.gui)
