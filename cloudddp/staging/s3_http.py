"""S3 over plain HTTP/1.1, signed in Python (sigv4.py): single-PUT uploads and one-off requests.

`SinglePuts` sends every file up to 64 MiB as one PUT, over a pool of keep-alive connections on
one asyncio loop (small bodies in one write, larger ones with sendfile); `Requests` sends one
request at a time (HEAD bucket, LIST, GET/PUT manifest) with http.client.

Why its own client and not awscrt's S3 client: side by side on 2000 files of 20 KiB, a stage through
this client took 1.68 s and one through botocore and `awscrt.s3.S3Client` 2.70 s (medians of 5,
benchmarks/RESULTS-staging.md run 18): the CRT spends ~0.5 ms of CPU per PUT in this process (its
meta-request machinery is built for large objects), and botocore's import ~0.6 s. Here a PUT is one
signature (sigv4.py: the scan's SHA-256 is the payload hash) and one write: ~0.15 ms. Files above
64 MiB go up in parts through boto3's transfer manager (s3transfer), the one other S3 transport.

Each PUT carries the scan's SHA-256 as its signed payload hash (S3 answers
XAmzContentSHA256Mismatch to other bytes) and the scan's CRC-32 as `x-amz-checksum-crc32`
(BadDigest; S3-compatible servers such as SeaweedFS check this one and not the payload hash), so
S3 refuses bytes that differ from what was scanned. Retries follow
botocore's standard mode: connection errors, 500/502/503/504 and S3's throttling and timeout
codes are retried (the PUT is idempotent: same key, same bytes) with jittered exponential
back-off; anything else is final: raised as s3_errors.upload_failure words it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.client
import importlib.util
import ipaddress
import os
import random
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote, urlsplit

from cloudddp.staging.location import s3_address
from cloudddp.staging.s3_errors import changed_while_uploading, upload_failure
from cloudddp.staging.sigv4 import Signer
from cloudddp.staging.store import Upload

# Medians of 5 on 2 cores, 2000 x 20 KiB, SeaweedFS: 64 -> 2.84 s, 128 -> 2.57 s, 192 -> 2.51 s (s5cmd: 2.92 s).
CONNECTIONS = 128
# Up to this size a file is one PUT from this client; above, s3transfer's multipart upload. On SeaweedFS, 4 single
# PUTs of 64 MiB were a little faster than 16 MiB parts (a small, noisy measurement: RESULTS-staging.md).
SINGLE_PUT_MAX = 64 * 1024 * 1024
INLINE = 256 * 1024  # bodies up to this size are read into memory; larger ones are sent with sendfile
MAX_ATTEMPTS = 5  # as the botocore client of s3_store.py is configured (standard mode's default is 3)
CONNECT_TIMEOUT, READ_TIMEOUT = 60.0, 60.0  # botocore's defaults
# botocore's standard retry mode (botocore/retries/standard.py, botocore 1.44.5): TRANSIENT_STATUS_CODES, and of
# its transient and throttling codes those S3 answers (InternalError and ServiceUnavailable come with 500/503).
RETRY_STATUS = {500, 502, 503, 504}
USER_AGENT = "cloudddp-stage"  # not signed (as botocore leaves it out): what S3's access logs show
# Not retried: a certificate the trust store refuses is refused again (botocore retries it; nothing changes).
FINAL_ERRORS = (ssl.SSLCertVerificationError,)
RETRY_CODES = (b"<Code>SlowDown<", b"<Code>RequestTimeout<", b"<Code>InternalError<", b"<Code>ServiceUnavailable<")

T = TypeVar("T")


async def within(seconds: float, awaitable: Awaitable[T]) -> T:
    """`awaitable`'s result, or TimeoutError after `seconds`; a cancellation always propagates. Python 3.10 and
    3.11's asyncio.wait_for returns the result instead when it arrives as the task is cancelled (CPython gh-86296),
    so after Ctrl-C a worker went on to its next file and waited out a held PUT's timeouts: a fresh-clone CI run
    saw a stage still running 120 s after SIGINT."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise TimeoutError(f"no answer within {seconds:.0f} s")
    return task.result()


class Connection:
    """One keep-alive connection; `exchange` sends a request and returns (status, body)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.usable = True

    @classmethod
    async def open(cls, host: str, port: int, tls: ssl.SSLContext | None) -> Connection:
        opened = asyncio.open_connection(host, port, ssl=tls, server_hostname=host if tls else None)
        reader, writer = await within(CONNECT_TIMEOUT, opened)
        return cls(reader, writer)

    async def exchange(self, head: bytes, upload: Upload) -> tuple[int, bytes]:
        if upload.size <= INLINE:
            with open(upload.path, "rb") as source:
                body = source.read(upload.size + 1)
            if len(body) != upload.size:
                raise FileChangedError(upload)
            self.writer.write(head + body)
        else:
            self.writer.write(head)
            with open(upload.path, "rb") as source:
                sent = await asyncio.get_running_loop().sendfile(self.writer.transport, source, 0, upload.size)
            if sent != upload.size:
                self.usable = False  # the server still waits for the rest of the body
                raise FileChangedError(upload)
        return await within(READ_TIMEOUT, self.response())

    async def response(self) -> tuple[int, bytes]:
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = await self.chunked()
        else:
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            self.usable = False
        return status, body

    async def chunked(self) -> bytes:
        parts = []
        while size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16):
            parts.append((await self.reader.readexactly(size + 2))[:-2])
        while await self.reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the blank line
            pass
        return b"".join(parts)

    def close(self) -> None:
        self.writer.close()


class FileChangedError(Exception):
    """The file is shorter or longer than the scan saw: it is being written to."""

    def __init__(self, upload: Upload) -> None:
        super().__init__(str(upload.path))
        self.upload = upload


def tls_context(verify: str | bool = True) -> ssl.SSLContext:
    """TLS checked as botocore's `verify` says: True, botocore's default CA bundle (default_ca_bundle); a path,
    that CA bundle only (AWS_CA_BUNDLE, a profile's ca_bundle, REQUESTS_CA_BUNDLE); False, no certificate check."""
    if verify is True:
        return ssl.create_default_context(cafile=default_ca_bundle())
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify)


def default_ca_bundle() -> str | None:
    """The CA bundle botocore trusts when nothing configures one: certifi's where installed, else the cacert.pem
    botocore ships, and only that bundle (urllib3 loads no system certificates beside a bundle): botocore
    1.44.5's httpsession.py `where` and get_cert_path (boto/botocore at 0e6e2404b85dc336dd2889814e089bde7d1a4c55).
    None (the system's trust store) where neither certifi nor botocore is installed."""
    try:
        import certifi

        return str(certifi.where())
    except ImportError:
        spec = importlib.util.find_spec("botocore")  # found, not imported: importing botocore costs ~0.3 s
        shipped = Path(spec.origin).parent / "cacert.pem" if spec and spec.origin else None
        return str(shipped) if shipped and shipped.is_file() else None


class SinglePuts:
    """PUT many files, each in one request, into one bucket; see the module docstring."""

    def __init__(self, endpoint: str, signer: Signer, path_style: bool, headers: dict[str, str] | None = None,
                 verify: str | bool = True) -> None:  # fmt: skip
        """`headers`: sent (and signed) with every PUT, e.g. SSE-KMS's; lower-case names. `verify`: as
        botocore's (tls_context)."""
        parts = urlsplit(endpoint)
        self.tls = tls_context(verify) if parts.scheme == "https" else None
        self.netloc, self.hostname = parts.netloc, parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.signer, self.path_style, self.connections = signer, path_style, CONNECTIONS
        self.headers = headers or {}

    def upload(self, bucket: str, uploads: list[Upload], on_done: Callable[[Upload], None]) -> None:
        """Upload every file; the first final failure is raised (s3_errors.upload_failure)."""
        if not uploads:
            return
        work = self.upload_all(bucket, list(reversed(uploads)), on_done)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(work)
            return
        # Called from inside a running loop (a notebook cell): asyncio.run needs a thread of its own.
        with ThreadPoolExecutor(max_workers=1) as thread:
            thread.submit(asyncio.run, work).result()

    async def upload_all(self, bucket: str, pending: list[Upload], on_done: Callable[[Upload], None]) -> None:
        server = self.server(bucket)
        workers = [self.worker(bucket, server, pending, on_done) for _ in range(min(self.connections, len(pending)))]
        await asyncio.gather(*workers)  # the first failure ends asyncio.run, which cancels the other workers

    async def worker(self, bucket: str, server: str, pending: list[Upload], on_done: Callable[[Upload], None]) -> None:
        connection: Connection | None = None
        try:
            while pending:
                upload = pending.pop()
                connection = await self.put(bucket, server, upload, connection)
                on_done(upload)
        finally:
            if connection is not None:
                connection.close()

    async def put(self, bucket: str, server: str, upload: Upload, connection: Connection | None) -> Connection | None:
        """PUT one file, retrying what is transient; returns the connection to reuse (None: open a new one)."""
        head = self.request_head(bucket, upload)
        for attempt in range(MAX_ATTEMPTS):
            status, body, error = None, b"", None
            try:
                if connection is None:
                    connection = await Connection.open(server, self.port, self.tls)
                status, body = await connection.exchange(head, upload)
            except FileChangedError:
                if connection is not None:
                    connection.close()
                raise changed_while_uploading(upload) from None
            except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError,
                    ValueError) as exc:  # fmt: skip
                error = exc
            if error is not None or not connection or not connection.usable:
                if connection is not None:
                    connection.close()
                connection = None
            if error is None and status == 200:
                return connection
            retry = error is not None and not isinstance(error, FINAL_ERRORS)
            if not (retry or transient(status, body)) or attempt == MAX_ATTEMPTS - 1:
                if connection is not None:
                    connection.close()
                raise upload_failure(bucket, upload, status, body, error)
            await asyncio.sleep(backoff(attempt))
        raise AssertionError("unreachable")

    def server(self, bucket: str) -> str:
        """The host name to connect to (and, with TLS, to name in SNI)."""
        return self.hostname if self.path_style else f"{bucket}.{self.hostname}"

    def request_head(self, bucket: str, upload: Upload) -> bytes:
        host, path = s3_address(self.netloc, bucket, upload.key, self.path_style)
        checksum_name, checksum = checksum_header(upload)
        headers = {**self.headers, "host": host, "content-length": str(upload.size), checksum_name: checksum}
        signed = {**self.signer.sign("PUT", path, "", headers, upload.sha256), "user-agent": USER_AGENT}
        return (f"PUT {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in signed.items()) + "\r\n").encode()


def behind_proxy(url: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether HTTP(S)_PROXY (and NO_PROXY) send requests to `url` through a proxy, as botocore honours.

    This client connects directly, so such endpoints are left to botocore. The variables
    are read as urllib reads them (either case; NO_PROXY lists hosts and domains to reach directly)."""
    from urllib.request import proxy_bypass_environment  # pyright: ignore[reportAttributeAccessIssue]  # not in typeshed

    environ = os.environ if environ is None else environ
    named = [(name, value) for name, value in environ.items() if value and name.lower().endswith("_proxy")]
    # Lower-case names win over upper-case ones, as in urllib's getproxies_environment.
    proxies = {name.lower()[:-6]: value for name, value in sorted(named, key=lambda item: item[0].islower())}
    parts = urlsplit(url)
    return parts.scheme in proxies and not proxy_bypass_environment(parts.netloc, proxies)


def transient(status: int | None, body: bytes) -> bool:
    """An answer worth retrying: a 5xx botocore retries, or S3's throttling and timeout codes."""
    return status in RETRY_STATUS or any(code in body for code in RETRY_CODES)


def split_for_single_puts(uploads: list[Upload]) -> tuple[list[Upload], list[Upload]]:
    """(files SinglePuts sends whole, files above SINGLE_PUT_MAX that go up in parts)."""
    return [u for u in uploads if u.size <= SINGLE_PUT_MAX], [u for u in uploads if u.size > SINGLE_PUT_MAX]


def backoff(attempt: int) -> float:
    """Seconds to wait before retry `attempt + 1`: full jitter over 1, 2, 4, ... s, at most 20 s, so an outage of
    a second or two is ridden out, as the AWS CLI and s5cmd ride it out. That is botocore's standard mode for
    throttling (botocore 1.44.8 retries/standard.py ExponentialBackoff, throttling_base_scale 1); for other
    errors it now scales by 50 ms, whose five attempts give up within 0.75 s of a connection refused."""
    return random.random() * min(2**attempt, 20.0)


def canonical_query(query: dict[str, str]) -> str:
    """URI-encoded, sorted by the encoded names (SigV4); also what the request line carries."""
    return "&".join(
        f"{k}={v}" for k, v in sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in query.items())
    )


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


class Requests:
    """One request at a time over one keep-alive connection (http.client), retried like SinglePuts."""

    def __init__(self, endpoint: str, signer: Signer, path_style: bool) -> None:
        parts = urlsplit(endpoint)
        self.https, self.netloc = parts.scheme == "https", parts.netloc
        self.signer, self.path_style = signer, path_style
        self.connection: http.client.HTTPConnection | None = None

    def connect(self, host: str) -> http.client.HTTPConnection:
        if self.connection is None:
            if self.https:
                self.connection = http.client.HTTPSConnection(host, timeout=READ_TIMEOUT, context=tls_context())
            else:
                self.connection = http.client.HTTPConnection(host, timeout=READ_TIMEOUT)
        return self.connection

    def call(
        self, bucket: str, method: str, key: str = "", query: dict[str, str] | None = None,
        body: bytes | None = None, headers: dict[str, str] | None = None,
    ) -> Response:  # fmt: skip
        """Send the request; an answer of any status is returned, an unreachable endpoint raises OSError."""
        host, path = s3_address(self.netloc, bucket, key, self.path_style)
        target = path + ("?" + canonical_query(query) if query else "")
        for attempt in range(MAX_ATTEMPTS):
            fields = {"host": host, **(headers or {})}
            if body is not None:
                fields["content-length"] = str(len(body))
            signed = self.signer.sign(method, path, canonical_query(query or {}), fields,
                                      hashlib.sha256(body or b"").hexdigest())  # fmt: skip
            signed["user-agent"] = USER_AGENT
            try:
                response = self.exchange(host, method, target, signed, body)
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt == MAX_ATTEMPTS - 1 or isinstance(exc, FINAL_ERRORS):
                    raise OSError(str(exc) or type(exc).__name__) from None
            else:
                if not transient(response.status, response.body) or attempt == MAX_ATTEMPTS - 1:
                    return response
            time.sleep(backoff(attempt))
        raise AssertionError("unreachable")

    def exchange(self, host: str, method: str, target: str, headers: dict[str, str], body: bytes | None) -> Response:
        connection = self.connect(host)
        connection.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        answer = connection.getresponse()
        data = answer.read()
        if answer.will_close:
            self.close()
        return Response(answer.status, {k.lower(): v for k, v in answer.getheaders()}, data)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


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


def b64(hex_digest: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_digest)).decode()
