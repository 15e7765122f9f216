"""End to end against a real S3 server (SeaweedFS on 127.0.0.1): `cloudddp stage` as a user
runs it (the awscrt transport), then list, download and byte-compare. Requests are counted
by a pass-through proxy between the client and the server (tests/staging/s3_gate.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from helpers import CLI_FOR_CTRL_C, clean_env, run_cli
from helpers.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3
from s3_gate import S3Gate

from cloudddp.errors import CloudDDPError
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import MANIFEST_NAME
from cloudddp.staging.s3_store import open_s3_store
from cloudddp.staging.store import Upload


def client(server: SeaweedS3) -> Any:
    return boto3.client("s3", endpoint_url=server.url, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1")  # fmt: skip


def env_for(seaweed: SeaweedS3, gate: S3Gate, **extra: str) -> dict[str, str]:
    home = seaweed.folder / "home"  # no ~/.aws of the person running the tests
    return {**seaweed.env(), "AWS_ENDPOINT_URL": gate.url, "HOME": str(home), **extra}


def make_data(root: Path, files: int, size: int = 4000) -> Path:
    for i in range(files):
        path = root / f"class{i % 3}" / f"sub{i % 2}" / f"{i:04d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size + i))
    return root


def downloaded(server: SeaweedS3, uri: str) -> dict[str, bytes]:
    location = parse_location(uri)
    prefix = location.key() + "/"
    s3 = client(server)
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix)
            for o in page.get("Contents", [])]  # fmt: skip
    return {k[len(prefix) :]: s3.get_object(Bucket=location.bucket, Key=k)["Body"].read() for k in keys}


def local(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_stage_then_download_gives_the_same_bytes_and_a_restage_sends_nothing(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = make_data(tmp_path / "data", 60)
    (data / "big.bin").write_bytes(os.urandom(65 * 1024 * 1024 + 3))  # above the 64 MiB multipart threshold: parts
    done = run_cli("stage", str(data), "s3://data/e2e", env=env_for(seaweed, gate), timeout=300)
    assert done.returncode == 0, done.stderr
    uri = done.stdout.strip().splitlines()[-1]
    assert uri.startswith("s3://data/e2e/v-") and uri.endswith("/")
    assert downloaded(seaweed, uri) == local(data)
    assert gate.count("PUT") >= 62  # 60 small files, the parts of big.bin, the manifest
    gate.reset()
    again = run_cli("stage", str(data), "s3://data/e2e", env=env_for(seaweed, gate), timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == uri
    assert (gate.count("PUT"), gate.count("POST"), gate.count("DELETE")) == (0, 0, 0)


def test_the_server_rejects_bytes_that_do_not_match_the_scanned_checksum(
    seaweed: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in seaweed.env().items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "f.bin"
    path.write_bytes(b"real bytes")
    wrong = "00" * 32  # the SHA-256 of other bytes: what S3 sees when bytes are damaged in transit
    for transport in ("crt", "boto3"):
        store = open_s3_store(parse_location("s3://data/integrity"), transport)
        assert (store.crt is not None) == (transport == "crt")
        with pytest.raises(CloudDDPError, match=r"f\.bin.*do not match their checksum"):
            store.upload([Upload("integrity/f.bin", path, path.stat().st_size, wrong)], lambda _: None)
    assert "Contents" not in client(seaweed).list_objects_v2(Bucket="data", Prefix="integrity/")


def test_wrong_credentials_and_missing_buckets_are_named_without_secrets(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = make_data(tmp_path / "data", 3)
    denied = run_cli(
        "stage", str(data), "s3://data/x", env=env_for(seaweed, gate, AWS_SECRET_ACCESS_KEY="wrong-secret-value")
    )
    assert denied.returncode == 2 and "s3://data" in denied.stderr and "access denied" in denied.stderr
    assert "wrong-secret-value" not in denied.stderr + denied.stdout and "Traceback" not in denied.stderr
    missing = run_cli("stage", str(data), "s3://no-such-bucket/x", env=env_for(seaweed, gate))
    assert missing.returncode == 2 and "s3://no-such-bucket does not exist" in missing.stderr
    assert "--create-bucket" in missing.stderr
    assert gate.count("PUT") == 0


@pytest.mark.slow
def test_kill_9_at_half_way_then_rerun_sends_only_the_rest(seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", 40)
    gate.allow_puts(20)
    argv = [sys.executable, "-c", "from cloudddp.console import main; main()", "stage", str(data), "s3://data/killed"]
    process = subprocess.Popen(argv, env=clean_env(env_for(seaweed, gate)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)  # fmt: skip
    try:
        reached = gate.wait_for(lambda s: s.forwarded["PUT"] == 20 and s.held > 0, timeout=120)
        assert reached, process.stderr.read() if process.poll() is not None else "no PUT held"
    finally:
        process.kill()  # SIGKILL: no cleanup of any kind runs
        process.wait()
    assert process.returncode == -signal.SIGKILL
    first_run = {t for m, t in gate.state.targets if m == "PUT"}
    assert not [t for t in first_run if t.endswith(MANIFEST_NAME)]  # nothing was published
    gate.drop_held()
    assert gate.wait_for(lambda s: s.in_flight == 0, timeout=60)  # the killed client's last requests are over
    landed = {f"/data/killed/{k}" for k in downloaded(seaweed, "s3://data/killed/")}  # what the server holds now
    assert first_run <= landed
    gate.reset()
    rerun = run_cli("stage", str(data), "s3://data/killed", env=env_for(seaweed, gate), timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    # At least the 20 PUTs answered landed; one the killed client sent just before dying may have landed too
    # (the server stored it, its answer reached no one): the rerun keeps every object the server holds.
    assert f"{len(landed)} already there from an interrupted run" in rerun.stdout
    second_run = {t for m, t in gate.state.targets if m == "PUT"}  # a set: the CRT may retry a PUT (503 SlowDown)
    assert len(second_run) == 40 - len(landed) + 1 and not second_run & landed, second_run  # the rest, the manifest
    assert downloaded(seaweed, rerun.stdout.strip().splitlines()[-1]) == local(data)


@pytest.mark.slow
def test_connections_lost_mid_upload_are_retried_and_the_stage_completes(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = make_data(tmp_path / "data", 30)
    gate.allow_puts(10)
    argv = [sys.executable, "-c", "from cloudddp.console import main; main()", "stage", str(data), "s3://data/lost"]
    process = subprocess.Popen(argv, env=clean_env(env_for(seaweed, gate)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        reached = gate.wait_for(lambda s: s.forwarded["PUT"] == 10 and s.held > 0, timeout=120)
        assert reached, "no PUT held"
        gate.drop_held()  # every held PUT's connection is closed without an answer; later PUTs go through
        out, err = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 0, err
    uri = out.strip().splitlines()[-1]
    assert downloaded(seaweed, uri) == local(data)
    sent = [t for m, t in gate.state.targets if m == "PUT"]
    in_flight_when_dropped = {t for m, t in gate.state.late if m == "PUT"}
    assert len(set(sent) | in_flight_when_dropped) == 31 and sent[-1].endswith(MANIFEST_NAME)  # the manifest last


@pytest.mark.slow
def test_ctrl_c_mid_upload_says_how_to_finish_and_the_rerun_sends_only_the_rest(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = make_data(tmp_path / "data", 30)
    gate.allow_puts(10)
    argv = [sys.executable, *CLI_FOR_CTRL_C, "stage", str(data), "s3://data/ctrlc"]
    process = subprocess.Popen(argv, env=clean_env(env_for(seaweed, gate)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        reached = gate.wait_for(lambda s: s.forwarded["PUT"] == 10 and s.held > 0, timeout=120)
        assert reached, "no PUT held"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "cloudddp: interrupted. Run the same command again to finish" in err and "Traceback" not in err
    assert out == ""  # no URI: nothing was published
    gate.drop_held()
    assert gate.wait_for(lambda s: s.in_flight == 0, timeout=60)
    landed = {f"/data/ctrlc/{k}" for k in downloaded(seaweed, "s3://data/ctrlc/")}
    assert not [t for t in landed if t.endswith(MANIFEST_NAME)] and len(landed) >= 10
    gate.reset()
    rerun = run_cli("stage", str(data), "s3://data/ctrlc", env=env_for(seaweed, gate), timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(landed)} already there from an interrupted run" in rerun.stdout
    assert len({t for m, t in gate.state.targets if m == "PUT"}) == 30 - len(landed) + 1  # the rest, the manifest
    assert downloaded(seaweed, rerun.stdout.strip().splitlines()[-1]) == local(data)
