"""The viewer server: a viser web server, one progressive render loop for every browser, the panel.

``Viewer`` opens the server (``open_viewer``: the port is checked first, and a port in use is a
one-line error, never a silent move to the next one), draws one or two runs (``attach``) and
renders the browser's camera in small units of work (``work``):

* a camera move (or a panel change) restarts that browser's frame at level 0, a preview whose
  width is chosen from the measured render speed so that it takes about ``preview_seconds``;
* while the camera rests, each next level doubles the width, up to the resolution cap
  (``max_width``, and never wider than the browser's canvas; a level whose double would pass
  the cap is the cap);
* those frames are drafts (``draft.py``: the run's renderer with ``draft`` of its samples per
  ray), the last of them at the cap; then the exact frame at the cap (every sample: the pixels
  of ``enerf render``), sent as PNG (``draft`` 1: every frame exact);
* only each browser's latest camera is rendered: camera messages that arrive while a frame
  renders replace one another (stale requests are dropped, never queued).
* with splats (``splat_layer.py``: one run, ``--moving splats``) the browser draws them while
  the camera moves, and once it rests the exact frame at the cap replaces them (no previews or
  drafts); with "show: splats", or no run, nothing is rendered here.

``enerf view`` calls ``work`` from a background thread (``start_worker``); ``enerf train
--viewer`` calls it between training steps (``training.py``), where the networks do not change.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ..config import ViewerConfig
from ..errors import ConfigError
from ..loaded_run import LoadedRun
from .frames import render_frame
from .render import focal_from_fov
from .panel import build_panel
from .scene import c2w_from_viser, frustum_scale, frustums, initial_view, run_label
from .editor import PathEditor
from .session import FrameInfo, Browser, check_port, import_viser
from .splat_layer import SplatLayer
from .splats import ViewerSplats

__all__ = ["Viewer"]


class Viewer:
    """A viser server showing one run, or two runs of one scene from one camera.

    Args:
        cfg: host, port, resolution cap, preview time, layout (``ViewerConfig``).
        title: the panel's title.
    """

    def __init__(self, cfg: ViewerConfig, title: str = "enerf") -> None:
        viser = import_viser()
        check_port(cfg.host, cfg.port)
        self.cfg = cfg
        with contextlib.redirect_stdout(io.StringIO()):  # viser prints a banner; the command prints the URL
            self.server = viser.ViserServer(host=cfg.host, port=cfg.port, label=title, verbose=False)
        self.server.gui.configure_theme(show_share_button=False, control_width="medium")
        if cfg.port and self.server.get_port() != cfg.port:  # viser moves to the next port when one is taken
            with contextlib.redirect_stdout(io.StringIO()):
                self.server.stop()
            raise ConfigError(f"port {cfg.port} on {cfg.host} is in use (another viewer?); pass another port or 0 "
                              "for any free one", ("port",))
        self.runs: list[LoadedRun] = []
        self.metrics: list[dict] = []
        self.labels: list[str] = []
        self.rate = None  # pixels per second of the last renderings (exponential average)
        self.render_seconds = 0.0  # all time spent rendering
        self._browsers: dict[int, Browser] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.frames_sent = 0
        self.browsers_seen = 0
        self._worker: threading.Thread | None = None
        self.output = cfg.output
        self.layout = cfg.layout
        self.split = 0.5
        self.max_width = cfg.max_width
        self.draft = cfg.draft  # fraction of samples of the frames before the exact one (1: all exact)
        self.path_dir: Path | None = None
        self.editor: PathEditor | None = None
        self._start_frustum = None
        self._seen_start = False
        self.status = None
        self.splat_layer = SplatLayer(self)

    # ------------------------------------------------------------------ set-up

    @property
    def url(self) -> str:
        host = self.cfg.host if self.cfg.host not in ("0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.server.get_port()}"

    def attach(self, runs: list[LoadedRun], metrics: list[dict], path_dir: Path | None = None,
               splats: ViewerSplats | None = None, splats_note: str = "") -> None:
        """Draw ``runs`` (one, or two of the same scene): their cameras, the panel, the first view.

        ``metrics``: each run's metrics.json ({} when none); ``path_dir``: where saved camera paths go;
        ``splats``: drawn by the browsers (``splat_layer.py``; no runs: the splats alone), in the
        first run's scene frame; ``splats_note``: the panel's line when there are none."""
        self.runs, self.metrics = list(runs), list(metrics)
        self.labels = [run_label(r, m) for r, m in zip(self.runs, self.metrics)]
        self.path_dir = path_dir
        self.splat_layer = SplatLayer(self, splats, splats_note)
        if not self.runs:
            self.splat_layer.attach_alone()
            self.server.on_client_connect(self._connect)
            self.server.on_client_disconnect(self._disconnect)
            return
        run, server = self.runs[0], self.server
        view = initial_view(run)
        server.scene.set_up_direction(tuple(float(v) for v in view["up"]))
        server.initial_camera.position = tuple(float(v) for v in view["position"])
        server.initial_camera.look_at = tuple(float(v) for v in view["look_at"])
        server.initial_camera.up = tuple(float(v) for v in view["up"])
        server.initial_camera.fov = float(view["fov"])
        self._draw_cameras(run)
        # the first view is just behind a training camera: its frustum (in front) is hidden until the camera leaves
        self._start = (np.asarray(view["position"], dtype=np.float64), 2.0 * frustum_scale(run))
        self._start_frustum = next((h for h in self.frustum_handles if h.name == f"/cameras/train/{view['index']:03d}"),
                                   None)
        if self._start_frustum is not None:
            self._start_frustum.visible = False
        self._build_panel()
        server.on_client_connect(self._connect)
        server.on_client_disconnect(self._disconnect)
        self._measure_rate()

    def _draw_cameras(self, run: LoadedRun) -> None:
        scene = self.server.scene
        self.cameras_root = scene.add_frame("/cameras", show_axes=False)
        scale = frustum_scale(run)
        self.frustum_handles = []
        for f in frustums(run, self.metrics[0]):
            colour = (60, 110, 220) if f.split == "train" else (235, 120, 20)
            handle = scene.add_camera_frustum(f.name, fov=f.fov, aspect=f.aspect, scale=scale, color=colour,
                                              wxyz=f.wxyz, position=f.position, thickness=scale * 0.04)
            self.frustum_handles.append(handle)
            if f.label:
                scene.add_label(f"{f.name}/psnr", f.label, font_screen_scale=0.8)
        drawn = frustums(run, self.metrics[0])
        self.n_frustums, self.n_train = len(drawn), sum(f.split == "train" for f in drawn)

    def _build_panel(self) -> None:
        build_panel(self)
        self.editor = PathEditor(self, frustum_scale(self.runs[0]))

    # ------------------------------------------------------------------ keyframes

    def add_keyframe(self, camera) -> None:
        """Add the pose and field of view of a browser's ``camera`` (viser CameraHandle) to the path."""
        self.editor.add(camera)

    def save_path(self, name: str, frames: int | None = None, fmt: str = "enerf") -> Path:
        """Write the camera path (``fmt``: enerf's file for ``enerf render --path FILE``, or
        nerfstudio's camera_path.json) into ``path_dir``; returns its path."""
        return self.editor.save(name, fmt, frames)

    # ------------------------------------------------------------------ browsers

    def _connect(self, client) -> None:
        browser = Browser(client)
        self.splat_layer.connect(browser)
        with self._lock:
            self._browsers[client.client_id] = browser
            self.browsers_seen += 1

        @client.camera.on_update
        def _(camera) -> None:
            start = self._start_frustum
            if start is not None and not start.visible:  # shown once a camera that was at the start leaves it
                away = np.linalg.norm(np.asarray(camera.position) - self._start[0]) > self._start[1]
                if away and self._seen_start:
                    start.visible = True
                self._seen_start = self._seen_start or not away
            with self._lock:
                browser = self._browsers.get(client.client_id)
                if browser is not None:
                    browser.version += 1
            if browser is not None:
                self.splat_layer.moved(browser)
            self._wake.set()

        self._wake.set()

    def _disconnect(self, client) -> None:
        with self._lock:
            self._browsers.pop(client.client_id, None)

    def _changed(self) -> None:
        """A panel setting changed: every browser's frame starts again."""
        with self._lock:
            for browser in self._browsers.values():
                browser.version += 1
        self._wake.set()

    def browsers(self) -> dict[int, Browser]:
        with self._lock:
            return dict(self._browsers)

    # ------------------------------------------------------------------ rendering

    def _measure_rate(self) -> None:
        """Render one small frame to learn the speed (and warm up the renderer)."""
        run, view = self.runs[0], initial_view(self.runs[0])
        width = self.cfg.min_width
        height = max(int(round(width * run.scene.height / run.scene.width)), 1)
        for _ in range(2):  # the first call pays one-time costs
            tic = time.perf_counter()
            render_frame(self.runs, view["c2w"], width, height, focal_from_fov(view["fov"], height), "rgb", "a",
                         draft=self.draft)
            seconds = time.perf_counter() - tic
        self.rate = width * height / max(seconds, 1e-6)

    def _note_speed(self, pixels: int, seconds: float) -> None:
        rate = pixels / max(seconds, 1e-6)
        self.rate = rate if self.rate is None else 0.5 * self.rate + 0.5 * rate

    def _width(self, level: int, target: int, aspect: float) -> int:
        """Frame width of ``level``: a preview of about ``preview_seconds``, doubled per level, up to
        ``target``; a level whose double would pass ``target`` is ``target`` itself (a level just
        below the cap would cost nearly as much as the cap)."""
        pixels = (self.rate or 1e4) * self.cfg.preview_seconds
        if len(self.runs) == 2 and self.layout in ("split", "difference"):
            pixels /= 2  # two whole renderings per frame (side by side: two halves, the same pixels)
        width = max(int(np.sqrt(pixels * aspect)), self.cfg.min_width) * 2**level
        if level > 0 and 2 * width > target:  # no level between this one and the cap: this one is the cap
            width = target
        return int(min(width, target))

    def pending(self, training_step: int | None = None) -> bool:
        """Whether some browser waits for a frame (training: or shows a finest frame of an older step)."""
        for b in self.browsers().values():
            if b.version != b.started or not b.done:
                return True
            if training_step is not None and b.done_step != training_step:
                return True
        return False

    def work(self, training_step: int | None = None) -> float:
        """Render and send the next frame of one browser that needs one; returns the seconds it took (0: none did).

        ``training_step``: the live run's step; a browser whose finest frame shows an older step gets a
        new finest frame (no preview: the camera did not move)."""
        if self.splat_layer.only:
            return 0.0  # the browsers draw the splats alone
        for browser in sorted(self.browsers().values(), key=lambda b: b.sent_at):
            camera = browser.client.camera
            version = browser.version
            if version != browser.started:
                if not self.splat_layer.ready(browser):
                    continue  # the splats show until the camera rests
                browser.started, browser.level, browser.done, browser.drafted = version, 0, False, False
                if self.splat_layer.stands_in():  # no drafts: the exact frame at the cap replaces the splats
                    browser.level, browser.drafted = 99, True
            elif browser.done:
                if training_step is None or browser.done_step == training_step:
                    continue
                browser.done, browser.drafted = False, True  # refresh at the finest level, exact
                browser.level = 99
            try:
                tic = time.perf_counter()
                info = self._render_for(browser, camera, version)
                seconds = time.perf_counter() - tic
            except Exception:
                if browser.client.client_id not in self.browsers():
                    continue  # the browser went away mid-frame
                raise
            if info is None:
                return seconds  # dropped: the camera moved on while it rendered (the splats show the new one)
            info.seconds = seconds
            if info.step is not None and training_step is not None:
                info.step = training_step
            self.render_seconds += seconds
            browser.last, browser.sent_at = info, time.perf_counter()
            browser.frames += 1
            self.frames_sent += 1
            if info.final:
                browser.done, browser.done_step = True, training_step if training_step is not None else -1
            else:
                browser.level += 1
            return seconds
        return 0.0

    def _render_for(self, browser: Browser, camera, version: int) -> FrameInfo | None:
        wxyz, position, fov = camera.wxyz, camera.position, float(camera.fov)
        canvas_w, canvas_h = max(int(camera.image_width), 1), max(int(camera.image_height), 1)
        aspect = canvas_w / canvas_h
        target = max(min(self.max_width, canvas_w), 8)
        width = self._width(browser.level, target, aspect)
        height = max(int(round(width * canvas_h / canvas_w)), 1)
        focal = focal_from_fov(fov, height)
        c2w = c2w_from_viser(wxyz, position)
        at_cap = width >= target
        draft = self.draft < 1.0 and not (at_cap and browser.drafted)
        final = at_cap and not draft
        tic = time.perf_counter()
        frame = render_frame(self.runs, c2w, width, height, focal, self.output, self.layout, self.split,
                             self.labels if len(self.runs) == 2 else None, self.cfg.colormap,
                             self.draft if draft else 1.0)
        if draft or self.draft >= 1.0:  # the previews' width follows the speed of draft frames
            self._note_speed(width * height * (2 if len(self.runs) == 2 and self.layout in ("split", "difference")
                                               else 1), time.perf_counter() - tic)
        if at_cap and draft:
            browser.drafted = True  # the next level is the exact frame at the same width
        image = (np.clip(frame, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
        if final:
            sent = self.splat_layer.send(browser, version,
                                         lambda: browser.client.scene.set_background_image(image, format="png"))
        else:
            sent = self.splat_layer.send(browser, version, lambda: browser.client.scene.set_background_image(
                image, format="jpeg", jpeg_quality=self.cfg.jpeg_quality))
        if not sent:
            return None
        info = FrameInfo(version, browser.level, width, height, focal, c2w, final, draft, 0.0, self.runs[0].step)
        if self.status is not None:
            self.status.content = (f"{'exact' if final else 'draft'} frame {width}x{height} "
                                   f"in {time.perf_counter() - tic:.2f} s · step {self.runs[0].step}")
        return info

    # ------------------------------------------------------------------ threads

    def start_worker(self) -> None:
        """Render in a background thread until ``close``."""
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    busy = self.work() > 0.0
                except Exception as exc:  # e.g. out of memory at a large --max_width: say so, keep serving
                    line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                    print(f"enerf view: warning: a frame failed ({line})", file=sys.stderr, flush=True)
                    if self.status is not None:
                        self.status.content = f"a frame failed: {line}"
                    for browser in self.browsers().values():
                        browser.started, browser.done = browser.version, True  # until the next move
                    busy = False
                if not busy:
                    self._wake.wait(0.05)
                    self._wake.clear()

        self._worker = threading.Thread(target=loop, name="enerf-viewer-render", daemon=True)
        self._worker.start()

    def wait_for_frame(self, final: bool = True, timeout: float = 60.0, version_after: int | None = None) -> FrameInfo:
        """Block until some browser has been sent a (final) frame; returns its FrameInfo (tests, tools)."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            for b in self.browsers().values():
                info = b.last
                newer = version_after is None or (info is not None and info.version > version_after)
                if info is not None and (info.final or not final) and newer and info.version == b.version:
                    return info
            time.sleep(0.02)
        raise TimeoutError(f"no {'final ' if final else ''}frame within {timeout:.0f} s")

    def close(self) -> None:
        if getattr(self, "editor", None) is not None:
            self.editor.close()
        self._stop.set()
        self._wake.set()
        if self._worker is not None:
            self._worker.join(timeout=30)
        with contextlib.redirect_stdout(io.StringIO()):
            self.server.stop()
