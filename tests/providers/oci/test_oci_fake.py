"""The loopback OCI service is as strict as the services: every check it makes, made to fail.

Requests here are signed by hand (draft-cavage-http-signatures, rsa-sha256, the scheme
`oci.signer.Signer` implements), so each test controls exactly what is signed and sent:
a wrong key, a tampered body, a stale date, another Host, a JSON POST without its body
headers signed. Then every rule the fake applies to request bodies gets a request that
breaks it, starting from the CreateJob body the real SDK sent for a real render.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import http.client
import json
from collections.abc import Callable, Iterator
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding
from helpers import REPO
from helpers.oci_loopback_server import (
    COMPARTMENT,
    LOG,
    LOG_COMPARTMENT,
    LOG_GROUP,
    PROJECT,
    FakeOCI,
    ThrowawayKey,
    oci_settings,
)

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.oci.provider import OCIProvider

BODY_HEADERS = ["content-length", "content-type", "x-content-sha256"]
GET_HEADERS = ["date", "(request-target)", "host"]


@pytest.fixture(scope="module")
def server(key: ThrowawayKey, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeOCI]:
    """One service for the module: the tests read only what their own requests did."""
    with FakeOCI(key, run_root=tmp_path_factory.mktemp("service"), step=3600) as fake:  # runs never start
        yield fake


def send(
    server: FakeOCI,
    key: ThrowawayKey,
    method: str,
    path: str,
    body: bytes | dict[str, Any] | None = None,
    *,
    names: list[str] | None = None,
    key_id: str | None = None,
    date: dt.datetime | None = None,
    host: str | None = None,
    after_signing: Callable[[dict[str, str], bytes], bytes] | None = None,
    algorithm: str = "rsa-sha256",
) -> tuple[int, Any]:
    """One request signed as oci.signer.Signer signs it, with the given deviations; (status, JSON body: an object
    or, from a list call, an array)."""
    raw = json.dumps(body).encode() if isinstance(body, dict) else (body or b"")
    headers = {"date": format_datetime(date or dt.datetime.now(dt.timezone.utc), usegmt=True),
               "host": host or server.host}  # fmt: skip
    has_body = method in ("POST", "PUT")
    if has_body:
        content_type = "application/octet-stream" if path.startswith("/n/") and method == "PUT" else "application/json"
        headers.update({"content-type": content_type, "content-length": str(len(raw)),
                        "x-content-sha256": base64.b64encode(hashlib.sha256(raw).digest()).decode()})  # fmt: skip
    names = names if names is not None else GET_HEADERS + (BODY_HEADERS if has_body else [])
    lines = [f"(request-target): {method.lower()} {path}" if n == "(request-target)" else f"{n}: {headers.get(n, '')}"
             for n in names]  # fmt: skip
    signature = key.private_key.sign("\n".join(lines).encode(), padding.PKCS1v15(), hashes.SHA256())
    headers["authorization"] = (
        f'Signature version="1",headers="{" ".join(names)}",keyId="{key_id or key.key_id}",'
        f'algorithm="{algorithm}",signature="{base64.b64encode(signature).decode()}"'
    )
    if after_signing:
        raw = after_signing(headers, raw)
    connection = http.client.HTTPConnection("127.0.0.1", int(server.host.split(":")[1]), timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(raw or None)
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    return response.status, (json.loads(data) if data else {})


# -- the signature ------------------------------------------------------------------------
def test_a_correctly_signed_request_is_accepted(server: FakeOCI, key: ThrowawayKey) -> None:
    failures = len(server.signature_failures)
    status, body = send(server, key, "GET", "/20190101/jobRuns?compartmentId=ocid1.compartment.oc1..aaaanone")
    assert (status, body) == (200, [])
    status, _ = send(server, key, "POST", "/20190909/search", {"searchQuery": "x"})
    assert status == 400 and len(server.signature_failures) == failures  # past the signature: the body is wrong


def tamper_body(headers: dict[str, str], raw: bytes) -> bytes:
    return raw.replace(b"compartment", b"COMPARTMENT")  # same length: only the digest can tell


def tamper_digest_too(headers: dict[str, str], raw: bytes) -> bytes:
    changed = tamper_body(headers, raw)
    headers["x-content-sha256"] = base64.b64encode(hashlib.sha256(changed).digest()).decode()
    return changed


OTHER_KEY = ThrowawayKey.generate()
STALE = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=10)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"algorithm": "hmac-sha256"}, "unexpected version/algorithm"),
        ({"key_id": OTHER_KEY.key_id}, "unknown keyId"),
        ({"wrong_key": True}, "signature does not verify"),  # the right keyId, signed with another key
        ({"after_signing": tamper_body}, "x-content-sha256 does not match the body"),
        ({"after_signing": tamper_digest_too}, "signature does not verify"),
        ({"date": STALE}, "date header more than 5 minutes off"),
        ({"host": "datascience.us-ashburn-1.oci.oraclecloud.com"}, "does not name this endpoint"),
        ({"names": GET_HEADERS}, "['content-length', 'content-type', 'x-content-sha256'] not signed"),
        ({"names": ["date", "host", *BODY_HEADERS]}, "['(request-target)'] not signed"),
        ({"names": [*GET_HEADERS, *BODY_HEADERS, "opc-retry-token"]}, "signed header 'opc-retry-token' missing"),
    ],
)
def test_a_request_the_service_would_not_authenticate_gets_401(
    server: FakeOCI, key: ThrowawayKey, options: dict[str, Any], problem: str
) -> None:
    signer = OTHER_KEY if options.pop("wrong_key", False) else key
    key_id = options.pop("key_id", None) or key.key_id
    jobs = len(server.jobs)
    status, body = send(server, signer, "POST", "/20190101/jobs", {"compartmentId": COMPARTMENT},
                        key_id=key_id, **options)  # fmt: skip
    assert status == 401 and body["code"] == "NotAuthenticated"
    assert problem in body["message"] and server.signature_failures[-1] == body["message"].split(": ", 1)[1]
    assert len(server.jobs) == jobs


SESSION_KEY = ThrowawayKey.generate()  # the key pair `oci session authenticate` makes


@pytest.mark.parametrize(
    ("token", "signer", "problem"),
    [
        (lambda s: "not-a-token-the-service-issued", SESSION_KEY, "unknown security token"),
        (
            lambda s: s.issue_session_token(SESSION_KEY.private_key, lifetime=-5),
            SESSION_KEY,
            "security token has expired",
        ),
        (lambda s: s.issue_session_token(SESSION_KEY.private_key), OTHER_KEY, "signature does not verify"),
    ],
)
def test_a_security_token_request_the_service_would_not_authenticate_gets_401(
    server: FakeOCI, token: Callable[[FakeOCI], str], signer: ThrowawayKey, problem: str
) -> None:
    status, body = send(server, signer, "GET", f"/20190101/jobRuns?compartmentId={COMPARTMENT}",
                        key_id=f"ST${token(server)}")  # fmt: skip
    assert (status, body["code"]) == (401, "NotAuthenticated") and problem in body["message"]


def test_a_security_token_request_signed_with_its_session_key_is_accepted(server: FakeOCI) -> None:
    token = server.issue_session_token(SESSION_KEY.private_key)
    status, _ = send(server, SESSION_KEY, "POST", "/20190909/search", {"searchQuery": "x"}, key_id=f"ST${token}")
    assert status == 400  # past the signature: the body is wrong


def test_get_log_names_the_logs_compartment(server: FakeOCI, key: ThrowawayKey) -> None:
    status, log = send(server, key, "GET", f"/20200531/logGroups/{LOG_GROUP}/logs/{LOG}")
    assert status == 200 and (log["compartmentId"], log["logGroupId"]) == (LOG_COMPARTMENT, LOG_GROUP)
    assert send(server, key, "GET", f"/20200531/logGroups/ocid1.loggroup.oc1.iad.aaaaother/logs/{LOG}")[0] == 404
    assert send(server, key, "GET", f"/20200531/logGroups/{LOG_GROUP}/logs/ocid1.log.oc1.iad.aaaanope")[0] == 404


def test_no_signature_at_all_gets_401(server: FakeOCI) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", int(server.host.split(":")[1]), timeout=30)
    connection.request("GET", f"/20190101/jobRuns?compartmentId={COMPARTMENT}")
    response = connection.getresponse()
    assert response.status == 401 and b"no Signature authorization header" in response.read()
    connection.close()


def test_object_storage_puts_sign_without_the_body_as_the_sdk_does(server: FakeOCI, key: ThrowawayKey) -> None:
    """Object Storage PutObject is signed without body headers (oci.signer: the body is streamed)."""
    status, _ = send(server, key, "PUT", "/n/ns/b/bkt/o/a.txt", b"hello", names=GET_HEADERS)
    assert status == 200 and server.objects[("ns", "bkt", "a.txt")].data == b"hello"


# -- the rules for request bodies ---------------------------------------------------------
@pytest.fixture(scope="module")
def sent_job_body(server: FakeOCI, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The CreateJob body the real SDK sent for a real render (the fake accepted it)."""
    config = server.key.write_config(tmp_path_factory.mktemp("config") / ".oci")
    provider = OCIProvider(service_endpoint=server.url, environ={"OCI_CONFIG_FILE": str(config)})
    spec = build_spec({"entry_point": "train_ddp.py", "source_dir": str(REPO / "sources"), "nodes": 2,
                       "oci": oci_settings()})  # fmt: skip
    before = len(server.calls("POST", r"^/20190101/jobs$"))
    provider.submit(provider.render(spec))
    (call,) = server.calls("POST", r"^/20190101/jobs$")[before:]
    assert call.status == 200
    return call.body


@pytest.fixture
def job_body(sent_job_body: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(sent_job_body)


def group(body: dict[str, Any]) -> dict[str, Any]:
    return body["jobNodeConfigurationDetails"]["jobNodeGroupConfigurationDetailsList"][0]


JOB_RULES: list[tuple[Callable[[dict[str, Any]], Any], str]] = [
    (lambda b: b.pop("compartmentId"), "compartmentId is required"),
    (lambda b: b.pop("projectId"), "projectId is required"),
    (lambda b: b.update(jobConfigurationDetails={"jobType": "DEFAULT"}), "jobConfigurationDetails must be empty"),
    (lambda b: b["jobNodeConfigurationDetails"].update(jobNodeType="SINGLE"), "jobNodeType must be MULTI_NODE"),
    (lambda b: b["jobNodeConfigurationDetails"].update(startupOrder="LATER"), "startupOrder must be IN_PARALLEL"),
    (lambda b: b["jobNodeConfigurationDetails"].pop("jobNetworkConfiguration"), "jobNetworkType is required"),
    (lambda b: b["jobNodeConfigurationDetails"].update(jobNetworkConfiguration={"jobNetworkType": "CUSTOM_NETWORK"}),
     "subnetId is required for CUSTOM_NETWORK"),
    (lambda b: b["jobNodeConfigurationDetails"].update(jobNodeGroupConfigurationDetailsList=[]),
     "at least one node group is required"),
    (lambda b: group(b).update(replicas=0), "a node group needs a name and replicas >= 1"),
    (lambda b: group(b)["jobInfrastructureConfigurationDetails"].pop("shapeName"), "with a shapeName is required"),
    (lambda b: group(b)["jobInfrastructureConfigurationDetails"].update(blockStorageSizeInGBs=49),
     "blockStorageSizeInGBs must be at least 50"),
    (lambda b: group(b)["jobConfigurationDetails"].update(jobType="EMPTY"), "jobType must be DEFAULT"),
    (lambda b: group(b)["jobConfigurationDetails"]["environmentVariables"].update(BIG="x" * 20_000),
     "environment variables exceed 20000 characters"),
    (lambda b: group(b)["jobEnvironmentConfigurationDetails"].pop("image"), "an OCIR_CONTAINER environment with an"),
    (lambda b: group(b)["jobEnvironmentConfigurationDetails"].update(cmd=["a" * 1800]),
     "must be less than 2048 bytes"),
    (lambda b: b["jobStorageMountConfigurationDetailsList"][0].pop("storageType"), "storage mounts need storageType"),
    (lambda b: b["jobStorageMountConfigurationDetailsList"][0].update(bucket="other"), "bucket other not found"),
    (lambda b: b["jobLogConfigurationDetails"].update(logGroupId="ocid1.loggroup.oc1.iad.aaaanope"),
     "log group ocid1.loggroup.oc1.iad.aaaanope not found"),
    (lambda b: b["jobLogConfigurationDetails"].update(logId="ocid1.log.oc1.iad.aaaanope", enableAutoLogCreation=False),
     "log ocid1.log.oc1.iad.aaaanope not found in log group"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "message"), JOB_RULES, ids=[m for _, m in JOB_RULES])
def test_every_create_job_rule_refuses_a_body_that_breaks_it(
    server: FakeOCI, key: ThrowawayKey, job_body: dict[str, Any], change: Any, message: str
) -> None:
    jobs = len(server.jobs)
    change(job_body)
    status, body = send(server, key, "POST", "/20190101/jobs", job_body)
    assert (status, body["code"]) == (400, "InvalidParameter") and message in body["message"]
    assert len(server.jobs) == jobs


def test_a_body_that_is_not_json_is_refused(server: FakeOCI, key: ThrowawayKey) -> None:
    status, body = send(server, key, "POST", "/20190101/jobs", b"{not json")
    assert status == 400 and "the request body is not valid JSON" in body["message"]
    status, body = send(server, key, "GET", "/nothing/here")
    assert status == 404 and "no route for GET /nothing/here" in body["message"]


def test_the_2048_byte_rule_is_the_combined_size_of_cmd_and_entrypoint(
    server: FakeOCI, key: ThrowawayKey, job_body: dict[str, Any]
) -> None:
    container = group(job_body)["jobEnvironmentConfigurationDetails"]
    used = sum(len(part.encode()) for part in container["entrypoint"])
    container["cmd"] = ["a" * (2047 - used)]
    assert send(server, key, "POST", "/20190101/jobs", job_body)[0] == 200
    container["cmd"] = ["a" * (2048 - used)]
    status, body = send(server, key, "POST", "/20190101/jobs", job_body)
    assert status == 400 and "(2048 bytes) must be less than 2048 bytes" in body["message"]


def test_job_run_rules(server: FakeOCI, key: ThrowawayKey, job_body: dict[str, Any]) -> None:
    status, job = send(server, key, "POST", "/20190101/jobs", job_body)
    assert status == 200 and job["lifecycleState"] == "CREATING"
    run = {"jobId": job["id"], "compartmentId": COMPARTMENT, "projectId": PROJECT}
    status, body = send(server, key, "POST", "/20190101/jobRuns", run)
    assert (status, body["code"]) == (409, "IncorrectState")  # not ACTIVE until it has been read once
    assert send(server, key, "GET", f"/20190101/jobs/{job['id']}")[1]["lifecycleState"] == "ACTIVE"
    assert send(server, key, "POST", "/20190101/jobRuns", {**run, "jobId": "ocid1.datasciencejob.oc1.iad.x"})[0] == 404
    status, body = send(server, key, "POST", "/20190101/jobRuns", {**run, "projectId": None})
    assert status == 400 and "projectId is required" in body["message"]
    status, created = send(server, key, "POST", "/20190101/jobRuns", run)
    assert status == 200
    status, body = send(server, key, "GET", "/20190101/jobRuns")
    assert status == 400 and "compartmentId is required" in body["message"]
    assert send(server, key, "POST", f"/20190101/jobRuns/{created['id']}/actions/cancelJobRun", b"")[0] == 202
    server.set_run(created["id"], lifecycleState="CANCELED")
    status, body = send(server, key, "POST", f"/20190101/jobRuns/{created['id']}/actions/cancelJobRun", b"")
    assert (status, body["code"]) == (409, "IncorrectState")
    assert send(server, key, "GET", "/20190101/jobRuns/ocid1.datasciencejobrun.oc1.iad.nope")[0] == 404
    assert send(server, key, "GET", "/20190101/jobs/ocid1.datasciencejob.oc1.iad.nope")[0] == 404
    assert send(server, key, "GET", "/20190101/somethingElse")[0] == 404


def test_run_listing_pages_like_the_service_and_latest_pages_past_other_runs(
    server: FakeOCI, key: ThrowawayKey, job_body: dict[str, Any], tmp_path: Path
) -> None:
    # oci 2.189.0 DataScienceClient.list_job_runs: `limit` "1 is the minimum, 100 is the maximum", the next page's
    # token in opc-next-page. `latest` read one page of 50: 60 newer runs of other tools hid cloudddp's.
    compartment = "ocid1.compartment.oc1..aaaapaging"
    status, job = send(server, key, "POST", "/20190101/jobs", job_body)
    send(server, key, "GET", f"/20190101/jobs/{job['id']}")  # ACTIVE once read
    run = {"jobId": job["id"], "compartmentId": compartment, "projectId": PROJECT,
           "freeformTags": {"cloudddp-nodes": "2"}}  # fmt: skip
    status, ours = send(server, key, "POST", "/20190101/jobRuns", run)
    assert status == 200
    for number in range(150):  # other tools' runs, all newer than cloudddp's
        other = {
            **ours,
            "id": f"{ours['id']}x{number}",
            "freeformTags": {},
            "timeAccepted": f"2999-01-01T00:{number // 60:02d}:{number % 60:02d}.000Z",
        }
        server.runs[other["id"]] = other
    assert send(server, key, "GET", f"/20190101/jobRuns?compartmentId={compartment}&limit=101")[0] == 400
    status, first = send(server, key, "GET", f"/20190101/jobRuns?compartmentId={compartment}&limit=100")
    assert status == 200 and len(first) == 100 and ours["id"] not in [r["id"] for r in first]
    config = key.write_config(tmp_path / ".oci")
    provider = OCIProvider(service_endpoint=server.url, environ={"OCI_CONFIG_FILE": str(config),
                                                                "NB_SESSION_COMPARTMENT_OCID": compartment})  # fmt: skip
    assert provider.resolve_run_id("latest") == ours["id"]
    with pytest.raises(CloudDDPError, match=r"no cloudddp job runs in compartment ocid1\.compartment\.oc1\.\.aaaanone"):
        OCIProvider(service_endpoint=server.url, environ={"OCI_CONFIG_FILE": str(config),
                    "NB_SESSION_COMPARTMENT_OCID": "ocid1.compartment.oc1..aaaanone"}).resolve_run_id("latest")  # fmt: skip


def scoped(compartment: str, group: str, log: str) -> str:
    return f"search \"{compartment}/{group}/{log}\" | where source = '*run' | sort by datetime asc"


def test_search_rules(server: FakeOCI, key: ThrowawayKey) -> None:
    good = {"searchQuery": scoped(LOG_COMPARTMENT, LOG_GROUP, LOG),
            "timeStart": "2025-01-01T00:00:00.000Z", "timeEnd": "2025-01-01T00:01:00.000Z"}  # fmt: skip
    assert send(server, key, "POST", "/20190909/search?limit=1000", good)[0] == 200
    other_group = "ocid1.loggroup.oc1.iad.aaaaother"
    for body, query, message in (
        ({**good, "searchQuery": "search everything"}, "", "unsupported search"),
        # ADS scopes a search with the Log's own compartment (oci_logging.py OCILog.search @0e785b9f); the jobs'
        # compartment is another one here.
        ({**good, "searchQuery": scoped(COMPARTMENT, LOG_GROUP, LOG)}, "", f"is not in compartment {COMPARTMENT}"),
        ({**good, "timeEnd": good["timeStart"]}, "", "timeEnd must be after timeStart"),
        (good, "?limit=1001", "limit must be at most 1000"),
    ):
        status, answer = send(server, key, "POST", f"/20190909/search{query}", body)
        assert status == 400 and message in answer["message"]
    for scope in (scoped(LOG_COMPARTMENT, LOG_GROUP, "ocid1.log.oc1.iad.aaaanope"),
                  scoped(LOG_COMPARTMENT, other_group, LOG)):  # fmt: skip
        status, answer = send(server, key, "POST", "/20190909/search", {**good, "searchQuery": scope})
        assert (status, answer["code"]) == (404, "NotAuthorizedOrNotFound")


def test_object_storage_rules(server: FakeOCI, key: ThrowawayKey) -> None:
    def put(path: str, data: bytes, md5: str | None) -> tuple[int, dict[str, Any]]:
        def add_md5(headers: dict[str, str], raw: bytes) -> bytes:
            if md5:
                headers["content-md5"] = md5
            return raw

        return send(server, key, "PUT", path, data, names=GET_HEADERS, after_signing=add_md5)

    right = base64.b64encode(hashlib.md5(b"data", usedforsecurity=False).digest()).decode()
    assert put("/n/ns/b/bkt/o/x", b"data", right)[0] == 200
    status, body = put("/n/ns/b/bkt/o/x", b"DATA", right)
    assert (status, body["code"]) == (400, "InvalidContentMd5")
    assert send(server, key, "GET", "/n/ns/b/nope/o")[1]["code"] == "BucketNotFound"
    assert send(server, key, "GET", "/n/ns/b/bkt/o/missing")[0] == 404
    assert send(server, key, "DELETE", "/n/ns/b/bkt/o/missing")[0] == 404
    assert send(server, key, "DELETE", "/n/ns/b/bkt/o")[0] == 405
    status, upload = send(server, key, "POST", "/n/ns/b/bkt/u", {"object": "big"})
    assert status == 200
    part = f"/n/ns/b/bkt/u/big?uploadId={upload['uploadId']}&uploadPartNum=1"
    assert put(part, b"DATA", right)[1]["code"] == "InvalidContentMd5"
    assert put("/n/ns/b/bkt/u/big?uploadId=nope&uploadPartNum=1", b"data", None)[1]["code"] == "NoSuchUpload"
    assert put(part, b"data", right)[0] == 200
    commit = {"partsToCommit": [{"partNum": 1, "etag": "not-the-etag"}]}
    status, body = send(server, key, "POST", f"/n/ns/b/bkt/u/big?uploadId={upload['uploadId']}", commit)
    assert status == 400 and "etag mismatch for part 1" in body["message"]
