"""Where a dataset is staged: `s3://bucket/prefix` or `oci://bucket@namespace/prefix`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cloudddp.errors import CloudDDPError

# S3 bucket names: 3-63 lowercase letters, digits, dots and hyphens; OCI allows more (letters, _).
S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
OCI_BUCKET = re.compile(r"^[A-Za-z0-9._-]{1,256}$")


@dataclass(frozen=True)
class Location:
    scheme: str  # "s3" or "oci"
    bucket: str
    prefix: str  # no leading or trailing "/"; may be ""
    namespace: str = ""  # OCI only

    @property
    def bucket_uri(self) -> str:
        if self.scheme == "oci":
            return f"oci://{self.bucket}@{self.namespace}"
        return f"s3://{self.bucket}"

    def key(self, *parts: str) -> str:
        """The object name of `parts` under the prefix."""
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p.strip("/"))

    def uri(self, *parts: str, folder: bool = False) -> str:
        key = self.key(*parts)
        return f"{self.bucket_uri}/{key}" + ("/" if folder and key else "")


def parse_location(uri: str) -> Location:
    """Parse the DEST of `cloudddp stage`, with an error that names the value and the expected shape."""
    shape = "expected s3://bucket/prefix or oci://bucket@namespace/prefix"
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if not S3_BUCKET.match(bucket):
            raise CloudDDPError(f"the destination {uri!r} has no valid S3 bucket name ({bucket!r}); {shape}.")
        return Location("s3", bucket, prefix.strip("/"))
    if uri.startswith("oci://"):
        where, _, prefix = uri[len("oci://") :].partition("/")
        bucket, at, namespace = where.partition("@")
        if not at or not OCI_BUCKET.match(bucket) or not namespace:
            raise CloudDDPError(f"the destination {uri!r} needs a bucket and a namespace; {shape}.")
        return Location("oci", bucket, prefix.strip("/"), namespace)
    raise CloudDDPError(f"the destination {uri!r} is not an object storage URI; {shape}.")
