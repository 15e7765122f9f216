"""S3 without botocore, for `cloudddp stage` when the configuration is plain.

Importing botocore and building its S3 client costs ~0.6 s of CPU (its service model is a large
JSON file): more than a no-op re-stage does otherwise. When credentials, region and endpoint
come from the environment alone, every request of a typical stage (HEAD bucket, GET manifest,
LIST, PUT objects, PUT manifest) is signed and sent by s3_http.py. Files above 64 MiB (multipart)
and rare requests (create a bucket, server-side copies, deletes) go through botocore and s3transfer,
imported only then. Anything
botocore would read beyond those variables (a config file, a profile, FIPS or dual-stack
switches, a CA bundle) sends the whole stage through botocore (`plain_configuration` returns
None), so both paths always reach the same endpoint with the same credentials.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cloudddp.errors import CloudDDPError
from cloudddp.staging import s3_http
from cloudddp.staging.location import Location
from cloudddp.staging.s3_errors import missing_bucket, refused
from cloudddp.staging.s3_http import Response
from cloudddp.staging.sigv4 import Signer
from cloudddp.staging.store import Upload

# What botocore reads from the environment for an S3 client that this module reproduces exactly
# (botocore/configprovider.py: region is AWS_DEFAULT_REGION only; credentials.py EnvProvider).
# AWS_REGION is read by other SDKs, not by botocore: ignored here as there.
UNDERSTOOD = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_REGION",
              "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SHARED_CREDENTIALS_FILE", "AWS_PAGER",
              "AWS_CA_BUNDLE"}  # fmt: skip
LIST_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


@dataclass(frozen=True)
class Plain:
    endpoint: str  # scheme://host[:port]
    region: str
    path_style: bool
    access_key: str
    secret_key: str = field(repr=False)  # never in a repr, a log line or a traceback
    token: str | None = field(repr=False)

    def get_frozen_credentials(self) -> Plain:
        """The one set of static credentials, as the signer asks botocore's for them (sigv4.Credentials)."""
        return self


def plain_configuration(environ: Mapping[str, str], home: Path) -> Plain | None:
    """The endpoint, region and credentials botocore would use, if they come from these variables alone."""
    if not environ.get("AWS_ACCESS_KEY_ID") or not environ.get("AWS_SECRET_ACCESS_KEY"):
        return None  # a profile, SSO, a credential process, instance metadata...: botocore's chain
    if any(name.startswith("AWS_") and name not in UNDERSTOOD for name in environ):
        return None  # AWS_PROFILE, AWS_CONFIG_FILE, AWS_USE_FIPS_ENDPOINT, AWS_CA_BUNDLE, ...
    if (home / ".aws" / "config").exists():
        return None  # it may set a region, an endpoint_url or an S3 addressing style
    region = environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    endpoint = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
    ca_bundle = environ.get("AWS_CA_BUNDLE") or environ.get("REQUESTS_CA_BUNDLE")  # botocore's, endpoint.py
    if ca_bundle and not (endpoint or "").startswith("http://"):
        return None  # botocore verifies TLS with that bundle; plain http has no TLS to verify
    if endpoint:
        host = urlsplit(endpoint).hostname or ""
        if not (s3_http.is_ip(host) or host == "localhost"):
            return None  # a named custom endpoint: botocore's addressing rules decide
        path_style = True  # botocore's endpoint rules use path style for an IP address
    else:
        if not re.fullmatch(r"[a-z]{2}-[a-z]+-\d", region) or region.startswith(("us-gov-", "cn-", "us-iso")):
            return None  # other partitions have other domains
        endpoint = f"https://s3.{region}.amazonaws.com"
        path_style = False
    if s3_http.behind_proxy(endpoint, environ):
        return None  # botocore sends through HTTP(S)_PROXY; this path connects directly
    token = environ.get("AWS_SESSION_TOKEN") or None
    return Plain(endpoint.rstrip("/"), region, path_style, environ["AWS_ACCESS_KEY_ID"],
                 environ["AWS_SECRET_ACCESS_KEY"], token)  # fmt: skip


class DirectS3Store:
    """An ObjectStore (store.py) for one bucket and prefix: requests by s3_http.py, files above 64 MiB by botocore."""

    md5_part_size = None
    can_copy = True
    list_page = 1000  # keys per ListObjectsV2 page (S3's most)

    def __init__(self, location: Location, plain: Plain) -> None:
        self.location, self.plain, self.bucket = location, plain, location.bucket
        signer = Signer(plain, plain.region)
        # A bucket name with dots can't be a TLS host name under *.s3.<region>.amazonaws.com: S3's endpoint
        # rules (botocore's endpoint ruleset, isVirtualHostableS3Bucket) address it path style.
        self.path_style = plain.path_style or "." in self.bucket
        self.requests = s3_http.Requests(plain.endpoint, signer, self.path_style)
        self.single_puts = s3_http.SinglePuts(plain.endpoint, signer, self.path_style)
        self._fallback: Any = None

    # -- one request ----------------------------------------------------------------------
    def call(self, operation: str, method: str, key: str = "", query: dict[str, str] | None = None,
             body: bytes | None = None, headers: list[tuple[str, str]] | None = None) -> Response:  # fmt: skip
        """`operation` names the S3 API call for errors; an unreachable endpoint is one paragraph."""
        try:
            return self.requests.call(self.bucket, method, key, query, body, {k.lower(): v for k, v in headers or []})
        except OSError as exc:
            raise CloudDDPError(
                f"cannot reach S3 at {self.plain.endpoint} for s3://{self.bucket} ({operation}): {exc}."
            ) from None

    def failed(self, response: Response, action: str, key: str | None = None) -> CloudDDPError:
        """`action` reads before the place: "use" (the bucket), "list objects in" (the bucket), "read" (a key)."""
        code = re.search(rb"<Code>([^<]+)</Code>", response.body)
        name = code.group(1).decode() if code else f"HTTP {response.status}"
        return refused(self.bucket, action, key, name, denied=response.status == 403, detail=".")

    def botocore_store(self) -> Any:
        """The botocore-based store, for the requests this module does not send (imported only then)."""
        if self._fallback is None:
            from cloudddp.staging.s3_store import open_s3_store

            self._fallback = open_s3_store(self.location, "boto3")
        return self._fallback

    # -- the ObjectStore protocol -----------------------------------------------------------
    def check_bucket(self, create: bool) -> bool:
        response = self.call("HeadBucket", "HEAD")
        if response.status == 200:
            return False
        if response.status == 403 and not response.body:
            # HEAD's 403 has no body, so no code tells rejected credentials from a missing permission:
            # an empty listing (the same s3:ListBucket permission) returns one.
            probe = self.call("ListObjectsV2", "GET", query={"list-type": "2", "max-keys": "0"})
            response = probe if probe.status == 403 else response
        if response.status != 404:
            raise self.failed(response, "use")
        if not create:
            raise missing_bucket(self.bucket)
        return bool(self.botocore_store().check_bucket(True))

    def list_sizes(self, prefix: str) -> dict[str, int]:
        from xml.etree import ElementTree

        found: dict[str, int] = {}
        query = {"list-type": "2", "prefix": prefix, "max-keys": str(self.list_page)}
        while True:
            response = self.call("ListObjectsV2", "GET", query=query)
            if response.status != 200:
                raise self.failed(response, "list objects in")
            root = ElementTree.fromstring(response.body)
            for item in root.iter(f"{LIST_NS}Contents"):
                found[item.findtext(f"{LIST_NS}Key") or ""] = int(item.findtext(f"{LIST_NS}Size") or 0)
            token = root.findtext(f"{LIST_NS}NextContinuationToken")
            if root.findtext(f"{LIST_NS}IsTruncated") != "true" or not token:
                return found
            query = {**query, "continuation-token": token}

    def read(self, key: str) -> bytes | None:
        response = self.call("GetObject", "GET", key)
        if response.status == 404:
            return None
        if response.status != 200:
            raise self.failed(response, "read", key)
        return response.body

    def write(self, key: str, data: bytes) -> None:
        checksum = base64.b64encode(hashlib.sha256(data).digest()).decode()
        response = self.call("PutObject", "PUT", key, body=data, headers=[("x-amz-checksum-sha256", checksum)])
        if response.status != 200:
            raise self.failed(response, "write", key)

    def upload(self, uploads: list[Upload], on_done: Callable[[Upload], None]) -> None:
        small, large = s3_http.split_for_single_puts(uploads)
        self.single_puts.upload(self.bucket, small, on_done)
        if large:
            self.botocore_store().upload(large, on_done)

    def copy(self, pairs: list[tuple[str, str]]) -> None:
        self.botocore_store().copy(pairs)

    def delete(self, keys: list[str]) -> None:
        self.botocore_store().delete(keys)


def open_direct_store(location: Location, environ: Mapping[str, str] | None = None) -> DirectS3Store | None:
    """A DirectS3Store if the configuration is plain, else None (use botocore).

    Also None for a bucket in another region than the configured one: S3 answers HeadBucket there with
    301 and `x-amz-bucket-region` (S3 API reference, HeadBucket), which botocore follows and this does not."""
    environ = os.environ if environ is None else environ
    plain = plain_configuration(environ, Path(environ.get("HOME") or Path.home()))
    if plain is None:
        return None
    store = DirectS3Store(location, plain)
    probe = store.call("HeadBucket", "HEAD")
    elsewhere = probe.headers.get("x-amz-bucket-region")
    if probe.status in (301, 307) or (elsewhere and elsewhere != plain.region):
        return None
    return store
