"""Copy s3:// inputs onto this node before training starts.

    python -m cloudddp.launcher.pull_inputs --into /cloudddp/data train=s3://bucket/prefix [val=s3://...]

On Kubernetes the init container `pull-inputs` of every pod runs this with the job's own image
(cloudddp/providers/kubernetes/manifest.py), into an emptyDir the training container then reads.
Channel CHANNEL lands in `<into>/CHANNEL/`: every object under `prefix/`, at its path below the
prefix; a URI that names one object (and no folder) gives that one file, as SageMaker's local mode
(`sagemaker.utils.download_folder`) does it.

Credentials and endpoint come the usual boto3 ways: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (on
Kubernetes: the Secret `kubernetes.s3_secret`, by reference), else the pod's own identity (EKS IRSA's
AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE, Pod Identity, the node's role); AWS_ENDPOINT_URL
(MinIO, SeaweedFS, ...; path-style addressing then, which every S3-compatible server takes), else
AWS S3; AWS_REGION (default us-east-1). Every call is bounded like the client side's: CLOUDDDP_AWS_CONNECT_TIMEOUT (10 s),
CLOUDDDP_AWS_READ_TIMEOUT (60 s), CLOUDDDP_AWS_MAX_ATTEMPTS (3).

boto3 must be in the image (the AWS Deep Learning Containers have it; else `pip install boto3`). It
is imported inside `pull()` only: the launcher package stays standard library only at import time.

A channel pulled in full leaves a record beside its folder (`<into>/.cloudddp-pulled-CHANNEL.json`: the
URI and every file with its size). A container restarted in place in the same pod (a TrainJob's `node`
container, which runs the pull itself) finds the record, checks that every file is still there at its size,
and keeps the copy without calling S3: the node trains on what the other nodes of the job hold, even if the
objects changed since. No record, another URI, or a file missing or resized: the channel is pulled again.
Init containers re-run too when the pod's sandbox is rebuilt, with the emptyDir as it was (kubernetes.io,
docs/concepts/workloads/pods/init-containers, "Detailed behavior": code writing to an emptyDir should expect
its output to exist already).

Any problem (no such bucket, nothing under the prefix, refused credentials, an unreachable endpoint,
no boto3) is one paragraph naming the URI and the endpoint, exit code 2: the pod fails in its init
container, before any training process starts.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudddp import aws_limits
from cloudddp.errors import CloudDDPError

PROG = "cloudddp pull_inputs"
DEFAULT_REGION = "us-east-1"
PARALLEL_DOWNLOADS = 8
CREDENTIAL_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken",
                    "403", "401"}  # fmt: skip
CREDENTIALS_HELP = (
    "Check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (on Kubernetes: the keys of the Secret named by "
    "kubernetes.s3_secret; on EKS without it, the IAM role of kubernetes.service_account) and that they may "
    "read this bucket."
)


@dataclass(frozen=True)
class Channel:
    """One `CHANNEL=s3://bucket/prefix` argument."""

    name: str
    bucket: str
    prefix: str  # no leading or trailing "/"; may be ""

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"


def parse_channel(argument: str) -> Channel:
    name, sep, uri = argument.partition("=")
    if not sep or not name or name in (".", "..") or "/" in name:
        raise CloudDDPError(f"{argument!r}: write CHANNEL=s3://BUCKET/PREFIX (CHANNEL: a folder name).")
    bucket, _, prefix = uri[len("s3://") :].partition("/")  # not removeprefix: 3.8 images run this
    if not uri.startswith("s3://") or not bucket:
        raise CloudDDPError(f"channel {name!r}: {uri!r} is not an s3://BUCKET/PREFIX URI.")
    return Channel(name, bucket, prefix.strip("/"))


def relative_path(channel: Channel, key: str) -> Path | None:
    """Where object `key` goes below the channel's folder; None for folder markers ("a/b/").

    Keys whose path would leave the folder or is ambiguous ("..", ".", "//") are refused, not skipped:
    a training run silently missing files is worse than one that does not start.
    """
    rest = key[len(channel.prefix) + 1 :] if channel.prefix else key
    if not rest or rest.endswith("/"):
        return None
    parts = rest.split("/")
    if any(part in ("", ".", "..") for part in parts) or rest.startswith("/"):
        raise CloudDDPError(
            f"channel {channel.name!r}: object s3://{channel.bucket}/{key} has a path that would land outside "
            f"the channel's folder or is ambiguous ({rest!r}); rename it or pick a prefix without it."
        )
    return Path(*parts)


def s3_client() -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise CloudDDPError(
            f"{sys.executable} has no boto3, which pulling s3:// inputs needs: use an image that has it (the "
            f"AWS Deep Learning Containers do) or add `pip install boto3` to yours."
        ) from None
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or None
    config = Config(
        **aws_limits.botocore_config_arguments(),  # the same bounds as the client side's AWS calls
        # Servers like MinIO are reached by host name, without a DNS entry per bucket.
        s3={"addressing_style": "path"} if endpoint else {},
    )
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    try:
        return boto3.client("s3", endpoint_url=endpoint, region_name=region, config=config)
    except ValueError as exc:  # botocore: "Invalid endpoint: ..."
        raise CloudDDPError(f"AWS_ENDPOINT_URL={endpoint!r} is not usable: {exc}.") from None


def endpoint_of(client: Any) -> str:
    return str(client.meta.endpoint_url)


def explain(exc: Exception, channel: Channel, client: Any) -> CloudDDPError:
    """One paragraph for a failed S3 call: what was asked, of whom, and what to check."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    where = f"channel {channel.name!r} ({channel.uri}) at {endpoint_of(client)}"
    if isinstance(exc, NoCredentialsError):
        return CloudDDPError(f"{where}: no credentials. {CREDENTIALS_HELP}")
    if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError)):  # a tuple: 3.8 images
        attempts = aws_limits.attempts()
        return CloudDDPError(
            f"{where}: the S3 endpoint did not answer after {attempts} attempts ({exc}). Check AWS_ENDPOINT_URL "
            f"(kubernetes.s3_endpoint) and that the service is reachable from this pod."
        )
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "?"))
        message = error.get("Message") or code
        if code == "NoSuchBucket":
            return CloudDDPError(f"{where}: the bucket {channel.bucket!r} does not exist there.")
        if code in CREDENTIAL_CODES:
            return CloudDDPError(f"{where}: the server refused the credentials ({code}: {message}). {CREDENTIALS_HELP}")
        return CloudDDPError(f"{where}: the server answered {code}: {message}")
    return CloudDDPError(f"{where}: {type(exc).__name__}: {exc}")


def objects_of(client: Any, channel: Channel) -> list[tuple[str, int]]:
    """(key, size) of every object the channel copies."""
    prefix = f"{channel.prefix}/" if channel.prefix else ""
    found = [
        (item["Key"], int(item["Size"]))
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=channel.bucket, Prefix=prefix)
        for item in page.get("Contents", [])
    ]
    if found or not channel.prefix:
        return found
    # No folder of that name: the URI may name a single object.
    from botocore.exceptions import ClientError

    try:
        head = client.head_object(Bucket=channel.bucket, Key=channel.prefix)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return []
        raise
    return [(channel.prefix, int(head["ContentLength"]))]


def pull_channel(client: Any, channel: Channel, folder: Path) -> dict[str, int]:
    """Download one channel into `folder`; the size of each file, by its path below `folder`."""
    try:
        objects = objects_of(client, channel)
    except Exception as exc:
        raise explain(exc, channel, client) from None
    if len(objects) == 1 and objects[0][0] == channel.prefix:  # the URI named one object
        plan = [(channel.prefix, objects[0][1], Path(channel.prefix.rsplit("/", 1)[-1]))]
    else:
        plan = [(key, size, path) for key, size in objects if (path := relative_path(channel, key)) is not None]
    if not plan:
        raise CloudDDPError(
            f"channel {channel.name!r} ({channel.uri}) at {endpoint_of(client)}: there is no object under "
            f"{channel.uri}/ nor one named {channel.uri}; check the prefix (a typo would train on nothing)."
        )

    def download(item: tuple[str, int, Path]) -> None:
        key, size, path = item
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            client.download_file(channel.bucket, key, str(target))
        except OSError as exc:
            raise CloudDDPError(f"channel {channel.name!r}: writing {target} failed: {exc}.") from None
        except Exception as exc:
            raise explain(exc, channel, client) from None
        if target.stat().st_size != size:  # a truncated copy must not reach training
            raise CloudDDPError(
                f"channel {channel.name!r}: s3://{channel.bucket}/{key} is {size} bytes but "
                f"{target.stat().st_size} arrived."
            )

    folder.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=PARALLEL_DOWNLOADS) as pool:
        list(pool.map(download, plan))  # list(): the first failure is raised here
    return {path.as_posix(): size for _, size, path in plan}


def record_path(into: Path, channel: Channel) -> Path:
    return into / f".cloudddp-pulled-{channel.name}.json"  # beside the channel's folder: training never sees it


def kept_copy(into: Path, channel: Channel) -> tuple[int, int] | None:
    """(files, bytes) of a complete earlier pull of this URI into this folder, else None."""
    try:
        record = json.loads(record_path(into, channel).read_text())
        files = {str(path): int(size) for path, size in record["files"].items()}
        if record["uri"] != channel.uri or not files:
            return None
        folder = into / channel.name
        if not all(regular_file_of_size(folder / path, size) for path, size in files.items()):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # no record, or one this code cannot read: pull again
    return len(files), sum(files.values())


def regular_file_of_size(path: Path, size: int) -> bool:
    """One stat per file: a channel may hold many thousands."""
    try:
        found = path.stat()
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size == size


def write_record(into: Path, channel: Channel, files: dict[str, int]) -> None:
    """Written once the whole channel is in, by rename: a pull stopped halfway leaves no record."""
    path = record_path(into, channel)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"uri": channel.uri, "files": files}))
    partial.replace(path)


def pull(channels: list[Channel], into: Path) -> None:
    client = None  # made on the first channel that needs S3: a restart that keeps every channel calls nothing
    for channel in channels:
        started = time.monotonic()
        kept = kept_copy(into, channel)
        if kept:
            print(f"cloudddp: kept {channel.uri} -> {into / channel.name}: {kept[0]} file(s), {kept[1]} bytes "
                  f"(pulled in full before this container restarted)", flush=True)  # fmt: skip
            continue
        record_path(into, channel).unlink(missing_ok=True)
        client = client or s3_client()
        pulled = pull_channel(client, channel, into / channel.name)
        write_record(into, channel, pulled)
        print(
            f"cloudddp: pulled {channel.uri} -> {into / channel.name}: {len(pulled)} file(s), "
            f"{sum(pulled.values())} bytes in {time.monotonic() - started:.1f} s",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Copy s3:// inputs into this node's channel folders.")
    parser.add_argument("--into", required=True, type=Path, help="the folder that receives one folder per channel")
    parser.add_argument("channels", nargs="+", metavar="CHANNEL=s3://BUCKET/PREFIX")
    args = parser.parse_args(argv)
    try:
        pull([parse_channel(argument) for argument in args.channels], args.into)
    except CloudDDPError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
