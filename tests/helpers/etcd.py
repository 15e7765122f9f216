"""A real etcd for rendezvous tests: Debian's `etcd-server` (3.4) on 127.0.0.1 with the v2 API.

torchrun's etcd and etcd-v2 rendezvous backends speak etcd's v2 API through `python-etcd`, which
etcd 3.4 serves only with `--enable-v2=true` (../shared/platforms.md; the EKS guide's elastic
PyTorchJob runs against such a server). Free ports and a data folder under the test's tmp folder,
so tests never share a server. `.ci/run` installs etcd-server: in CI a missing binary is a failure.

    from helpers.etcd import etcd  # noqa: F401  (the fixture: yields the client port)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_etcd(data_dir: Path, start_timeout: float = 30.0) -> Iterator[int]:
    """Start etcd on 127.0.0.1, wait until it answers, yield its client port, stop it."""
    binary = shutil.which("etcd") or "/usr/bin/etcd"
    client, peer = _free_port(), _free_port()
    process = subprocess.Popen(
        [binary, "--name", "default", "--data-dir", str(data_dir), "--enable-v2=true",
         "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
         "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                # /v2/keys answers only when the v2 API torchrun needs is on.
                urllib.request.urlopen(f"http://127.0.0.1:{client}/v2/keys", timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"etcd did not start on 127.0.0.1:{client} (exit {process.poll()})") from None
                time.sleep(0.2)
        yield client
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[int]:
    """A fresh etcd with the v2 API for one test; yields its client port on 127.0.0.1."""
    if shutil.which("etcd") is None and not Path("/usr/bin/etcd").exists():
        if os.environ.get("CI"):
            pytest.fail("CI must run the etcd rendezvous tests: etcd-server is missing (see .ci/run)")
        pytest.skip("needs etcd: apt-get install -y etcd-server (Debian's etcd 3.4)")
    pytest.importorskip("etcd", reason="torchrun's etcd-v2 backend needs python-etcd (the dev extra)")
    with running_etcd(tmp_path / "etcd-data") as port:
        yield port
