"""The loopback OCI service plus CreateBucket, which the shared fake does not implement.

POST /n/{namespaceName}/b/ with CreateBucketDetails (`name`, `compartmentId` required;
`publicAccessType` one of the documented values), as in the Object Storage API reference
(CreateBucket). 409 BucketAlreadyExists when the name is taken in the namespace.
"""

from __future__ import annotations

import json
import re
from typing import Any

from helpers.oci_loopback_server import ApiError, FakeOCI

PUBLIC_ACCESS_TYPES = ("NoPublicAccess", "ObjectRead", "ObjectReadWithoutList")


class FakeOCIWithBuckets(FakeOCI):
    def route(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes
    ) -> tuple[int, Any, dict[str, str]]:
        match = re.fullmatch(r"/n/([^/]+)/b/?", path)
        if not match or method != "POST":
            return super().route(method, path, query, headers, body)
        details = json.loads(body)
        if not details.get("name") or not details.get("compartmentId"):
            raise ApiError(400, "MissingParameter", "name and compartmentId are required")
        if details.get("publicAccessType", "NoPublicAccess") not in PUBLIC_ACCESS_TYPES:
            raise ApiError(400, "InvalidParameter", f"publicAccessType {details.get('publicAccessType')!r}")
        key = (match.group(1), details["name"])
        with self.lock:
            if key in self.buckets:
                raise ApiError(409, "BucketAlreadyExists", f"Bucket '{details['name']}' already exists")
            self.buckets.add(key)
            self.created_buckets = [*getattr(self, "created_buckets", []), details]
        return 200, {"namespace": key[0], "name": key[1], "compartmentId": details["compartmentId"]}, {}
