"""One file fetched once, the way torch.hub does it, or a one-line reason why not.

``fetch_checked`` downloads a URL into a temp file beside its destination, checks that the file's
SHA-256 starts with the hex prefix the file name carries (torch.hub's ``check_hash``: torchvision's
``alexnet-owt-7be5be79.pth`` → ``7be5be79``) and only then renames it onto the destination, so a
half-written or wrong file never takes the name. Connecting and each read give up after ``timeout``
seconds. ``ENERF_NO_DOWNLOAD=1`` (any value but empty or ``0``) forbids every download: the test
suite sets it, and so can a machine that must not reach out.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from .atomic import publish
from .progress import progress_bar

__all__ = ["NO_DOWNLOAD_ENV", "downloads_forbidden", "fetch_checked"]

NO_DOWNLOAD_ENV = "ENERF_NO_DOWNLOAD"
_CHUNK = 1 << 16


def downloads_forbidden() -> bool:
    """Whether ``ENERF_NO_DOWNLOAD`` forbids downloads (set to anything but empty or ``0``)."""
    return os.environ.get(NO_DOWNLOAD_ENV, "").strip() not in ("", "0")


def _first_line(exc: BaseException) -> str:
    """The error's first line; a URLError's reason without urllib's ``<urlopen error ...>`` wrapper."""
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        exc = exc.reason
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def fetch_checked(url: str, path: Path, sha256_prefix: str, timeout: float = 10.0,
                  progress: bool = True) -> str | None:
    """Download ``url`` to ``path`` unless ``path`` is a file already.

    Args:
        url: where the file is (http, https or file).
        path: where it goes; its folder is made.
        sha256_prefix: the hex digits the file's SHA-256 must start with (non-empty).
        timeout: seconds to connect, and to wait for each chunk, before giving up.
        progress: a one-line tqdm bar of bytes on stderr (shown only on a terminal).

    Returns:
        None once ``path`` holds the checked file, else a one-line reason naming what failed
        (downloads forbidden, the URL or network error, the hash) and the URL. Nothing is left behind
        on failure.
    """
    path = Path(path)
    if path.is_file():
        return None
    if downloads_forbidden():
        return f"not downloading {url}: {NO_DOWNLOAD_ENV} is set"
    if not sha256_prefix:
        raise ValueError("fetch_checked needs the SHA-256 prefix the file must match")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        return f"cannot download {url} into {path.parent}: {_first_line(exc)}"
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            size = int(response.headers.get("Content-Length") or 0) or None
            with progress_bar(size, f"downloading {path.name}", enabled=progress, unit="B", leave=False) as bar:
                while chunk := response.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
        if not digest.hexdigest().startswith(sha256_prefix):
            return (f"the file from {url} has SHA-256 {digest.hexdigest()[:16]}..., not the expected "
                    f"{sha256_prefix}...")
        publish(tmp, path)
        return None
    except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError, timeouts, resets: OSErrors
        return f"downloading {url} failed: {_first_line(exc)}"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
