"""S3 adapter for the staging algorithm (`cloudddp.staging.engine`).

Listing, small objects, copies and deletes go through boto3. Files up to 64 MiB go through
cloudddp's own PUT client (s3_http.py), aimed where botocore sends (`aimed_puts`) and signed
with botocore's credentials; larger ones through boto3's transfer manager (s3transfer, multipart)
from a thread pool, as every file does with `--transport boto3`. Either way every PUT carries a
checksum the scan computed (`x-amz-checksum-crc32` from cloudddp's client, `x-amz-checksum-sha256`
from boto3), so S3 stores the object only if the bytes it received are the bytes that were hashed;
large files go up in parts, each part with its own checksum.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from cloudddp.errors import CloudDDPError
from cloudddp.staging import s3_errors, s3_http
from cloudddp.staging.location import Location
from cloudddp.staging.s3_http import b64, sse_headers
from cloudddp.staging.sigv4 import Signer
from cloudddp.staging.store import Upload, upload_in_parallel

MULTIPART_THRESHOLD = 16 * 1024 * 1024
PART_SIZE = 16 * 1024 * 1024
THREADS = 16
NOT_FOUND = ("404", "NoSuchKey", "NotFound", "NoSuchBucket")
TRANSPORTS = ("auto", "boto3")
# Every public access blocked: what a bucket cloudddp creates gets (here and s3_bucket.StagingBucket).
PRIVATE = {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True}


def code_of(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def create_bucket_args(bucket: str, region: str) -> dict[str, Any]:
    """CreateBucket's arguments: outside us-east-1 the bucket's region goes as its LocationConstraint."""
    args: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        args["CreateBucketConfiguration"] = {"LocationConstraint": region}
    return args


class S3Store:
    """One bucket and prefix on S3 (or an S3-compatible server: `AWS_ENDPOINT_URL`)."""

    md5_part_size = None  # S3 checks SHA-256 / CRC32C checksums instead
    can_copy = True

    def __init__(
        self, client: Any, location: Location, region: str = "us-east-1", kms_key: str | None = None,
        credentials: Any | None = None,
    ) -> None:  # fmt: skip
        """`credentials` (botocore's): PUT files up to 64 MiB with s3_http.py, aimed where this client would send
        them; without: every file through boto3 from a thread pool."""
        self.client, self.location, self.region = client, location, region
        self.bucket = location.bucket
        # SSE-KMS on every object written (the SageMaker provider's one key for volume, output and uploads).
        self.sse: dict[str, str] = {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key} if kms_key else {}
        self.credentials = credentials

    @cached_property
    def puts(self) -> s3_http.SinglePuts | None:
        """The PUT client for files up to 64 MiB, aimed at the first upload (the probe builds a botocore request)."""
        if self.credentials is None:
            return None
        sse = {name.lower(): value for name, value in sse_headers(self.sse)}
        return aimed_puts(self.client, self.bucket, self.region, self.credentials, sse)

    # -- errors -------------------------------------------------------------------------
    def error(self, exc: Exception, action: str, key: str | None = None) -> CloudDDPError:
        code = code_of(exc) if isinstance(exc, ClientError) else type(exc).__name__
        return s3_errors.refused(self.bucket, action, key, code, denied=False, detail=f": {exc}")

    # -- the bucket ---------------------------------------------------------------------
    def check_bucket(self, create: bool) -> bool:
        try:
            self.client.head_bucket(Bucket=self.bucket)
            return False
        except ClientError as exc:
            if code_of(exc) not in NOT_FOUND:
                raise self.error(exc, "use") from None
        except BotoCoreError as exc:
            raise CloudDDPError(f"cannot reach S3 for s3://{self.bucket}: {exc}") from None
        if not create:
            raise s3_errors.missing_bucket(self.bucket)
        try:
            self.client.create_bucket(**create_bucket_args(self.bucket, self.region))
        except ClientError as exc:
            raise self.error(exc, "create") from None
        self.block_public_access()
        return True

    def block_public_access(self) -> None:
        """Make a bucket cloudddp created private. S3-compatible stores without the call (SeaweedFS answers
        NotImplemented) keep their own default, private unless configured otherwise: said, not an error."""
        try:
            self.client.put_public_access_block(Bucket=self.bucket, PublicAccessBlockConfiguration=PRIVATE)
        except ClientError as exc:
            code = code_of(exc)
            if code != "NotImplemented":
                raise CloudDDPError(
                    f"created the bucket s3://{self.bucket}, but could not block public access to it ({code}: {exc}). "
                    f"Block it yourself (aws s3api put-public-access-block) before data goes there."
                ) from None
            print(
                f"cloudddp: created s3://{self.bucket}; this store does not implement PutPublicAccessBlock, so the "
                f"bucket has the store's default access.",
                file=sys.stderr,
                flush=True,
            )

    # -- reading --------------------------------------------------------------------------
    def list_sizes(self, prefix: str) -> dict[str, int]:
        found: dict[str, int] = {}
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    found[item["Key"]] = int(item["Size"])
        except ClientError as exc:
            raise self.error(exc, "list objects in") from None
        return found

    def read(self, key: str) -> bytes | None:
        try:
            return bytes(self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read())
        except ClientError as exc:
            if code_of(exc) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise self.error(exc, "read", key) from None

    # -- writing --------------------------------------------------------------------------
    def write(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data,
                                   ChecksumSHA256=b64(hashlib.sha256(data).hexdigest()), **self.sse)  # fmt: skip
        except ClientError as exc:
            raise self.error(exc, "write", key) from None

    def upload(self, uploads: list[Upload], on_done: Callable[[Upload], None]) -> None:
        if self.puts is not None:
            whole, uploads = s3_http.split_for_single_puts(uploads)
            self.puts.upload(self.bucket, whole, on_done)
        if uploads:
            upload_in_parallel(uploads, self.upload_one, on_done, THREADS)

    def upload_one(self, upload: Upload) -> None:
        try:
            if upload.size <= MULTIPART_THRESHOLD:
                with open(upload.path, "rb") as body:
                    self.client.put_object(Bucket=self.bucket, Key=upload.key, Body=body,
                                           ChecksumSHA256=b64(upload.sha256), **self.sse)  # fmt: skip
            else:
                from boto3.s3.transfer import TransferConfig  # only here: s3transfer is slow to import

                config = TransferConfig(multipart_threshold=MULTIPART_THRESHOLD, multipart_chunksize=PART_SIZE,
                                        max_concurrency=4)  # fmt: skip
                self.client.upload_file(str(upload.path), self.bucket, upload.key,
                                        ExtraArgs={"ChecksumAlgorithm": "SHA256", **self.sse}, Config=config)  # fmt: skip
        except ClientError as exc:
            if code_of(exc) in ("BadDigest", "XAmzContentSHA256Mismatch", "InvalidDigest"):
                raise s3_errors.mismatch(self.bucket, upload) from None
            raise self.error(exc, "upload", upload.key) from None
        except OSError as exc:
            raise CloudDDPError(f"cannot read {str(upload.path)!r}: {exc.strerror}.") from None
        except Exception as exc:  # s3transfer wraps ClientError in S3UploadFailedError
            text = str(exc)
            if "BadDigest" in text or "Checksum" in text:
                raise s3_errors.mismatch(self.bucket, upload) from None
            raise CloudDDPError(
                f"cannot upload {str(upload.path)!r} to s3://{self.bucket}/{upload.key}: {text}"
            ) from None

    def copy(self, pairs: list[tuple[str, str]]) -> None:
        def one(pair: tuple[str, str]) -> None:
            source, target = pair
            try:
                self.client.copy(
                    {"Bucket": self.bucket, "Key": source}, self.bucket, target, ExtraArgs=self.sse or None
                )
            except ClientError as exc:
                raise self.error(exc, f"copy {source} to", target) from None

        with ThreadPoolExecutor(max_workers=THREADS) as pool:
            list(pool.map(one, pairs))

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            try:
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                )
            except ClientError as exc:
                raise self.error(exc, "delete objects in") from None
            for failed in response.get("Errors", []):
                raise CloudDDPError(
                    f"cannot delete s3://{self.bucket}/{failed.get('Key')}: {failed.get('Code')} {failed.get('Message')}"
                )


AIM_HEADER = "x-cloudddp-aim"  # marks the probe's made-up answer


class EmptyBody:
    def stream(self, **_: Any) -> Any:
        return iter([b""])


def aimed_puts(
    client: Any, bucket: str, region: str, credentials: Any, headers: dict[str, str]
) -> s3_http.SinglePuts | None:
    """cloudddp's PUT client (s3_http.py), sending to exactly where this botocore client sends a PutObject.

    Botocore resolves the URL (endpoint variables and profiles, FIPS, dual-stack, addressing style) when it
    builds a request: a HeadObject for a probe key is built, signed and answered at `before-send` by a
    handler that runs last, which reads its URL and answers with a made-up 418, so nothing is sent.
    botocore uses the first answer: if something else answers its sends (moto's in-process mock,
    instrumentation), the 418 is not what comes back, and files go through botocore as before (None).
    So does an access point, or any URL that is not the bucket on an endpoint."""
    from botocore.awsrequest import AWSResponse

    urls: list[str] = []

    def answer(request: Any, **_: Any) -> Any:
        if request.method != "HEAD" or "/cloudddp-aim" not in request.url:
            return None  # another thread's request on this client
        urls.append(request.url)
        return AWSResponse(request.url, 418, {AIM_HEADER: "1"}, EmptyBody())

    # On the plain event, registered last: botocore calls handlers of more specific events (and of the
    # same event registered earlier) first, and moto's mock listens on plain `before-send`.
    client.meta.events.register_last("before-send", answer, unique_id="cloudddp-aim")
    try:
        client.head_object(Bucket=bucket, Key="cloudddp-aim")
        return None  # an object answered: not the probe's 418
    except ClientError as exc:
        if AIM_HEADER not in exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {}) or not urls:
            return None
    except BotoCoreError:
        return None
    finally:
        client.meta.events.unregister("before-send", unique_id="cloudddp-aim")
    parts = urlsplit(urls[0])
    if s3_http.behind_proxy(urls[0]):
        return None  # botocore sends through HTTP(S)_PROXY; s3_http.py connects directly
    if parts.path.startswith(f"/{bucket}/"):
        path_style, netloc = True, parts.netloc
    elif parts.netloc.startswith(f"{bucket}."):
        path_style, netloc = False, parts.netloc[len(bucket) + 1 :]
    else:
        return None
    from botocore.httpsession import get_cert_path

    # The same trust as botocore's: its CA bundle (certifi's when none is configured) or no check.
    verify = get_cert_path(botocore_verify(client))
    return s3_http.SinglePuts(f"{parts.scheme}://{netloc}", Signer(credentials, region), path_style, headers,
                              verify=verify)  # fmt: skip


def botocore_verify(client: Any) -> str | bool:
    """How this botocore client checks TLS certificates: a CA bundle's path, True (its default) or False.

    Read from the client's HTTP session, where botocore keeps the value it resolved (the `verify` argument,
    else the `ca_bundle` setting: AWS_CA_BUNDLE or the profile's, else REQUESTS_CA_BUNDLE: boto/botocore
    botocore/session.py create_client and endpoint.py EndpointCreator._get_verify_value at 0e6e2404b85d).
    Private attributes, so anything unexpected there reads as botocore's default."""
    verify = getattr(getattr(getattr(client, "_endpoint", None), "http_session", None), "_verify", True)
    return verify if isinstance(verify, str | bool) else True


def configuration_error(exc: Exception) -> CloudDDPError:
    """botocore's refusals of the user's AWS configuration, in the words `cloudddp launch` uses for them."""
    from botocore.exceptions import ConfigParseError, ProfileNotFound

    from cloudddp.aws_settings import endpoint_variable, profile_error

    if isinstance(exc, ProfileNotFound):
        return profile_error(exc)
    if isinstance(exc, ConfigParseError):
        path = exc.kwargs.get("path", "the AWS config file")
        return CloudDDPError(f"the AWS config file {path} cannot be read ({exc}); fix it, or set AWS_CONFIG_FILE.")
    setting = endpoint_variable("s3")  # ValueError: botocore's "Invalid endpoint: 127.0.0.1:9"
    named = f"{setting[0]}={setting[1]!r}" if setting else "the endpoint URL of your AWS config profile"
    return CloudDDPError(
        f"{named} is not a usable endpoint URL ({exc}): it needs a scheme and a host, like http://127.0.0.1:8333 "
        f"or https://s3.us-east-1.amazonaws.com."
    )


def open_s3_store(location: Location, transport: str = "auto", session: Any | None = None) -> S3Store:
    """An S3Store from the SDK's usual configuration (profiles, AWS_ENDPOINT_URL, AWS_REGION, ...).

    `transport`: "auto" (files up to 64 MiB through s3_http.py, aimed where botocore sends) or "boto3" (every
    request through botocore).
    """
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ConfigParseError, ProfileNotFound

    if transport not in TRANSPORTS:
        raise CloudDDPError(f"--transport {transport!r} is not one of {', '.join(TRANSPORTS)}.")
    try:
        active = session if session is not None else boto3.Session()
        credentials = active.get_credentials()
        if credentials is None:
            raise CloudDDPError(
                f"no AWS credentials found to stage to s3://{location.bucket}: set AWS_PROFILE or AWS_ACCESS_KEY_ID/"
                f"AWS_SECRET_ACCESS_KEY, or run `aws configure`."
            )
        region = active.region_name or "us-east-1"
        config = Config(max_pool_connections=THREADS * 2, retries={"max_attempts": 5, "mode": "standard"})
        client = active.client("s3", region_name=region, config=config)
    except (ProfileNotFound, ConfigParseError, ValueError) as exc:
        raise configuration_error(exc) from None
    return S3Store(client, location, region, credentials=credentials if transport == "auto" else None)
