"""One self-contained HTML page that shows splats in a browser (WebGL2; no network, no Python).

The page inlines ``decode.js`` (the embedded splats read back), ``renderer.js`` (a small renderer
in the style of antimatter15/splat) and ``page.js`` (camera, input, frame scheduling). Every splat
is a quad: the vertex shader projects its 3D covariance to a 2D conic with the 3DGS low-pass
(+0.3 px) and sizes the quad where its alpha falls below 1/255; the fragment shader blends it back
to front (premultiplied "over", alpha clamped at 0.99) after a depth sort on the CPU, redone
whenever the camera moves; colour is SH band 0, plus band 1 evaluated per splat at sort time when
the splats have it. Where a full frame
takes longer than 0.1 s (software WebGL), a move is answered by a preview (the first splats, which
are the most important, at half resolution, as many as fit 0.1 s) and the full frame follows in
steps of about 40 ms, dropped when the camera moves again. Mouse drag orbits around a target (the
camera's median splat depth ahead), wheel zooms, right- or shift-drag pans, two fingers pinch;
``n`` / ``p`` (or the arrows, or the buttons) jump between the given cameras, ``r`` returns to the
current one. Opened as ``file://`` or from any static server: the data is embedded as base64.

The splats are embedded quantised, in Morton order and gzip'd (``enerf.splats.pagepack``; about 9
bytes a splat with SH band 1, 4/3 of that as base64: a quarter of the float32 layout earlier pages
used), and ``decode.js`` unzips them (the browser's ``DecompressionStream``) and orders them largest
``opacity * volume`` first (as antimatter15/splat orders them; a preview draws the first ones). A
JSON header beside the data gives the layout's own fields (``encode_page_splats``), ``antialiased``
(``Splats.antialiased``: each opacity times the 2D mip filter's factor), the ``up`` vector, the
``background`` and the ``cameras`` (without cameras, ``enerf view``'s default view of a splat file:
``enerf.splats.viewpoint``). The ``max_splats`` largest are kept.

``window.enerfSplat`` is a test hook: ``setCamera(c2w16[, fov_y])`` (row-major 4 x 4, OpenGL axes),
``getCamera()``, ``goToCamera(i)``, ``orbit(yaw, pitch)``, ``pan(dx, dy)``, ``zoom(factor)``,
``showHud(visible)`` and the counters ``ready``, ``error``, ``count``, ``framesDrawn``, ``moveId``
(frames that answered a move), ``lastMoveMs`` (from the move - an input event's own time stamp, or
the ``setCamera`` call - to the end of its first frame, waited for with a 1-pixel read),
``lastFrameMs`` (that frame's own work), ``quality`` ("preview" or "full"), ``previewSplats``,
``fullFrames``, ``fullMoveId`` (the move the last full frame answered), ``lastFullMs``,
``lastFullWorkMs``, ``drawn``, ``width``, ``height``, ``focal`` (pixels).
"""

from __future__ import annotations

import base64
import html
import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_write_text
from ..errors import ConfigError, DataError
from ..runfolder import check_output_file
from .gaussians import Splats
from .pagepack import encode_page_splats
from .rasterize import ALPHA_MAX, ALPHA_STEPS, FOV_CLAMP, LOW_PASS, NEAR
from .viewpoint import default_view, view_c2w

__all__ = ["write_html", "page_cameras"]

_SCRIPTS = ("decode.js", "renderer.js", "page.js")  # package data, inlined in this order
# renderer.js's placeholders __NAME__ and the numbers they stand for: the Python rasterizer's
SHADER_CONSTANTS = {"NEAR": NEAR, "ALPHA_STEPS": ALPHA_STEPS, "ALPHA_MAX": ALPHA_MAX, "LOW_PASS": LOW_PASS,
                    "FOV_CLAMP": FOV_CLAMP}
_STYLE = """html, body { margin: 0; height: 100%; overflow: hidden; background: #000; }
#canvas { position: fixed; inset: 0; width: 100vw; height: 100vh; display: block; touch-action: none; }
#hud { position: fixed; left: 8px; top: 8px; color: #ddd; font: 13px sans-serif; background: rgba(0,0,0,.55);
       padding: 6px 8px; border-radius: 4px; user-select: none; }
#hud button { font: inherit; padding: 0 6px; }
#hud small { display: block; opacity: .75; margin-top: 3px; }"""


def _as_c2w(value, i: int) -> np.ndarray:
    c2w = np.asarray(value, dtype=np.float64)
    if c2w.shape == (3, 4):
        c2w = np.concatenate([c2w, [[0.0, 0.0, 0.0, 1.0]]])
    if c2w.shape != (4, 4) or not np.isfinite(c2w).all():
        raise ConfigError(f"camera {i}: c2w must be a finite 4 x 4 (or 3 x 4) matrix, got shape {c2w.shape}")
    return c2w


def page_cameras(means: np.ndarray, cameras: list[dict] | None) -> tuple[list[dict], list[float]]:
    """The page's cameras and up vector.

    Each camera: ``c2w`` [4, 4] (OpenGL axes), ``fov_y`` degrees, ``distance`` to its orbit target:
    the median depth of the splat centres in front of it. The up vector: the cameras' mean up axis.
    Without ``cameras``: the one view ``enerf view`` opens a splat file at (``viewpoint.default_view``),
    its ``up`` (the normal of the plane the splats spread along) the page's.

    Args:
        means: [N, 3] splat centres
    """
    centre = np.median(means, 0) if len(means) else np.zeros(3)
    view = None if cameras else default_view(means)
    if view is not None:
        cameras = [{"c2w": view_c2w(view), "fov_y": math.degrees(view["fov"])}]
    out = []
    for i, cam in enumerate(cameras):
        c2w = _as_c2w(cam.get("c2w"), i)
        fov_y = float(cam.get("fov_y", 50.0))
        if not 0.0 < fov_y < 180.0:
            raise ConfigError(f"camera {i}: fov_y must be in (0, 180) degrees, got {fov_y}")
        depth = (means - c2w[:3, 3]) @ -c2w[:3, 2]
        front = depth[depth > 0]
        distance = float(np.median(front)) if len(front) else float(np.linalg.norm(centre - c2w[:3, 3])) or 1.0
        out.append({"c2w": np.round(c2w, 7).tolist(), "fov_y": fov_y, "distance": distance})
    if view is not None:
        return out, [float(v) for v in view["up"]]
    ups = np.array([c["c2w"] for c in out])[:, :3, 1]
    up = ups.mean(0)
    up = up if np.linalg.norm(up) > 1e-6 else ups[0]
    return out, (up / np.linalg.norm(up)).tolist()


def write_html(splats: Splats, out: Path, title: str, cameras: list[dict] | None = None,
               max_splats: int = 500_000, sh_degree: int = 1) -> dict:
    """Write ``out``: one HTML page that renders ``splats`` with WebGL2, opened with no network.

    Args:
        splats: the Gaussians, in the frame the cameras are given in
        out: the .html file (its folder must exist); written atomically
        title: the page's title
        cameras: [{"c2w": [4, 4] OpenGL axes [right, up, back], "fov_y": degrees, "width", "height"}]
            (width and height are not used: the page fills the window at the camera's vertical fov);
            the first is the start view, ``n`` / ``p`` jump between them. None: one looking at the splats
        max_splats: keep at most this many (the largest opacity * volume)
        sh_degree: 0 (band-0 colour) or 1 (band 1 evaluated per splat at each sort, when present)
    Returns:
        dict: path, splats (in the page), splats_in, sh_degree, bytes (the page's size)
    """
    if len(splats) == 0:
        raise DataError("no splats to write into the page")
    if max_splats < 1:
        raise ConfigError(f"max_splats must be at least 1, got {max_splats}")
    if sh_degree not in (0, 1):
        raise ConfigError(f"the page evaluates SH degree 0 or 1, got {sh_degree}")
    out = check_output_file(out, "--out")
    s = splats.map(lambda t: t.detach().to("cpu", torch.float64))
    s = s.select(torch.argsort(s.importance(), descending=True)[:max_splats])
    data, header = encode_page_splats(s, sh_degree)
    header["cameras"], header["up"] = page_cameras(s.means.numpy(), cameras)
    header["background"] = [0.0, 0.0, 0.0]
    script = "\n".join(resources.files(__package__).joinpath(name).read_text(encoding="utf-8") for name in _SCRIPTS)
    for name, value in SHADER_CONSTANTS.items():  # the image formation's numbers, written once (rasterize.py)
        script = script.replace(f"__{name}__", repr(float(value)))
    safe = lambda text: text.replace("</", "<\\/")  # noqa: E731 - nothing in a script may close it
    page = "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
        '<canvas id="canvas"></canvas>',
        f'<div id="hud"><b>{html.escape(title)}</b> <button id="prev" title="previous camera (p)">&#9664;</button>'
        ' camera <span id="which"></span> <button id="next" title="next camera (n)">&#9654;</button>'
        '<small id="status">loading&hellip;</small>'
        "<small>drag: orbit &middot; right/shift drag: pan &middot; wheel: zoom &middot; n/p: cameras &middot; "
        "r: reset</small></div>",
        f'<script type="application/json" id="enerf-header">{safe(json.dumps(header))}</script>',
        f'<script type="application/octet-stream" id="enerf-data">{base64.b64encode(data).decode("ascii")}</script>',
        f"<script>{safe(script)}</script>", "</body>", "</html>", ""])
    atomic_write_text(out, page)
    return {"path": str(out), "splats": header["count"], "splats_in": len(splats), "sh_degree": header["sh_degree"],
            "bytes": out.stat().st_size}
