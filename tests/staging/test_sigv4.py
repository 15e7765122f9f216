"""cloudddp's SigV4 signer (staging/sigv4.py) against botocore's own S3SigV4Auth: the same request,
at the same instant, must carry the same Authorization header, byte for byte.

The reference is botocore's signer (boto/botocore, botocore/auth.py, S3SigV4Auth), run live from the dev
environment's botocore (1.44.5 when written), as used for every S3 request boto3 sends."""

from __future__ import annotations

import base64
import datetime
import hashlib
from unittest import mock
from urllib.parse import quote

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from cloudddp.staging.s3_http import canonical_query
from cloudddp.staging.sigv4 import Signer

NOW = datetime.datetime(2026, 11, 22, 17, 45, 3, tzinfo=datetime.timezone.utc)
LIST_QUERY = {"list-type": "2", "prefix": "data/v-1/a b/", "max-keys": "1000", "continuation-token": "1/abc+=="}
KEY, SECRET = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


def botocore_authorization(method: str, url: str, headers: dict[str, str], body: bytes, token: str | None) -> str:
    request = AWSRequest(method=method, url=url, headers=headers, data=body)
    with mock.patch("botocore.auth.get_current_datetime", return_value=NOW):
        S3SigV4Auth(Credentials(KEY, SECRET, token), "s3", "eu-west-3").add_auth(request)
    return request.headers["Authorization"]


@pytest.mark.parametrize("token", [None, "FwoGZXIvYXdzEXAMPLE//token+="])
@pytest.mark.parametrize(
    ("method", "host", "path", "query", "body", "extra"),
    [
        ("PUT", "127.0.0.1:8333", "/bkt/data/v-1/a b+c/é.jpg", {}, b"twenty bytes of data", True),
        ("PUT", "bkt.s3.eu-west-3.amazonaws.com", "/data/_cloudddp_manifest.json", {}, b"{}", True),
        ("GET", "127.0.0.1:8333", "/bkt", LIST_QUERY, b"", False),
        ("HEAD", "bkt.s3.eu-west-3.amazonaws.com", "/", {}, b"", False),
    ],
)
def test_every_signature_equals_botocores(
    method: str, host: str, path: str, query: dict[str, str], body: bytes, extra: bool, token: str | None
) -> None:
    encoded = quote(path, safe="/-_.~")
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": host}
    if extra:  # what a PUT of cloudddp's carries
        headers["content-length"] = str(len(body))
        headers["x-amz-checksum-sha256"] = base64.b64encode(hashlib.sha256(body).digest()).decode()
    ours = Signer(Credentials(KEY, SECRET, token), "eu-west-3").sign(method, encoded, canonical_query(query), headers, payload,
                                                         now=NOW.timestamp())  # fmt: skip
    url = f"http://{host}{encoded}" + (f"?{canonical_query(query)}" if query else "")
    theirs = botocore_authorization(method, url, {k: v for k, v in headers.items() if k != "host"}, body, token)
    assert ours["authorization"] == theirs
    assert ours["x-amz-date"] == "20261122T174503Z" and ours["x-amz-content-sha256"] == payload
    assert ("x-amz-security-token" in ours) == bool(token)


def test_refreshed_credentials_are_used_from_the_next_signature_on() -> None:
    """botocore refreshes temporary credentials behind get_frozen_credentials(): the signer asks each time."""

    class Rotating:
        def __init__(self) -> None:
            self.current = Credentials("AKIDFIRST", "first-secret", "first-token")

        def get_frozen_credentials(self) -> Credentials:
            return self.current

    rotating = Rotating()
    signer = Signer(rotating, "us-east-1")
    first = signer.sign("GET", "/bkt", "", {"host": "h"}, hashlib.sha256(b"").hexdigest(), now=NOW.timestamp())
    rotating.current = Credentials("AKIDSECOND", "second-secret", "second-token")
    second = signer.sign("GET", "/bkt", "", {"host": "h"}, hashlib.sha256(b"").hexdigest(), now=NOW.timestamp())
    assert "AKIDFIRST/" in first["authorization"] and first["x-amz-security-token"] == "first-token"
    assert "AKIDSECOND/" in second["authorization"] and second["x-amz-security-token"] == "second-token"
    reference = Signer(Credentials("AKIDSECOND", "second-secret", "second-token"), "us-east-1")
    assert (
        reference.sign("GET", "/bkt", "", {"host": "h"}, hashlib.sha256(b"").hexdigest(), now=NOW.timestamp()) == second
    )


def test_the_secret_never_shows_in_the_signers_repr() -> None:
    signer = Signer(Credentials(KEY, SECRET, "session-token-value"), "us-east-1")
    signer.sign("GET", "/bkt", "", {"host": "h"}, hashlib.sha256(b"").hexdigest())
    assert SECRET not in repr(signer) and "session-token-value" not in repr(signer)
