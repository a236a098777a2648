"""enerf.download.fetch_checked against a local HTTP server on 127.0.0.1 (in a thread): the file lands
whole or not at all, a wrong hash or an unreachable or silent server gives a one-line reason within the
timeout, and ENERF_NO_DOWNLOAD (which tests/conftest.py sets for the whole session) makes no request."""

import hashlib
import http.server
import socket
import threading
import time

import numpy as np
import pytest
import torch

from enerf import metrics
from enerf.download import NO_DOWNLOAD_ENV, fetch_checked

PAYLOAD = np.random.default_rng(0).bytes(300_000)  # several reads of 64 KiB
PREFIX = hashlib.sha256(PAYLOAD).hexdigest()[:8]


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves PAYLOAD at any path but /missing (404); records each request's path."""

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        if self.path == "/missing":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(PAYLOAD)))
        self.end_headers()
        self.wfile.write(PAYLOAD)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server():
    """(the server, with ``requests``: the paths asked for; its base URL)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def online(monkeypatch):
    """Downloads allowed for this test (only the local server is ever asked)."""
    monkeypatch.delenv(NO_DOWNLOAD_ENV, raising=False)


def test_the_file_lands_with_the_served_bytes_once(server, online, tmp_path):
    httpd, base = server
    dest = tmp_path / "hub" / "checkpoints" / f"weights-{PREFIX}.pth"
    assert fetch_checked(f"{base}/weights-{PREFIX}.pth", dest, PREFIX, timeout=5) is None
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == hashlib.sha256(PAYLOAD).hexdigest()
    assert dest.read_bytes() == PAYLOAD and list(dest.parent.iterdir()) == [dest]  # no temp file left
    assert fetch_checked(f"{base}/weights-{PREFIX}.pth", dest, PREFIX, timeout=5) is None
    assert httpd.requests == [f"/weights-{PREFIX}.pth"]  # the second call finds the file


def test_a_wrong_hash_writes_nothing_and_names_the_hashes(server, online, tmp_path):
    httpd, base = server
    wrong = "0" * 8 if not PREFIX.startswith("0") else "f" * 8
    dest = tmp_path / "checkpoints" / f"weights-{wrong}.pth"
    reason = fetch_checked(f"{base}/weights-{wrong}.pth", dest, wrong, timeout=5)
    assert reason and "\n" not in reason
    assert f"not the expected {wrong}" in reason and hashlib.sha256(PAYLOAD).hexdigest()[:16] in reason
    assert list(dest.parent.iterdir()) == [] and httpd.requests == [f"/weights-{wrong}.pth"]


def test_an_http_error_is_named(server, online, tmp_path):
    _, base = server
    reason = fetch_checked(f"{base}/missing", tmp_path / "w.pth", PREFIX, timeout=5)
    assert reason == f"downloading {base}/missing failed: HTTP Error 404: Not Found"
    assert list(tmp_path.iterdir()) == []


def test_a_closed_port_fails_at_once(online, tmp_path):
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    tic = time.monotonic()
    reason = fetch_checked(f"http://127.0.0.1:{port}/w.pth", tmp_path / "w.pth", PREFIX, timeout=2)
    assert time.monotonic() - tic < 2
    assert reason.startswith(f"downloading http://127.0.0.1:{port}/w.pth failed: ") and "refused" in reason
    assert list(tmp_path.iterdir()) == []


def test_a_silent_server_times_out(online, tmp_path):
    with socket.socket() as sock:  # connections complete in the kernel's backlog, but nothing answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/w.pth"
        tic = time.monotonic()
        reason = fetch_checked(url, tmp_path / "w.pth", PREFIX, timeout=0.5)
        assert 0.5 <= time.monotonic() - tic < 3
    assert reason == f"downloading {url} failed: timed out"
    assert list(tmp_path.iterdir()) == []


def test_no_download_env_makes_no_request(server, monkeypatch, tmp_path):
    httpd, base = server
    monkeypatch.setenv(NO_DOWNLOAD_ENV, "1")
    reason = fetch_checked(f"{base}/weights-{PREFIX}.pth", tmp_path / "w.pth", PREFIX, timeout=5)
    assert reason == f"not downloading {base}/weights-{PREFIX}.pth: {NO_DOWNLOAD_ENV} is set"
    assert httpd.requests == [] and list(tmp_path.iterdir()) == []


def test_make_lpips_reports_a_bad_download_and_keeps_nothing(server, online, monkeypatch, tmp_path):
    """make_lpips fetches from ALEXNET_WEIGHTS_URL: a file whose hash is not 7be5be79 is refused."""
    httpd, base = server
    monkeypatch.setattr(torch.hub, "_hub_dir", str(tmp_path))
    monkeypatch.setattr(metrics, "ALEXNET_WEIGHTS_URL", f"{base}/alexnet-owt-7be5be79.pth")
    metric, reason = metrics.make_lpips("cpu", download_timeout=5)
    assert metric is None and "\n" not in reason and httpd.requests == ["/alexnet-owt-7be5be79.pth"]
    assert f"{tmp_path / 'checkpoints' / 'alexnet-owt-7be5be79.pth'} are missing (the file from " in reason
    assert f"{base}/alexnet-owt-7be5be79.pth has SHA-256 " in reason and "not the expected 7be5be79" in reason
    assert list((tmp_path / "checkpoints").iterdir()) == []
