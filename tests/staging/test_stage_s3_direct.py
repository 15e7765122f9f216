"""`cloudddp stage` to S3 without botocore (staging/s3_direct.py): which configurations take that
path, and the requests it sends, against a real S3 server (SeaweedFS on 127.0.0.1)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore_urls import url_botocore_sends
from helpers import PYTHON, clean_env, run_cli
from helpers.seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedS3

from cloudddp.errors import CloudDDPError
from cloudddp.staging.engine import stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.s3_direct import DirectS3Store, plain_configuration

KEYS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"}


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"AWS_PROFILE": "dev"}, "a profile: botocore reads the config file"),
        ({"AWS_CONFIG_FILE": "/x/config"}, "another config file"),
        ({"AWS_USE_FIPS_ENDPOINT": "true"}, "FIPS endpoints"),
        ({"AWS_ENDPOINT_URL": "https://minio.example.com"}, "a named endpoint: botocore's addressing rules"),
        ({"AWS_CA_BUNDLE": "/x/ca.pem"}, "TLS verified with a bundle"),
        ({"REQUESTS_CA_BUNDLE": "/x/ca.pem"}, "the bundle botocore falls back to (endpoint.py _get_verify_value)"),
        ({"AWS_DEFAULT_REGION": "cn-north-1"}, "another partition's domain"),
    ],
)
def test_anything_botocore_would_read_besides_the_variables_sends_the_stage_through_botocore(
    extra: dict[str, str], why: str, tmp_path: Path
) -> None:
    assert plain_configuration({**KEYS}, tmp_path) is not None
    assert plain_configuration({**KEYS, **extra}, tmp_path) is None, why


def test_credentials_missing_or_a_config_file_at_home_mean_botocore(tmp_path: Path) -> None:
    assert plain_configuration({"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE"}, tmp_path) is None
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "config").write_text("[default]\nregion = eu-west-1\n")
    assert plain_configuration(KEYS, tmp_path) is None


def test_the_endpoint_region_and_addressing_are_botocores(tmp_path: Path) -> None:
    aws = plain_configuration({**KEYS, "AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "ap-south-1"}, tmp_path)
    assert aws is not None  # botocore reads AWS_DEFAULT_REGION, not AWS_REGION (configprovider.py)
    assert (aws.endpoint, aws.region, aws.path_style) == ("https://s3.eu-west-1.amazonaws.com", "eu-west-1", False)
    local = plain_configuration({**KEYS, "AWS_ENDPOINT_URL": "http://127.0.0.1:9000/", "AWS_ENDPOINT_URL_S3":
                                 "http://127.0.0.1:9001"}, tmp_path)  # fmt: skip
    assert local is not None and (local.endpoint, local.region, local.path_style) == (
        "http://127.0.0.1:9001", "us-east-1", True)  # fmt: skip


@pytest.mark.parametrize(
    ("proxy", "direct"),
    [({"HTTPS_PROXY": "http://proxy:3128"}, False), ({"https_proxy": "http://proxy:3128"}, False),
     ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": ".amazonaws.com"}, True),
     ({"HTTP_PROXY": "http://proxy:3128"}, True),  # only for http:// URLs
     ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "x", "no_proxy": ".amazonaws.com"}, True)],  # lower wins
)  # fmt: skip
def test_an_endpoint_behind_a_proxy_is_left_to_botocore(proxy: dict[str, str], direct: bool, tmp_path: Path) -> None:
    """botocore sends through HTTP(S)_PROXY; cloudddp's own client connects directly, so it steps aside."""
    plain = plain_configuration({**KEYS, "AWS_DEFAULT_REGION": "eu-west-1", **proxy}, tmp_path)
    assert (plain is not None) == direct


@pytest.mark.parametrize("bucket", ["plain-bucket", "dotted.bucket.name"])
def test_a_bucket_is_addressed_as_botocore_addresses_it(bucket: str, tmp_path: Path) -> None:
    """Virtual-hosted style, except a name with dots (not a valid TLS host name): path style."""
    import botocore.session

    client = botocore.session.get_session().create_client("s3", region_name="eu-west-1", aws_access_key_id="k",
                                                          aws_secret_access_key="s")  # fmt: skip
    url = url_botocore_sends(client, "head_bucket", Bucket=bucket)
    plain = plain_configuration({**KEYS, "AWS_DEFAULT_REGION": "eu-west-1"}, tmp_path)
    assert plain is not None
    store = DirectS3Store(parse_location(f"s3://{bucket}/data"), plain)
    assert store.path_style == url.startswith(f"https://s3.eu-west-1.amazonaws.com/{bucket}"), url


def s3(server: SeaweedS3) -> Any:
    return boto3.client("s3", endpoint_url=server.url, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY, region_name="us-east-1")  # fmt: skip


def direct(server: SeaweedS3, uri: str, tmp_path: Path, **env: str) -> DirectS3Store:
    plain = plain_configuration({**server.env(), **env}, tmp_path)
    assert plain is not None
    return DirectS3Store(parse_location(uri), plain)


@pytest.mark.slow
def test_stage_list_read_and_errors_without_botocore(seaweed: SeaweedS3, tmp_path: Path) -> None:
    data = tmp_path / "data"
    for i in range(5):
        (data / f"d{i % 2}").mkdir(parents=True, exist_ok=True)
        (data / f"d{i % 2}" / f"{i}.bin").write_bytes(os.urandom(1000 + i))
    store = direct(seaweed, "s3://direct/ds", tmp_path)
    store.list_page = 2  # several ListObjectsV2 pages, continuation tokens followed
    result = stage(data, store)
    listed = store.list_sizes(f"ds/{result.version}/")
    assert listed == {f"ds/{result.version}/{p.relative_to(data).as_posix()}": p.stat().st_size
                      for p in data.rglob("*.bin")}  # fmt: skip
    assert stage(data, store).unchanged  # the manifest read back through GetObject
    body = s3(seaweed).get_object(Bucket="direct", Key=f"ds/{result.version}/d0/0.bin")["Body"].read()
    assert body == (data / "d0" / "0.bin").read_bytes()
    assert store.read("ds/nothing-here") is None
    with pytest.raises(CloudDDPError, match=r"s3://no-such-bucket does not exist.*--create-bucket"):
        direct(seaweed, "s3://no-such-bucket/x", tmp_path).check_bucket(False)
    wrong = direct(seaweed, "s3://direct/ds", tmp_path, AWS_SECRET_ACCESS_KEY="wrong-secret-value")
    with pytest.raises(
        CloudDDPError, match=r"s3://direct: S3 rejected the credentials \(SignatureDoesNotMatch\)"
    ) as denied:
        wrong.check_bucket(False)
    assert "wrong-secret-value" not in str(denied.value)


def imported_by(args: list[str], env: dict[str, str]) -> set[str]:
    """Modules a `cloudddp ARGS` process imported (python -X importtime), as a user runs it."""
    argv = [PYTHON, "-X", "importtime", "-c", "from cloudddp.console import main; main()", *args]
    done = subprocess.run(argv, env=clean_env(env), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_stage_and_the_top_level_help_import_no_provider_and_a_plain_stage_no_botocore(
    seaweed: SeaweedS3, tmp_path: Path
) -> None:
    providers = {"cloudddp.providers.kubernetes.settings", "cloudddp.providers.pbs.settings", "cloudddp.spec"}
    assert not imported_by(["--help"], {}) & providers
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a")
    env = {**seaweed.env(), "HOME": str(tmp_path), "CLOUDDDP_CACHE_DIR": str(tmp_path / "cache")}
    modules = imported_by(["stage", str(data), "s3://direct/startup"], env)
    assert not modules & providers and "cloudddp.cli" not in modules  # console.py: stage imports staging alone
    assert "cloudddp.staging.s3_http" in modules  # the upload went through it...
    assert not {m for m in modules if m.startswith(("botocore", "boto3"))}  # ...and nothing else
    assert {"cloudddp.providers.kubernetes.settings", "botocore"} <= imported_by(
        ["stage", str(data), "s3://direct/startup", "--transport", "boto3"], env
    ) | imported_by(["launch", "--help"], {})


@pytest.mark.slow
def test_cloudddp_stage_without_botocore_against_motos_s3_server(tmp_path: Path) -> None:
    """A second S3 implementation (moto's server) for the botocore-free path, request by request."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket="moto-bucket")  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                   HOME=str(tmp_path), CLOUDDDP_CACHE_DIR=str(tmp_path / "cache"))  # fmt: skip
        data = tmp_path / "data"
        for i in range(4):
            (data / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
            (data / f"c{i % 2}" / f"{i}.bin").write_bytes(os.urandom(3000 + i))
        modules = imported_by(["stage", str(data), "s3://moto-bucket/ds"], env)
        assert "cloudddp.staging.s3_http" in modules and not {m for m in modules if m.startswith("botocore")}
        uri = run_cli("stage", str(data), "s3://moto-bucket/ds", env=env, inherit_env=False).stdout.splitlines()[-1]
        assert "unchanged" in run_cli("stage", str(data), "s3://moto-bucket/ds", env=env, inherit_env=False).stdout
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                          region_name="us-east-1")  # fmt: skip
        prefix = uri.removeprefix("s3://moto-bucket/")
        for path in data.rglob("*.bin"):
            key = prefix + path.relative_to(data).as_posix()
            assert s3.get_object(Bucket="moto-bucket", Key=key)["Body"].read() == path.read_bytes()
        missing = run_cli("stage", str(data), "s3://no-bucket-here/ds", env=env, inherit_env=False)
        assert missing.returncode == 2 and "s3://no-bucket-here does not exist" in missing.stderr
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["/venv/bin/cloudddp", "stage", "./data", "s3://b/p"], False),
        (["-c", "stage", "./data", "s3://b/p"], False),
        (["/venv/bin/cloudddp", "--help"], False),
        (["/venv/bin/cloudddp"], False),
        (["/venv/bin/cloudddp", "launch", "--help"], True),
        (["/venv/bin/cloudddp", "status", "latest"], True),
        (["-c"], True),  # `python -c "from cloudddp.cli import app; ..."`: a program using the app
        (["/venv/bin/pytest", "stage"], True),  # only the console script's own command line counts
    ],
)
def test_only_stage_and_the_top_level_help_skip_the_provider_registry(argv: list[str], shown: bool) -> None:
    from cloudddp.cli import shows_providers

    assert shows_providers(argv) is shown


def test_a_bucket_in_another_region_goes_through_botocore_which_follows_the_redirect(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from cloudddp.staging import s3_direct

    answers = {"moved": s3_direct.Response(301, {"x-amz-bucket-region": "eu-west-1"}, b""),
               "here": s3_direct.Response(200, {"x-amz-bucket-region": "us-east-1"}, b"")}  # fmt: skip
    sent: list[str] = []

    def head(self: DirectS3Store, operation: str, method: str, *args: Any, **kwargs: Any) -> Any:
        sent.append(f"{operation} {method} {self.bucket}")
        return answers[self.bucket]

    monkeypatch.setattr(s3_direct.DirectS3Store, "call", head)
    env = {**KEYS, "HOME": str(tmp_path)}
    assert s3_direct.open_direct_store(parse_location("s3://moved/x"), env) is None
    assert isinstance(s3_direct.open_direct_store(parse_location("s3://here/x"), env), DirectS3Store)
    assert sent == ["HeadBucket HEAD moved", "HeadBucket HEAD here"]


def test_the_secret_key_and_token_never_show_in_the_configurations_repr(tmp_path: Path) -> None:
    plain = plain_configuration({"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "s3cr3t-key",
                                 "AWS_SESSION_TOKEN": "t0ken-value", "AWS_DEFAULT_REGION": "us-east-1"}, tmp_path)  # fmt: skip
    assert plain is not None and plain.secret_key == "s3cr3t-key"
    assert "s3cr3t-key" not in repr(plain) and "t0ken-value" not in repr(plain)
