"""File uploads to S3 through the AWS Common Runtime (`awscrt.s3.S3Client`).

The CRT client signs (SigV4), sends and retries in native code on its own event loop,
so a Python process is no longer bound by botocore's per-request cost. Small files are
one PUT each with the scan's CRC-32 in `x-amz-checksum-crc32` (S3 rejects bytes that
don't match it; see checksum_header); files above 64 MiB are split into parts by the CRT,
each with a CRC32C it computes, sent as a trailer. Results come back on CRT threads and
are handed to the caller's thread through a queue, so errors surface where they belong.
"""

from __future__ import annotations

import base64
import importlib.util
import ipaddress
import os
import queue
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from cloudddp.errors import CloudDDPError
from cloudddp.staging.location import s3_address
from cloudddp.staging.s3_errors import DENIED
from cloudddp.staging.store import Upload


def b64(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode()


IN_FLIGHT = 256  # requests handed to the CRT at once; it schedules connections itself
# Up to this size a file is one PUT carrying the scan's SHA-256; above, parts of this size (s5cmd uses 50 MB).
# On SeaweedFS, 4 single PUTs of 64 MiB were a little faster than 16 MiB parts (a small, noisy measurement:
# benchmarks/RESULTS-staging.md).
PART_SIZE = 64 * 1024 * 1024


def available() -> bool:
    """Whether awscrt is installed (found, not imported: importing it costs ~0.1 s, paid only when used)."""
    return importlib.util.find_spec("awscrt") is not None


class CrtUploader:
    def __init__(self, endpoint_url: str, region: str, credentials: Any, path_style: bool | None = None,
                 verify: str | bool = True) -> None:  # fmt: skip
        """`verify`: botocore's (s3_store.botocore_verify): True, the CRT's default trust store; a CA bundle's
        path; False, no certificate check. As s3transfer maps it for its CRT client (boto/s3transfer
        s3transfer/crt.py create_s3_crt_client at bf4262882ba285aea84daee2adbbd1359c23eec6)."""
        from awscrt import auth, io, s3

        self.s3 = s3
        parts = urlsplit(endpoint_url)
        self.host = parts.netloc
        self.tls = parts.scheme == "https"
        hostname = parts.hostname or ""
        self.path_style = path_style if path_style is not None else (is_ip(hostname) or hostname == "localhost")

        def current() -> Any:  # botocore refreshes temporary credentials; ask it each time
            frozen = credentials.get_frozen_credentials()
            return auth.AwsCredentials(frozen.access_key, frozen.secret_key, frozen.token)

        provider = auth.AwsCredentialsProvider.new_delegate(current)
        loop = io.EventLoopGroup(max(2, os.cpu_count() or 2))
        bootstrap = io.ClientBootstrap(loop, io.DefaultHostResolver(loop))
        tls_options = None
        if self.tls and verify is not True:
            context = io.TlsContextOptions()
            if verify:
                context.override_default_trust_store_from_path(ca_filepath=verify)
            else:
                context.verify_peer = False
            tls_options = io.ClientTlsContext(context).new_connection_options()
        self.client = s3.S3Client(
            bootstrap=bootstrap,
            region=region,
            tls_mode=s3.S3RequestTlsMode.ENABLED if self.tls else s3.S3RequestTlsMode.DISABLED,
            tls_connection_options=tls_options,
            signing_config=s3.create_default_s3_signing_config(region=region, credential_provider=provider),
            part_size=PART_SIZE,
            multipart_upload_threshold=PART_SIZE,
            throughput_target_gbps=10.0,
        )

    def request(
        self, bucket: str, key: str, size: int | None, headers: list[tuple[str, str]], method: str = "PUT"
    ) -> Any:
        """The HTTP request for `key` in `bucket` (the bucket itself for key ""); `size`: the body's length."""
        from awscrt import http

        host, path = s3_address(self.host, bucket, key, self.path_style)
        length = [("Content-Length", str(size))] if size is not None else []
        return http.HttpRequest(method, path, http.HttpHeaders([("Host", host), *length, *headers]))

    def upload(
        self,
        bucket: str,
        uploads: list[Upload],
        on_done: Callable[[Upload], None],
        failure: Callable[[Upload, int | None, bytes, Exception | None], CloudDDPError],
        extra_headers: list[tuple[str, str]] | None = None,
    ) -> None:
        """Upload every file; `failure` turns a refused or failed request into the error to raise."""
        s3 = self.s3
        results: queue.Queue[tuple[Upload, int | None, bytes, Exception | None]] = queue.Queue()
        trailer = s3.S3ChecksumConfig(algorithm=s3.S3ChecksumAlgorithm.CRC32C, location=s3.S3ChecksumLocation.TRAILER)
        pending, running, finished = list(reversed(uploads)), [], 0

        def start(upload: Upload) -> None:
            def done(error: Exception | None = None, status_code: int | None = None, error_body: bytes | None = None,
                     **_: Any) -> None:  # fmt: skip
                results.put((upload, status_code, error_body or b"", error))

            small = upload.size <= PART_SIZE
            headers = [checksum_header(upload)] if small else []
            headers += extra_headers or []
            running.append(self.client.make_request(
                type=s3.S3RequestType.PUT_OBJECT, request=self.request(bucket, upload.key, upload.size, headers),
                send_filepath=str(upload.path), checksum_config=None if small else trailer, on_done=done,
            ))  # fmt: skip

        while pending and len(running) < IN_FLIGHT:
            start(pending.pop())
        try:
            while finished < len(uploads):
                upload, status, body, error = results.get()
                finished += 1
                if error is not None or status != 200:
                    raise failure(upload, status, body, error)
                on_done(upload)
                if pending:
                    start(pending.pop())
        except BaseException:
            for request in running:
                request.cancel()
            raise


def checksum_header(upload: Upload) -> tuple[str, str]:
    """The checksum S3 verifies a single PUT against: the scan's CRC-32 where it took one, else its SHA-256.

    CRC-32 is botocore's own default for PutObject (botocore 1.44.5, httpchecksum.py:
    DEFAULT_CHECKSUM_ALGORITHM = "CRC32"; over plain HTTP it goes as this header, beside a signed payload).
    Why not SHA-256 here: SeaweedFS spent ~1.2 s more CPU on 4 x 64 MiB with `x-amz-checksum-sha256`
    (measured from /proc, benchmarks/RESULTS-staging.md run 8), on a machine whose cores client and server
    share. The SHA-256 still goes as the signed payload hash, which S3 itself verifies."""
    if upload.crc32 is not None:
        return "x-amz-checksum-crc32", base64.b64encode(upload.crc32.to_bytes(4, "big")).decode()
    return "x-amz-checksum-sha256", b64(upload.sha256)


def mismatch(bucket: str, upload: Upload) -> CloudDDPError:
    """S3 refused the bytes: say whether the file changed since the scan or the bytes were damaged."""
    from cloudddp.staging.local_files import hash_file

    now = hash_file(upload.source).sha256 if upload.source else None
    if now is not None and now != upload.sha256:
        return changed_while_uploading(upload)
    return CloudDDPError(
        f"S3 rejected s3://{bucket}/{upload.key} from {str(upload.path)!r}: the bytes it received do not "
        f"match their checksum (damaged in transit). Nothing was published; stage again."
    )


def changed_while_uploading(upload: Upload) -> CloudDDPError:
    return CloudDDPError(
        f"{str(upload.path)!r} changed while it was being uploaded (its content differs from the scan). "
        f"Nothing was published; stage again once nothing writes to it."
    )


def upload_failure(
    bucket: str, upload: Upload, status: int | None, body: bytes, error: Exception | None
) -> CloudDDPError:
    """The error for a PUT the CRT could not complete, from S3's status and error body."""
    text = body.decode(errors="replace")
    if any(code in text for code in ("BadDigest", "XAmzContentChecksumMismatch", "InvalidDigest",
                                      "XAmzContentSHA256Mismatch")):  # fmt: skip
        return mismatch(bucket, upload)
    code = re.search(r"<Code>([^<]+)</Code>", text)
    if code and code.group(1) == "NoSuchBucket":
        return CloudDDPError(
            f"the bucket s3://{bucket} does not exist. Create it, or pass --create-bucket to create it (private)."
        )
    if status == 403 or (code and code.group(1) in DENIED):
        return CloudDDPError(
            f"cannot upload to s3://{bucket}/{upload.key}: access denied ({code.group(1) if code else status})."
            f" Your credentials may not write to this bucket; grant s3:PutObject on it."
        )
    reason = code.group(1) if code else (f"HTTP {status}" if status else str(error))
    return CloudDDPError(f"cannot upload {str(upload.path)!r} to s3://{bucket}/{upload.key}: {reason}.")


def sse_headers(sse: dict[str, str]) -> list[tuple[str, str]]:
    """boto3's SSE arguments as the PUT headers they become."""
    names = {"ServerSideEncryption": "x-amz-server-side-encryption",
             "SSEKMSKeyId": "x-amz-server-side-encryption-aws-kms-key-id"}  # fmt: skip
    return [(names[k], v) for k, v in sse.items()]


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
