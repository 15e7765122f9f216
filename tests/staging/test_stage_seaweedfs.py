"""End to end against a real S3 server (SeaweedFS on 127.0.0.1): `cloudddp stage` as a user
runs it (cloudddp's PUT client), then list, download and byte-compare. Requests are counted
by a pass-through proxy between the client and the server (tests/staging/s3_gate.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from helpers import CLI_FOR_CTRL_C, clean_env, cli, run_cli
from helpers.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3
from s3_gate import S3Gate
from shard_members import unpacked

from cloudddp.errors import CloudDDPError
from cloudddp.staging import hash_cache
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


# Names S3 signs and addresses with care: SigV4 encodes every byte but unreserved ones, once, in the canonical path;
# `+`, `%`, `?`, `#` and `;` change meaning in a URL unless encoded; a space and non-ASCII letters encode to %XX.
AWKWARD_NAMES = ("a b.txt", "x+y.txt", "p%20q", "q?.txt", "h#.txt", "semi;colon", "eq=&amp.txt", "star*[1](2)",
                 "tilde~,@$!'.txt", "café/naïve 日本.txt", "sub dir/deep/x y+z.bin")  # fmt: skip


@pytest.mark.slow
def test_file_names_that_need_encoding_arrive_under_their_own_names(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    for name in AWKWARD_NAMES:
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_bytes(os.urandom(100) + name.encode())
    done = run_cli("stage", str(data), "s3://data/names", env=env_for(seaweed, gate), timeout=300)
    assert done.returncode == 0, done.stderr
    uri = done.stdout.strip().splitlines()[-1]
    assert downloaded(seaweed, uri) == local(data)  # keys listed by the server, bodies fetched by boto3
    gate.reset()
    again = run_cli("stage", str(data), "s3://data/names", env=env_for(seaweed, gate), timeout=300)
    assert again.returncode == 0 and again.stdout.strip().splitlines()[-1] == uri, again.stderr
    assert gate.count("PUT") == 0


def test_the_server_rejects_bytes_that_do_not_match_the_scanned_checksum(
    seaweed: SeaweedS3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in seaweed.env().items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "f.bin"
    path.write_bytes(b"real bytes")
    wrong = "00" * 32  # the SHA-256 of other bytes: what S3 sees when bytes are damaged in transit
    for transport in ("auto", "boto3"):  # cloudddp's PUT client (s3_http.py), then boto3's
        store = open_s3_store(parse_location("s3://data/integrity"), transport)
        assert (store.puts is not None) == (transport == "auto")
        with pytest.raises(CloudDDPError, match=r"f\.bin.*do not match their checksum"):
            store.upload([Upload("integrity/f.bin", path, path.stat().st_size, wrong)], lambda _: None)
    assert "Contents" not in client(seaweed).list_objects_v2(Bucket="data", Prefix="integrity/")


def test_wrong_credentials_and_missing_buckets_are_named_without_secrets(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = make_data(tmp_path / "data", 3)
    denied = cli(
        "stage", str(data), "s3://data/x", env=env_for(seaweed, gate, AWS_SECRET_ACCESS_KEY="wrong-secret-value")
    )
    assert (
        denied.returncode == 2
        and "s3://data" in denied.stderr
        and "rejected the credentials (SignatureDoesNotMatch)" in denied.stderr
    )
    assert "wrong-secret-value" not in denied.stderr + denied.stdout and "Traceback" not in denied.stderr
    missing = cli("stage", str(data), "s3://no-such-bucket/x", env=env_for(seaweed, gate))
    assert missing.returncode == 2 and "s3://no-such-bucket does not exist" in missing.stderr
    assert "--create-bucket" in missing.stderr
    assert gate.count("PUT") == 0


def stage_held_after(puts: int, seaweed: SeaweedS3, gate: S3Gate, data: Path, uri: str) -> subprocess.Popen[str]:
    """`cloudddp stage DATA URI` in a subprocess, returned once `puts` PUTs went through and the next is held
    at the gate. Started as `helpers.CLI_FOR_CTRL_C`, so a test may also press Ctrl-C."""
    gate.allow_puts(puts)
    argv = [sys.executable, *CLI_FOR_CTRL_C, "stage", str(data), uri]
    process = subprocess.Popen(argv, env=clean_env(env_for(seaweed, gate)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    if not gate.wait_for(lambda s: s.forwarded["PUT"] == puts and s.held > 0, timeout=120):
        process.kill()
        pytest.fail(f"no PUT held after {puts}: {process.communicate()[1][-2000:]}")
    return process


def ended_after(process: subprocess.Popen[str], act: Callable[[], None], timeout: float) -> tuple[str, str]:
    """Do `act` to a held stage (stage_held_after), then wait for it to end: its (stdout, stderr)."""
    try:
        act()
        return process.communicate(timeout=timeout)
    finally:
        process.kill()


def rerun_sends_only_the_rest(seaweed: SeaweedS3, gate: S3Gate, data: Path, uri: str) -> set[str]:
    """After an interrupted stage of DATA to URI: release what the gate held, rerun, and check the rerun kept
    every object the server holds and sent only the rest and the manifest. Returns the paths that had landed."""
    gate.drop_held()
    assert gate.wait_for(lambda s: s.in_flight == 0, timeout=60)  # the first client's last requests are over
    prefix = uri.removeprefix("s3:/")
    landed = {f"{prefix}/{k}" for k in downloaded(seaweed, uri + "/")}  # what the server holds now
    assert not [t for t in landed if t.endswith(MANIFEST_NAME)]  # nothing was published
    gate.reset()
    rerun = run_cli("stage", str(data), uri, env=env_for(seaweed, gate), timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    # Every PUT answered landed; one sent just before the client stopped may have landed too (the server
    # stored it, its answer reached no one): the rerun keeps every object the server holds.
    assert f"{len(landed)} already there from an interrupted run" in rerun.stdout
    second_run = {t for m, t in gate.state.targets if m == "PUT"}  # a set: the CRT may retry a PUT (503 SlowDown)
    assert len(second_run) == len(local(data)) - len(landed) + 1 and not second_run & landed, second_run
    assert downloaded(seaweed, rerun.stdout.strip().splitlines()[-1]) == local(data)
    return landed


@pytest.mark.slow
def test_kill_9_at_half_way_then_rerun_sends_only_the_rest(seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path) -> None:
    data = make_data(tmp_path / "data", 40)
    process = stage_held_after(20, seaweed, gate, data, "s3://data/killed")
    process.kill()  # SIGKILL: no cleanup of any kind runs
    process.wait()
    assert process.returncode == -signal.SIGKILL
    answered = zip(gate.state.targets, gate.state.statuses, strict=True)
    first_run = {t for (m, t), status in answered if m == "PUT" and status == 200}  # a loaded server may say 503
    assert not [t for t in first_run if t.endswith(MANIFEST_NAME)]  # nothing was published
    landed = rerun_sends_only_the_rest(seaweed, gate, data, "s3://data/killed")
    assert first_run <= landed, first_run - landed


@pytest.mark.slow
def test_connections_lost_mid_upload_are_retried_and_the_stage_completes(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    data = make_data(tmp_path / "data", 30)
    process = stage_held_after(10, seaweed, gate, data, "s3://data/lost")
    # Every held PUT's connection is closed without an answer; later PUTs go through.
    out, err = ended_after(process, gate.drop_held, timeout=300)
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
    process = stage_held_after(10, seaweed, gate, data, "s3://data/ctrlc")
    out, err = ended_after(process, lambda: process.send_signal(signal.SIGINT), timeout=120)
    assert process.returncode == 130, err
    assert "cloudddp: interrupted. Run the same command again to finish" in err and "Traceback" not in err
    assert out == ""  # no URI: nothing was published
    assert len(rerun_sends_only_the_rest(seaweed, gate, data, "s3://data/ctrlc")) >= 10


def settle(root: Path) -> None:
    """Wait until every file under `root` was written longer ago than the 2 s in which a stat may not show a
    write (hash_cache.RACY_NS): a first shard stage then names its version from the scan."""
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in root.rglob("*") if p.is_file())
    time.sleep(max(0.0, (newest + hash_cache.RACY_NS) / 1e9 + 0.2 - time.time()))


@pytest.mark.slow
def test_kill_9_during_a_first_shard_stage_then_rerun_sends_only_the_missing_shards(
    seaweed: SeaweedS3, gate: S3Gate, tmp_path: Path
) -> None:
    """The one-pass first stage of several shards (its version named from the scan), killed after two shards
    landed: the rerun finds them under the same name, sends the other three, the index and the manifest."""
    data = make_data(tmp_path / "data", 10, size=600 * 1024)  # 2 files a shard at --shard-size 1: 5 shards
    settle(data)
    uri, flags = "s3://data/shards-killed", ["--shards", "--shard-size", "1"]
    gate.allow_puts(2)
    argv = [sys.executable, *CLI_FOR_CTRL_C, "stage", str(data), uri, *flags]
    process = subprocess.Popen(argv, env=clean_env(env_for(seaweed, gate)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    if not gate.wait_for(lambda s: s.forwarded["PUT"] == 2 and s.held > 0, timeout=120):
        process.kill()
        pytest.fail(f"no PUT held after 2: {process.communicate()[1][-2000:]}")
    process.kill()  # SIGKILL
    process.wait()
    gate.drop_held()
    assert gate.wait_for(lambda s: s.in_flight == 0, timeout=60)
    landed = downloaded(seaweed, uri + "/")
    assert MANIFEST_NAME not in landed and len(landed) >= 2
    gate.reset()
    rerun = run_cli("stage", str(data), uri, *flags, env=env_for(seaweed, gate), timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    published = rerun.stdout.strip().splitlines()[-1]
    assert all(name.startswith(published.removeprefix(uri + "/")) for name in landed)  # resumed under its name
    assert f"{len(landed)} already there from an interrupted run" in rerun.stdout
    sent = {t.rsplit("/", 1)[1] for m, t in gate.state.targets if m == "PUT"}
    assert len(sent) == 5 + 1 - len(landed) + 1 and not sent & {n.rsplit("/", 1)[1] for n in landed}, sent
    assert unpacked(downloaded(seaweed, published)) == local(data)
    manifest = json.loads(downloaded(seaweed, uri + "/")[MANIFEST_NAME])
    assert published.endswith(f"/{manifest['version']}/") and manifest["content"] != manifest["version"]  # scan-named
