"""What the viewer server keeps per browser, and what it checks before it opens: viser itself and
the port (a port in use is a one-line error, never a silent move to the next one)."""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, EnerfError

__all__ = ["INSTALL_HINT", "import_viser", "check_port", "FrameInfo", "Browser"]

INSTALL_HINT = 'pip install -e ".[viewer]"'


def import_viser():
    """The viser module, or an EnerfError naming the install command."""
    try:
        import viser
    except ImportError:
        raise EnerfError(f"the viewer needs viser, which is not installed: {INSTALL_HINT}") from None
    return viser


def check_port(host: str, port: int) -> None:
    """ConfigError (one line) when ``host:port`` cannot be listened on; port 0 (any) always can."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"host {host!r} does not resolve ({exc.strerror}); use 127.0.0.1 or an address of this "
                          "machine", ("host",)) from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is no conflict
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is in use (another viewer?); pass another port "
                                  "or 0 for any free one", ("port",)) from None
            raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror})", ("host", "port")) from None


@dataclass
class FrameInfo:
    """The last frame sent to one browser."""

    version: int  # the camera / panel version it shows
    level: int
    width: int
    height: int
    focal: float
    c2w: np.ndarray  # [3, 4] scene space
    final: bool  # the finest level for that camera (an exact frame: the pixels of ``enerf render``)
    draft: bool  # rendered with the draft renderer (fewer samples per ray; ``draft.py``)
    seconds: float  # time to render it
    step: int  # the first run's step when it was rendered


@dataclass
class Browser:
    """One connected browser and where its progressive frame stands."""

    client: object  # viser.ClientHandle
    version: int = 0  # bumped by every camera move and panel change
    started: int = -1  # the version the current level sequence renders
    level: int = 0  # next level to render
    done: bool = False  # the finest level of ``started`` was sent
    drafted: bool = False  # a draft frame at the resolution cap of ``started`` was sent (the exact one is next)
    done_step: int = -1  # the run's step of that finest frame (training: refresh when it moves on)
    sent_at: float = 0.0  # time.perf_counter() of the last frame sent
    last: FrameInfo | None = None
    frames: int = 0  # frames sent
    moved_at: float = 0.0  # time.perf_counter() of the camera's last move
    splats: object = None  # its splat node (viser GaussianSplatHandle; splat_layer.py), None: no splats
    showing_splats: bool = False  # the splats show (no field frame)
