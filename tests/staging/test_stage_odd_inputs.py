"""`cloudddp stage` with inputs exploratory testing found mishandled: links, special files, odd names and settings."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from helpers import cli, run_cli
from helpers.seaweedfs import SeaweedS3

from cloudddp.errors import CloudDDPError
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import MANIFEST_NAME
from cloudddp.staging.s3_store import S3Store


def store(client: Any, uri: str = "s3://bkt/ds") -> S3Store:
    return S3Store(client, parse_location(uri), "us-east-1")


def staged(client: Any, uri: str, version: str) -> dict[str, bytes]:
    location = parse_location(uri)
    prefix = f"{location.key(version)}/"
    listed = client.list_objects_v2(Bucket=location.bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix) :]: client.get_object(Bucket=location.bucket, Key=o["Key"])["Body"].read()
            for o in listed}  # fmt: skip


def test_links_to_one_folder_side_by_side_are_staged_under_each_path_not_called_a_loop(s3: Any, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "x.jpg").write_bytes(b"image bytes")
    data = tmp_path / "data"
    (data / "real").mkdir(parents=True)
    (data / "real" / "r.txt").write_bytes(b"real")
    (data / "train").symlink_to("../shared")
    (data / "val").symlink_to("../shared")
    (data / "alias").symlink_to("real")
    result = stage(data, store(s3))
    assert staged(s3, "s3://bkt/ds", result.version) == {
        "alias/r.txt": b"real", "real/r.txt": b"real", "train/x.jpg": b"image bytes", "val/x.jpg": b"image bytes",
    }  # fmt: skip


def test_a_link_back_to_a_folder_that_holds_it_is_still_a_loop(s3: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "a" / "b").mkdir(parents=True)
    (data / "a" / "b" / "up").symlink_to("../../a")
    with pytest.raises(
        CloudDDPError, match=r"symlink loop under .*'.*/data/a/b/up' leads back to a folder that holds it"
    ):
        stage(data, store(s3))


@pytest.mark.parametrize("kind", ["fifo", "link-to-device"])
def test_a_special_file_is_refused_by_name_never_skipped(s3: Any, tmp_path: Path, kind: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_bytes(b"a")
    if kind == "fifo":
        os.mkfifo(data / "pipe")
        expected = r"'.*/data/pipe' under .* is neither a file nor a folder \(a device, FIFO or socket\)"
    else:
        (data / "devnull").symlink_to("/dev/null")  # exists: not a broken link, as it used to be called
        expected = r"'.*/data/devnull' under .* is a link to neither a file nor a folder"
    with pytest.raises(CloudDDPError, match=expected):
        stage(data, store(s3))
    assert "Contents" not in s3.list_objects_v2(Bucket="bkt")


def test_a_manifest_that_is_json_but_no_object_is_named_not_a_traceback(s3: Any, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"a")
    s3.put_object(Bucket="bkt", Key=f"ds/{MANIFEST_NAME}", Body=b"[]")
    with pytest.raises(CloudDDPError, match=r"is not a cloudddp staging manifest \(JSON list, not an object\)"):
        stage(tmp_path, store(s3))


@pytest.mark.parametrize("bucket", ["my..bucket", "192.168.5.4", "xn--abc", "sthree-data"])
def test_bucket_names_aws_forbids_are_refused_before_any_call(bucket: str) -> None:
    with pytest.raises(CloudDDPError, match=rf"has no valid S3 bucket name \('{bucket}'\)"):
        parse_location(f"s3://{bucket}/x")


@pytest.mark.parametrize("uri", ["s3://bucket\n", "s3://bucket\n/x", "oci://bucket\n@ns/x", "oci://bucket@ns\n/x"])
def test_a_bucket_or_namespace_ending_in_a_newline_is_refused(uri: str) -> None:
    """The name patterns end in \\Z: "$" would also match before a final newline, so "bucket\\n" passed."""
    with pytest.raises(CloudDDPError, match=r"(has no valid S3 bucket name|needs a bucket and a namespace)"):
        parse_location(uri)


@pytest.mark.parametrize("bucket", ["my.bucket", "bk1-s3alias", "data--usw2-az1--x-s3", "1.2.3.4.5"])
def test_names_that_address_objects_elsewhere_are_taken(bucket: str) -> None:
    assert parse_location(f"s3://{bucket}/x").bucket == bucket  # access point aliases, directory buckets


def test_a_store_refusing_to_block_public_access_on_a_new_bucket_says_the_bucket_exists(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_bytes(b"a")

    def denied(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "PutPublicAccessBlock")

    monkeypatch.setattr(s3, "put_public_access_block", denied)
    with pytest.raises(CloudDDPError, match=r"created the bucket s3://fresh, but could not block public access"):
        stage(tmp_path, store(s3, "s3://fresh/x"), StageOptions(create_bucket=True))


@pytest.mark.slow
def test_create_bucket_on_a_store_without_public_access_blocks_creates_it_and_stages(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_bytes(b"alpha")
    with SeaweedS3(tmp_path / "weed") as server:  # SeaweedFS answers PutPublicAccessBlock with NotImplemented
        env = {**server.env(), "HOME": str(tmp_path / "home"), "CLOUDDDP_CACHE_DIR": str(tmp_path / "cache")}
        result = run_cli("stage", str(tmp_path / "data"), "s3://fresh/x", "--create-bucket", env=env, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "created s3://fresh; this store does not implement PutPublicAccessBlock" in result.stderr
        uri = result.stdout.strip().splitlines()[-1]
        key = parse_location(uri).key("a.txt")
        assert server.client().get_object(Bucket="fresh", Key=key)["Body"].read() == b"alpha"


@pytest.mark.parametrize(
    ("variables", "config", "message"),
    [
        ({"AWS_PROFILE": "nope"}, None, "the AWS profile 'nope' (from AWS_PROFILE) is not in"),
        ({"AWS_ENDPOINT_URL": "127.0.0.1:9"}, None, "AWS_ENDPOINT_URL='127.0.0.1:9' is not a usable endpoint URL"),
        ({"AWS_ENDPOINT_URL_S3": "127.0.0.1:9"}, None, "AWS_ENDPOINT_URL_S3='127.0.0.1:9' is not a usable endpoint"),
        ({}, "[default\nregion = x\n", "cannot be read (Unable to parse config file"),
    ],
)
def test_a_bad_aws_setting_is_named_as_launch_names_it(
    tmp_path: Path, variables: dict[str, str], config: str | None, message: str
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_bytes(b"a")
    config_file = tmp_path / "aws-config"
    if config is not None:
        config_file.write_text(config)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "AWS_CONFIG_FILE": str(config_file),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"), "AWS_ACCESS_KEY_ID": "k",
           "AWS_SECRET_ACCESS_KEY": "s", "AWS_EC2_METADATA_DISABLED": "true", **variables}  # fmt: skip
    result = cli("stage", str(tmp_path / "data"), "s3://bkt/x", env=env, inherit_env=False)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_shard_options_without_shards_are_refused_not_ignored(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"a")
    result = cli("stage", str(tmp_path), "s3://bkt/x", "--shard-dir", str(tmp_path / "s"), "--shard-size", "5")  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--shard-size and --shard-dir apply to --shards only" in result.stderr


@pytest.mark.parametrize(
    ("uri", "problem"),
    [("oci://bkt@ns/a//b", "an empty segment (//)"), ("oci://bkt@ns/x/../y", "a '.' or '..' segment"),
     ("oci://bkt@ns/a b", "white space or a control character"), ("oci://bkt@ns/a?b", "a '?'")],
)  # fmt: skip
def test_an_oci_prefix_launch_would_refuse_is_refused_before_staging(uri: str, problem: str) -> None:
    # `cloudddp stage` published such URIs, and `launch -p oci -i train=<that URI>` then refused them
    # (validation.parse_work_dir): both now check the prefix with one function.
    with pytest.raises(CloudDDPError, match=re.escape(f"the destination {uri!r}: the prefix has {problem};")):
        parse_location(uri)


@pytest.mark.parametrize("uri", ["oci://bkt@ns@x/p", "oci://bkt@/p", "oci://bkt@n s/p"])
def test_an_oci_namespace_that_is_no_namespace_is_refused(uri: str) -> None:
    with pytest.raises(CloudDDPError, match="needs a bucket and a namespace"):
        parse_location(uri)
