"""Where a dataset is staged: `s3://bucket/prefix` or `oci://bucket@namespace/prefix`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from cloudddp.errors import CloudDDPError
from cloudddp.redact import has_url_credentials

# S3 bucket names (AWS S3 user guide, "General purpose bucket naming rules"): 3-63 lowercase letters, digits,
# dots and hyphens, a letter or digit at each end, no two adjacent periods, not an IP address, not starting with
# xn-- or sthree-. (Reserved suffixes such as -s3alias and --x-s3 stay: an access point alias or a directory
# bucket takes objects under such a name.) OCI allows more (letters, _).
S3_BUCKET = re.compile(r"^(?!xn--|sthree-)(?!.*\.\.)(?!\d+\.\d+\.\d+\.\d+\Z)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
OCI_BUCKET = re.compile(r"^[A-Za-z0-9._-]{1,256}\Z")  # \Z: "$" would also take a final newline
OCI_NAMESPACE = re.compile(r"^[A-Za-z0-9._-]+\Z")


def oci_prefix_problems(prefix: str) -> list[str]:
    """What in an Object Storage prefix the job's mount and cloudddp's staging would not agree on.

    Object Storage keeps `a//b` and `a/../b` as written, while paths on a job's mount collapse them;
    `cloudddp stage` and `launch -p oci` refuse the same prefixes, so a staged URI can be launched."""
    return prefix_problems(prefix, odd="?#")


def prefix_problems(prefix: str, odd: str = "") -> list[str]:
    """What in a prefix would be stored under one key and read back under another, or split the printed URI.

    For S3 too: SeaweedFS and job-side tools collapse `a//b` (the printed URI then lists nothing), and a
    newline or tab splits the URI that `cloudddp stage | tail -1` hands on. `odd`: characters also refused."""
    segments = prefix.rstrip("/").split("/") if prefix.rstrip("/") else []
    problems = []
    if "" in segments:
        problems.append("an empty segment (//)")
    if any(segment in (".", "..") for segment in segments):
        problems.append("a '.' or '..' segment")
    problems += [f"a {char!r}" for char in odd if char in prefix]
    if any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in prefix):
        problems.append("white space or a control character")
    return problems


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


def s3_address(netloc: str, bucket: str, key: str, path_style: bool) -> tuple[str, str]:
    """(Host header, URI-encoded path) of `key` in `bucket` on an S3 endpoint (the bucket itself for key "").

    Path style puts the bucket in the path; virtual-hosted style in the host name. S3 encodes the path once."""
    encoded = quote(key, safe="/-_.~")
    if path_style:
        return netloc, f"/{bucket}/{encoded}" if key else f"/{bucket}"
    return f"{bucket}.{netloc}", f"/{encoded}"


def parse_location(uri: str) -> Location:
    """Parse the DEST of `cloudddp stage`, with an error that names the value and the expected shape."""
    shape = "expected s3://bucket/prefix or oci://bucket@namespace/prefix"
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[len("s3://") :].partition("/")
        if not S3_BUCKET.match(bucket):
            # CloudDDPError hides the URI's user-info, not the same text quoted as the bucket (`KEY:SECRET@bucket`).
            shown = "the URI holds credentials before '@'" if has_url_credentials(uri) else repr(bucket)
            raise CloudDDPError(f"the destination {uri!r} has no valid S3 bucket name ({shown}); {shape}.")
        if problems := prefix_problems(prefix):
            raise CloudDDPError(
                f"the destination {uri!r}: the prefix has {' and '.join(problems)}; S3 servers and job-side tools "
                f"may read such a key under another name. Use a prefix like s3://{bucket}/team/project."
            )
        return Location("s3", bucket, prefix.strip("/"))
    if uri.startswith("oci://"):
        where, _, prefix = uri[len("oci://") :].partition("/")
        bucket, at, namespace = where.partition("@")
        if not at or not OCI_BUCKET.match(bucket) or not OCI_NAMESPACE.match(namespace):
            raise CloudDDPError(f"the destination {uri!r} needs a bucket and a namespace; {shape}.")
        if problems := oci_prefix_problems(prefix):
            raise CloudDDPError(
                f"the destination {uri!r}: the prefix has {' and '.join(problems)}; Object Storage would store the "
                f"names literally, and an OCI job could not read the version there. Use a prefix like "
                f"oci://{bucket}@{namespace}/team/project."
            )
        return Location("oci", bucket, prefix.strip("/"), namespace)
    raise CloudDDPError(f"the destination {uri!r} is not an object storage URI; {shape}.")
