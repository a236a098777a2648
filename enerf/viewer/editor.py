"""The camera-path editor: the panel's "Camera path" folder and the keyframes drawn in the scene.

Keyframes (``keyframes.KeyframeList``) are added from the browser's view, chosen in a list,
deleted, moved up or down, given their own field of view and seconds to the next keyframe; the
path's smoothness (Catmull-Rom to straight lines) and frame rate are set once. "Preview path"
flies every browser's camera along the path in real time (the viewer renders it as it moves);
"Save" writes enerf's camera path file (``enerf render --path FILE``) or nerfstudio's
``camera_path.json``, "Load" reads either back into the editor.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from ..errors import EnerfError
from .keyframes import PATH_FORMATS, KeyframeList
from .render import fov_from_focal
from .scene import c2w_from_viser, viser_from_c2w

__all__ = ["PathEditor"]

_NONE = "(none)"


class PathEditor:
    """The "Camera path" folder of ``viewer``'s panel (a ``server.Viewer`` with runs attached).

    Args:
        viewer: the Viewer (its server, first run, ``path_dir`` and frustum scale).
        scale: size of the keyframes' frustums (``scene.frustum_scale``).
    """

    def __init__(self, viewer, scale: float) -> None:
        self.viewer = viewer
        self.server = viewer.server
        self.scale = scale
        self.keys = KeyframeList()
        self.selected = -1  # index of the chosen keyframe (-1: none)
        self._syncing = False  # the panel is being set from the keyframes (its callbacks stay out)
        self._handles: list = []
        self._preview: threading.Thread | None = None
        self._stop_preview = threading.Event()
        self._build()

    # ------------------------------------------------------------------ panel

    def _build(self) -> None:
        gui = self.server.gui
        with gui.add_folder("Camera path", expand_by_default=False):
            self.gui_add = gui.add_button("Add keyframe (this view)")
            self.gui_list = gui.add_dropdown("Keyframe", [_NONE], initial_value=_NONE)
            self.gui_fov = gui.add_number("FOV (deg)", initial_value=50.0, min=1.0, max=170.0, step=0.1)
            self.gui_seconds = gui.add_number("Seconds to next", initial_value=2.0, min=0.05, max=3600.0, step=0.05)
            self.gui_up = gui.add_button("Move up")
            self.gui_down = gui.add_button("Move down")
            self.gui_goto = gui.add_button("Go to keyframe")
            self.gui_delete = gui.add_button("Delete keyframe")
            self.gui_clear = gui.add_button("Clear keyframes")
            self.gui_smooth = gui.add_slider("Smoothness", min=0.0, max=1.0, step=0.05, initial_value=1.0)
            self.gui_fps = gui.add_number("FPS", initial_value=30.0, min=1.0, max=240.0, step=1.0)
            self.gui_play = gui.add_button("Preview path")
            self.gui_stop = gui.add_button("Stop preview")
            self.gui_name = gui.add_text("File name", initial_value="path.json")
            self.gui_format = gui.add_dropdown("Format", PATH_FORMATS, initial_value=PATH_FORMATS[0])
            self.gui_save = gui.add_button("Save camera path")
            self.gui_load = gui.add_button("Load camera path")
            self.note = gui.add_markdown("no keyframes")

        @self.gui_add.on_click
        def _(event) -> None:
            if event.client is not None:
                self.add(event.client.camera)

        @self.gui_list.on_update
        def _(_event) -> None:
            if self._syncing:
                return
            value = self.gui_list.value
            self._select(int(value) - 1 if value != _NONE else -1)

        @self.gui_fov.on_update
        def _(_event) -> None:
            if not self._syncing and 0 <= self.selected < len(self.keys) and 0 < float(self.gui_fov.value) < 180:
                self.keys.keys[self.selected].fov = float(self.gui_fov.value)
                self._redraw()

        @self.gui_seconds.on_update
        def _(_event) -> None:
            if not self._syncing and 0 <= self.selected < len(self.keys) and float(self.gui_seconds.value) > 0:
                self.keys.keys[self.selected].seconds = float(self.gui_seconds.value)
                self._redraw()

        @self.gui_up.on_click
        def _(_event) -> None:
            self.move(-1)

        @self.gui_down.on_click
        def _(_event) -> None:
            self.move(1)

        @self.gui_goto.on_click
        def _(event) -> None:
            if 0 <= self.selected < len(self.keys) and event.client is not None:
                key = self.keys.keys[self.selected]
                self._set_camera(event.client, key.c2w, key.fov)

        @self.gui_delete.on_click
        def _(_event) -> None:
            self.delete()

        @self.gui_clear.on_click
        def _(_event) -> None:
            self.keys.keys.clear()
            self.keys.size = None
            self.selected = -1
            self._redraw()

        @self.gui_smooth.on_update
        def _(_event) -> None:
            if self._syncing:
                return
            self.keys.smoothness = float(self.gui_smooth.value)
            self._redraw()

        @self.gui_fps.on_update
        def _(_event) -> None:
            if self._syncing or float(self.gui_fps.value) <= 0:
                return
            self.keys.fps = float(self.gui_fps.value)
            self._redraw()

        @self.gui_play.on_click
        def _(_event) -> None:
            self.preview()

        @self.gui_stop.on_click
        def _(_event) -> None:
            self._stop_preview.set()

        @self.gui_save.on_click
        def _(_event) -> None:
            try:
                path = self.save(self.gui_name.value, self.gui_format.value)
                run = self.viewer.runs[0]
                self.note.content = (f"saved {path}\n\nrender it: `enerf render --ckpt {run.ckpt_path} --path {path}`\n\n"
                                     + self.keys.summary())
            except EnerfError as exc:
                self.note.content = f"not saved: {exc}"

        @self.gui_load.on_click
        def _(_event) -> None:
            try:
                path = self.load(self.gui_name.value)
                self.note.content = f"loaded {path}\n\n" + self.keys.summary()
            except EnerfError as exc:
                self.note.content = f"not loaded: {exc}"

    # ------------------------------------------------------------------ editing

    def add(self, camera, seconds: float | None = None) -> int:
        """Add the view of a browser's ``camera`` (viser CameraHandle) after the last keyframe;
        returns its index (it becomes the chosen one)."""
        c2w = c2w_from_viser(camera.wxyz, camera.position)
        size = (int(camera.image_width), int(camera.image_height))
        index = self.keys.add(c2w, float(np.degrees(camera.fov)), float(seconds or self.gui_seconds.value), size)
        self._redraw(index)
        return index

    def delete(self) -> None:
        """Delete the chosen keyframe (the next one becomes the chosen one)."""
        if 0 <= self.selected < len(self.keys):
            self.keys.delete(self.selected)
            self._redraw(min(self.selected, len(self.keys) - 1))

    def move(self, offset: int) -> None:
        """Move the chosen keyframe ``offset`` places along the path (-1: up, 1: down)."""
        if 0 <= self.selected < len(self.keys):
            self._redraw(self.keys.move(self.selected, offset))

    def _file(self, name: str) -> Path:
        name = Path(str(name).strip() or "path.json").name
        if not name.lower().endswith(".json"):
            name += ".json"
        return (self.viewer.path_dir or Path(".")) / name

    def save(self, name: str, fmt: str = "enerf", frames: int | None = None) -> Path:
        """Write the path as ``fmt`` into ``<path_dir>/<name>``; returns the file."""
        return self.keys.save(self._file(name), fmt, frames)

    def load(self, name: str) -> Path:
        """Read ``<path_dir>/<name>`` (enerf's or nerfstudio's format) into the editor; returns the file."""
        path = self._file(name)
        run = self.viewer.runs[0]
        self.keys.load(path, float(np.degrees(fov_from_focal(run.scene.focal, run.scene.height))),
                       (run.scene.width, run.scene.height))
        self._syncing = True
        try:
            self.gui_smooth.value = self.keys.smoothness
            self.gui_fps.value = self.keys.fps
        finally:
            self._syncing = False
        self._redraw(0 if len(self.keys) else -1)
        return path

    def _select(self, index: int) -> None:
        self.selected = index if 0 <= index < len(self.keys) else -1
        if self.selected >= 0:
            key = self.keys.keys[self.selected]
            self._syncing = True
            try:
                self.gui_fov.value = round(key.fov, 3)
                self.gui_seconds.value = key.seconds
            finally:
                self._syncing = False

    def _redraw(self, select: int | None = None) -> None:
        """Redraw the keyframes' frustums and the path, refresh the list (choosing ``select``)."""
        scene = self.server.scene
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for k, key in enumerate(self.keys.keys):
            wxyz, position = viser_from_c2w(key.c2w)
            aspect = self.keys.size[0] / self.keys.size[1]
            self._handles.append(scene.add_camera_frustum(
                f"/keyframes/{k:03d}", fov=float(np.radians(key.fov)), aspect=aspect, scale=self.scale,
                color=(30, 170, 60), wxyz=wxyz, position=position))
            scene.add_label(f"/keyframes/{k:03d}/label", str(k + 1), font_screen_scale=0.8)  # removed with its frustum
        if len(self.keys) >= 2:
            poses = self.keys.camera_path(max(8 * len(self.keys), 2)).poses()
            self._handles.append(scene.add_spline_catmull_rom("/keyframes/path", poses[:, :3, 3], tension=0.0,
                                                              thickness=self.scale * 0.05, color=(30, 170, 60)))
        options = [str(k + 1) for k in range(len(self.keys))] or [_NONE]
        self.gui_list.options = options
        if select is not None:
            self.selected = select
        self.selected = self.selected if 0 <= self.selected < len(self.keys) else (len(self.keys) - 1)
        self._syncing = True
        try:
            self.gui_list.value = str(self.selected + 1) if self.selected >= 0 else _NONE
        finally:
            self._syncing = False
        self._select(self.selected)
        self.note.content = self.keys.summary()

    # ------------------------------------------------------------------ preview

    @staticmethod
    def _set_camera(client, c2w: np.ndarray, fov_deg: float) -> None:
        wxyz, position = viser_from_c2w(c2w)
        with client.atomic():
            client.camera.fov = float(np.radians(fov_deg))
            client.camera.wxyz = wxyz
            client.camera.position = position

    def preview(self, wait: bool = False) -> None:
        """Fly every browser's camera along the path in real time (``fps`` frames a second, the
        path's own duration); ``wait``: return when it is done."""
        if len(self.keys) == 0 or (self._preview is not None and self._preview.is_alive()):
            return
        cam = self.keys.camera_path()
        poses, fovs = cam.poses().astype(np.float64), cam.frame_fovs()
        step = 1.0 / self.keys.fps
        self._stop_preview.clear()

        def fly() -> None:
            start = time.perf_counter()
            for k, pose in enumerate(poses):
                if self._stop_preview.is_set():
                    return
                for client in self.server.get_clients().values():
                    self._set_camera(client, pose, float(fovs[k]))
                delay = start + (k + 1) * step - time.perf_counter()
                if delay > 0:
                    self._stop_preview.wait(delay)

        self._preview = threading.Thread(target=fly, name="enerf-viewer-preview", daemon=True)
        self._preview.start()
        if wait:
            self._preview.join()

    def close(self) -> None:
        self._stop_preview.set()
        if self._preview is not None:
            self._preview.join(timeout=5)
