"""Minor defects of `cloudddp stage` an exploratory test found: a damaged hash cache, unchecked S3 prefixes,
SIGTERM during a stage, the message for rejected credentials, and the --shards progress total."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from cloudddp.errors import CloudDDPError
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.hash_cache import HashCache
from cloudddp.staging.local_files import describe
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import SHARDS
from cloudddp.staging.progress import RichProgress
from cloudddp.staging.s3_direct import DirectS3Store, plain_configuration
from cloudddp.staging.s3_http import Response
from cloudddp.staging.s3_store import S3Store


@pytest.mark.parametrize(
    "files",
    [{"a.txt": 5}, {"a.txt": [1, 2]}, {"a.txt": [[0], 1, 2, 3, 4]}, {"a.txt": "x"}, {"a.txt": {"k": 1}}],
)
def test_a_hash_cache_entry_of_the_wrong_shape_is_ignored(tmp_path: Path, files: dict) -> None:
    # {"a.txt": 5} made lookup raise TypeError ('int' object is not subscriptable): a traceback, exit 1.
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.txt").write_bytes(b"a")
    cache = HashCache(tmp_path / "cache", root)
    cache.path.parent.mkdir()
    cache.path.write_text(json.dumps({"format": 2, "files": files}))
    assert HashCache(tmp_path / "cache", root).lookup(describe(root / "a.txt", "a.txt"), None) is None


@pytest.mark.parametrize(
    ("uri", "problem"),
    [("s3://bkt/new\nline", "white space or a control character"), ("s3://bkt/a\tb", "white space or a control "
     "character"), ("s3://bkt/a//b", "an empty segment (//)"), ("s3://bkt/x/../y", "a '.' or '..' segment"),
     ("s3://bkt/./y", "a '.' or '..' segment"), ("s3://bkt//y", "an empty segment (//)")],
)  # fmt: skip
def test_an_s3_prefix_that_would_be_read_under_another_key_is_refused(uri: str, problem: str) -> None:
    # Accepted before: a newline split the URI that `cloudddp stage | tail -1` hands on, and SeaweedFS stored
    # `a//b` under `a/b`, so the printed URI listed nothing.
    with pytest.raises(CloudDDPError, match=re.escape(f"the destination {uri!r}: the prefix has {problem};")):
        parse_location(uri)


@pytest.mark.parametrize("uri", ["s3://bkt/team/project/", "s3://bkt/", "s3://bkt", "s3://bkt/a.b/c..d/+x"])
def test_an_ordinary_s3_prefix_and_trailing_slashes_are_accepted(uri: str) -> None:
    assert parse_location(uri).prefix == uri[len("s3://bkt") :].strip("/")


@pytest.mark.process
def test_a_bad_s3_prefix_exits_2_with_one_paragraph(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"a")
    result = subprocess.run([sys.executable, "-c", "from cloudddp.console import main; main()", "stage",
                             str(tmp_path), "s3://bkt/new\nline"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stdout == ""
    assert "the prefix has white space or a control character" in result.stderr


TERMINATED = """
import os, signal, sys, tempfile, time, shutil
from pathlib import Path
from cloudddp import stage_cli as cli

# As in a terminal session: a parent started under nohup (as a CI job may be) passes SIGHUP on ignored, and
# cli.Interrupts.catch rightly leaves an ignored signal ignored.
signal.signal(signal.SIGHUP, signal.SIG_DFL)

def run(args):  # stands for the engine: a shard folder removed in `finally`, as engine.stage does
    work = Path(tempfile.mkdtemp(prefix="cloudddp-shards-", dir=sys.argv[1]))
    try:
        print("ready", flush=True)
        time.sleep(60)
    finally:
        shutil.rmtree(work)

cli.run = run
cli.main(["data", "s3://bkt/x"])  # parsed, then handed to the run above
"""


@pytest.mark.process
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_takes_the_path_of_ctrl_c(tmp_path: Path, signum: int) -> None:
    # Before: SIGTERM ended the process at once (rc -15), silently, leaving the shard build folder behind.
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(TERMINATED), str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    assert len(list(tmp_path.glob("cloudddp-shards-*"))) == 1
    process.send_signal(signum)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 128 + signum, err
    assert err.startswith("cloudddp: interrupted.") and "Traceback" not in err
    assert not list(tmp_path.glob("cloudddp-shards-*"))


def direct_store(tmp_path: Path, answers: list[Response]) -> DirectS3Store:
    """A DirectS3Store whose requests get `answers` in turn (no server)."""
    env = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_DEFAULT_REGION": "us-east-1"}
    plain = plain_configuration(env, tmp_path)
    assert plain is not None
    store = DirectS3Store(parse_location("s3://bkt/x"), plain)
    store.call = lambda *args, **kwargs: answers.pop(0)  # type: ignore[method-assign]
    return store


def xml_error(code: str) -> Response:
    return Response(403, {}, f"<Error><Code>{code}</Code></Error>".encode())


@pytest.mark.parametrize("code", ["InvalidAccessKeyId", "SignatureDoesNotMatch"])
def test_rejected_credentials_are_named_as_such_not_as_a_missing_permission(tmp_path: Path, code: str) -> None:
    # HeadBucket's 403 has no body: the empty listing that follows it names the code. Before, the message was
    # "cannot use the bucket in the bucket s3://bkt: access denied (HTTP 403) ... grant s3:PutObject".
    store = direct_store(tmp_path, [Response(403, {}, b""), xml_error(code)])
    with pytest.raises(CloudDDPError) as raised:
        store.check_bucket(False)
    assert str(raised.value).startswith(f"cannot use the bucket s3://bkt: S3 rejected the credentials ({code})")
    assert "grant" not in str(raised.value)


def test_a_missing_permission_still_says_access_denied_once(tmp_path: Path) -> None:
    store = direct_store(tmp_path, [Response(403, {}, b""), xml_error("AccessDenied")])
    with pytest.raises(CloudDDPError, match=r"^cannot use the bucket s3://bkt: access denied \(AccessDenied\)\. "):
        store.check_bucket(False)


@pytest.mark.parametrize("code", ["InvalidAccessKeyId", "SignatureDoesNotMatch"])
def test_rejected_credentials_through_botocore_are_named_too(code: str) -> None:
    exc = ClientError({"Error": {"Code": code, "Message": "m"}}, "PutObject")
    message = str(S3Store(None, parse_location("s3://bkt/x"), "us-east-1").error(exc, "write", "x/a"))
    assert message.startswith(f"cannot write s3://bkt/x/a: S3 rejected the credentials ({code})"), message


def test_the_progress_total_grows_with_an_object_it_left_out() -> None:
    bar = RichProgress()
    bar.start(2, 100)  # as engine.send_shards does: the index counted, its bytes not (unknown yet)
    bar.advance(100)
    bar.advance(30)
    bar.finish()
    task = bar.bar.tasks[0]
    assert (task.completed, task.total, task.fields["files"]) == (130, 130, "2/2 objects")


def test_a_shard_stage_never_shows_more_bytes_than_its_total(tmp_path: Path) -> None:
    # Before: `upload 9/9 files 32.5/32.3 MB`: the index sent but left out of the total, shards called files.
    data = tmp_path / "data"
    for i in range(40):
        (data / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
        (data / f"c{i % 2}" / f"{i}.bin").write_bytes(os.urandom(50_000))
    seen: list[tuple[float, float | None, str]] = []

    class Watched(RichProgress):
        def advance(self, size: int) -> None:
            super().advance(size)
            task = self.bar.tasks[0]
            seen.append((task.completed, task.total, task.fields["files"]))

    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        options = StageOptions(layout=SHARDS, shard_size=1024 * 1024)
        stage(data, S3Store(client, parse_location("s3://bkt/p")), options, Watched())
    assert seen and all(total is not None and done <= total for done, total, _ in seen)
    assert seen[-1][0] == seen[-1][1] and seen[-1][2] == f"{len(seen)}/{len(seen)} objects"
