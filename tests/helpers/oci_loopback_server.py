"""A small, faithful stand-in for the OCI services cloudddp calls, on 127.0.0.1.

The real `oci` SDK talks to it through `service_endpoint=` (one server answers Data
Science, Object Storage and Logging Search: their paths don't overlap). Every request
must carry a valid HTTP signature (draft-cavage, rsa-sha256, as `oci.signer.Signer`
makes it) from the throwaway key the test generated, or from the session key of a
security token the fake issued and that has not expired (keyId `ST$<token>`, as
`oci.auth.signers.SecurityTokenSigner` sends it, oci SDK 2.189.0
auth/signers/security_token_signer.py), signed over a Host header that names
this server and a date within 5 minutes; JSON bodies of POST/PUT calls must be signed too
(x-content-sha256, content-length, content-type), as the services require. Bodies are
checked for the camelCase shapes of the documented API (only fields cloudddp sends: each
rule has a test in tests/providers/oci/test_oci_fake.py that makes it fail), and every request is
recorded so tests assert on what the SDK sent.

Implemented (paths as in the API reference):
- Data Science 20190101: POST /jobs, GET /jobs/{id}, POST /jobRuns, GET /jobRuns/{id},
  GET /jobRuns (list), POST /jobRuns/{id}/actions/cancelJobRun.
- Object Storage: PUT/GET/HEAD/DELETE /n/{ns}/b/{bucket}/o/{object}, GET .../o (list),
  multipart POST .../u, PUT .../u/{object}?uploadId&uploadPartNum, POST .../u/{object}
  (commit), DELETE .../u/{object} (abort). MD5s as the service reports them. Each stored object keeps
  one ETag (PUT, commit, GET and HEAD return it) and DeleteObject honours if-match: 412 NoEtagMatch
  for another ETag (OCI API Errors, docs.oracle.com/en-us/iaas/Content/API/References/apierrors.htm).
  Object names follow the service's rules (Object Storage docs, "Managing Objects", Object Names:
  1 to 1024 characters, no line feed, carriage return or NUL): PutObject and CreateMultipartUpload
  refuse others with 400 InvalidObjectName, the code the service answers (its API Errors page,
  #apierrors_400__400_invalidobjectname, as quoted in rclone/rclone#6332).
- Logging Search 20190909: POST /search (at most `limit` results per call; records show
  up `ingestion_delay` seconds after they were written). The scope must be
  "<the log's compartment>/<its log group>/<log>", as ADS builds it (ads/common/oci_logging.py
  `OCILog.search`, oracle/accelerated-data-science @0e785b9f).
- Logging Management 20200531: GET /logGroups/{logGroupId}/logs/{logId}. Log groups live in
  LOG_COMPARTMENT, not in the jobs' COMPARTMENT (a shared logging compartment), and a log
  is in its group's compartment.

Job runs go ACCEPTED -> IN_PROGRESS -> SUCCEEDED | FAILED (CANCELING -> CANCELED on
cancel), node groups CREATING -> ACTIVE -> DELETED | FAILED. The nodes really run, as the
service runs the container: the job's ENTRYPOINT + CMD (cloudddp's: unpack the staged
archive, run the node script and the bootstrap inside it), with the Object Storage mounts
as local folders under `run_root` (filled from, and written back to, the fake bucket),
NODE_RANK, INITIAL_CLUSTER_SIZE and a cluster metadata file that fills in as nodes start,
plus `node_env` (the image's environment). Each node has a TMPDIR of its own under `run_root`
(a container's /tmp is its own), removed once the node has ended or been killed: a launcher killed
with SIGKILL leaves its `cloudddp-launch-*` scratch folder there, in the test's folder, never in the
session's or the system's temp folder (issue 34). Everything the logs show is what the nodes
printed. Cancel sends SIGTERM to each node's main process (as a container stop does), and
SIGKILL to what is left after `kill_grace` seconds.

With `hold_states=True` a run leaves ACCEPTED and IN_PROGRESS only after a GetJobRun has
returned that state once, so a client that polls sees each state whatever the machine's
load (no test depends on polling fast enough). With `late_log_details=True` a run's
logDetails stay empty until it is IN_PROGRESS: ADS's DataScienceJobRun.watch expects the
log id to appear only then (ads/jobs/builders/infrastructure/dsc_job.py @0e785b9f).

The fake writes no lifecycleDetails for a failed or cancelled multi-node run: the
service's wording is not published (ADS's tests show only the single-node one, "Job run
artifact execution failed with exit code 21.", tests/unitary/default_setup/jobs/
test_jobs_run.py @0e785b9f), so no test may lean on text the fake would make up.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jwt  # PyJWT: a dependency of the oci SDK, which reads a token's expiry with it
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from cloudddp.providers.local.provider import free_port  # picking a port checks nothing of cloudddp's

DS = "/20190101"
SEARCH = "/20190909/search"
LOGGING = "/20200531"
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELED", "DELETED")
MAX_ENV_CHARS = 20_000
MAX_COMMAND_BYTES = 2048  # CMD + ENTRYPOINT (oci SDK: OcirContainerJobEnvironmentConfigurationDetails)


# -- throwaway credentials ------------------------------------------------------------------
@dataclass
class ThrowawayKey:
    """An RSA key pair and the ~/.oci/config profile that uses it."""

    private_key: rsa.RSAPrivateKey
    tenancy: str = "ocid1.tenancy.oc1..aaaaaaaatenancyloopback"
    user: str = "ocid1.user.oc1..aaaaaaaauserloopback"
    region: str = "us-ashburn-1"

    @classmethod
    def generate(cls) -> ThrowawayKey:
        return cls(rsa.generate_private_key(public_exponent=65537, key_size=2048))

    @property
    def fingerprint(self) -> str:
        der = self.private_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        digest = hashlib.md5(der, usedforsecurity=False).hexdigest()
        return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))

    @property
    def key_id(self) -> str:
        return f"{self.tenancy}/{self.user}/{self.fingerprint}"

    def write_config(self, folder: Path, profile: str = "DEFAULT", key_name: str = "key.pem") -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        key_path = folder / key_name
        key_path.write_bytes(
            self.private_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
            )
        )
        key_path.chmod(0o600)
        config = folder / "config"
        config.write_text(
            f"[{profile}]\nuser={self.user}\nfingerprint={self.fingerprint}\ntenancy={self.tenancy}\n"
            f"region={self.region}\nkey_file={key_path}\n"
        )
        return config

    def write_session_config(self, folder: Path, token: str, profile: str = "DEFAULT") -> Path:
        """A profile as `oci session authenticate` leaves it: this key as the session key, a token file, no user
        (the fields ADS's SecurityToken needs: ads/common/auth.py @0e785b9f, SECURITY_TOKEN_REQUIRED)."""
        config = self.write_config(folder, profile, key_name="oci_api_key.pem")
        token_file = folder / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        lines = [line for line in config.read_text().splitlines() if not line.startswith("user=")]
        config.write_text("\n".join([*lines, f"security_token_file={token_file}", ""]))
        return config


# -- state ----------------------------------------------------------------------------------
@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any  # parsed JSON, or the byte count of a binary body
    status: int = 0

    @property
    def is_write(self) -> bool:
        return self.method in ("PUT", "POST", "DELETE") and not self.path.startswith(SEARCH)


@dataclass
class StoredObject:
    data: bytes
    metadata: dict[str, str]
    multipart_md5: str | None = None
    created: float = field(default_factory=time.time)
    etag: str = field(default_factory=lambda: uuid.uuid4().hex)  # one per object written, as the service keeps

    @property
    def md5(self) -> str:
        return base64.b64encode(hashlib.md5(self.data, usedforsecurity=False).digest()).decode()

    @property
    def listed_md5(self) -> str:
        return self.multipart_md5 or self.md5


@dataclass
class LogRecord:
    source: str
    message: str
    when: dt.datetime
    visible_at: float
    log_id: str | None  # the Log it was written to (None: the run has no log)
    id: str = field(default_factory=lambda: str(uuid.uuid4()))


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def stamp(when: dt.datetime | None) -> str | None:
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if when else None


def ocid(kind: str) -> str:
    return f"ocid1.{kind}.oc1.iad.{uuid.uuid4().hex}"


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def b64md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()


MAX_OBJECT_NAME = 1024  # characters (Object Storage docs, Object Names)
REFUSED_IN_OBJECT_NAMES = "\n\r\0"


def check_object_name(name: str) -> None:
    """The service's object name rules (see the module's note): 400 InvalidObjectName for a name they refuse."""
    if not name or len(name) > MAX_OBJECT_NAME or any(char in name for char in REFUSED_IN_OBJECT_NAMES):
        raise ApiError(400, "InvalidObjectName", f"Invalid object name: {name}")


class FakeOCI:
    """The fake service. `with FakeOCI(key) as oci_server:` starts it; `.url` is the endpoint."""

    def __init__(
        self,
        key: ThrowawayKey,
        *,
        run_root: Path,
        buckets: tuple[tuple[str, str], ...] = (("ns", "bkt"),),
        step: float = 0.0,
        ingestion_delay: float = 0.3,
        node_env: dict[str, str] | None = None,
        node_start_delay: float = 0.0,
        too_large_above: int | None = None,
        hold_states: bool = False,
        kill_grace: float = 30.0,
        late_log_details: bool = False,
    ) -> None:
        self.key = key
        self.public_key = key.private_key.public_key()
        self.step, self.ingestion_delay = step, ingestion_delay
        self.run_root, self.node_env, self.node_start_delay = run_root, node_env or {}, node_start_delay
        self.too_large_above, self.hold_states, self.kill_grace = too_large_above, hold_states, kill_grace
        self.observed: dict[str, set[str]] = {}  # run id -> states a GetJobRun returned
        self.closed = threading.Event()  # set on exit: no run starts a node after that
        self.lock = threading.RLock()
        self.requests: list[Recorded] = []
        self.signature_failures: list[str] = []
        self.buckets = set(buckets)
        self.objects: dict[tuple[str, str, str], StoredObject] = {}
        self.uploads: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.runs: dict[str, dict[str, Any]] = {}
        self.logs: list[LogRecord] = []
        self.processes: dict[str, list[subprocess.Popen[bytes]]] = {}
        self.search_calls = 0
        self.late_log_details = late_log_details
        self.log_groups: dict[str, str] = {LOG_GROUP: LOG_COMPARTMENT}  # log group -> its compartment
        self.log_resources: dict[str, dict[str, Any]] = {}  # log id -> the Log resource
        self.add_log(LOG_GROUP, LOG)
        self.run_logs: dict[str, dict[str, Any]] = {}  # run id -> its logDetails, set or not yet shown
        self.session_tokens: dict[str, Any] = {}  # security token -> the session's public key
        self.token_secret = uuid.uuid4().hex  # signs the tokens this fake issues
        self.server: ThreadingHTTPServer | None = None

    # -- lifecycle ----------------------------------------------------------------------
    def node_temp(self, run_id: str, rank: int | None = None) -> Path:
        """The nodes' TMPDIRs of a run (each node's with its rank), in the run's folder."""
        folder = self.run_root / run_id / "tmp"
        return folder if rank is None else folder / f"node-{rank}"

    def __enter__(self) -> FakeOCI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def handle_one(self) -> None:
                fake.handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.closed.set()
        for processes in self.processes.values():
            for process in processes:
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
        for run_id, processes in self.processes.items():
            for process in processes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=10)
            shutil.rmtree(self.node_temp(run_id), ignore_errors=True)
        if self.server:
            self.server.shutdown()
            self.server.server_close()

    @property
    def host(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    # -- what tests look at ---------------------------------------------------------------
    def calls(self, method: str | None = None, pattern: str = "") -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if (method is None or r.method == method) and re.search(pattern, r.path)]

    def writes(self) -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.is_write]

    def object_names(self, namespace: str = "ns", bucket: str = "bkt") -> list[str]:
        with self.lock:
            return sorted(n for (ns, b, n) in self.objects if ns == namespace and b == bucket)

    def put_object(self, name: str, data: bytes, namespace: str = "ns", bucket: str = "bkt") -> None:
        with self.lock:
            self.objects[(namespace, bucket, name)] = StoredObject(data, {})

    def add_logs(
        self, source: str, messages: list[str], start: dt.datetime, spacing: dt.timedelta, log_id: str = ""
    ) -> None:
        with self.lock:
            for i, message in enumerate(messages):
                self.logs.append(LogRecord(source, message, start + i * spacing, time.time(), log_id or LOG))

    def add_log(self, log_group_id: str, log_id: str | None = None) -> str:
        """A Log resource in `log_group_id` (in that group's compartment); returns its id."""
        with self.lock:
            log_id = log_id or ocid("log")
            self.log_resources[log_id] = {
                "id": log_id, "tenancyId": self.key.tenancy, "logGroupId": log_group_id, "displayName": log_id[-12:],
                "logType": "CUSTOM", "isEnabled": True, "lifecycleState": "ACTIVE", "timeCreated": stamp(now_utc()),
                "compartmentId": self.log_groups[log_group_id],
            }  # fmt: skip
            return log_id

    def issue_session_token(self, private_key: rsa.RSAPrivateKey, lifetime: float = 3600.0) -> str:
        """A security token (a JWT, as `oci session authenticate` gets one) for the session key `private_key`."""
        issued = int(time.time())
        token = jwt.encode({"sub": self.key.user, "tenant": self.key.tenancy, "iat": issued,
                            "exp": int(issued + lifetime), "jti": uuid.uuid4().hex}, self.token_secret, "HS256")  # fmt: skip
        with self.lock:
            self.session_tokens[token] = private_key.public_key()
        return token

    def wait_for_run(self, run_id: str, timeout: float = 300) -> dict[str, Any]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if self.runs[run_id]["lifecycleState"] in TERMINAL:
                    return dict(self.runs[run_id])
            time.sleep(0.05)
        raise TimeoutError(run_id)

    # -- HTTP -----------------------------------------------------------------------------
    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        split = urlsplit(handler.path)
        path, query = split.path, parse_qs(split.query)
        headers = {k.lower(): v for k, v in handler.headers.items()}
        is_json = headers.get("content-type", "").startswith("application/json") and body
        # Recorded with the object name decoded (the SDK sends "/" in names as %2F).
        try:
            parsed: Any = json.loads(body) if is_json else len(body)
        except ValueError:
            parsed = len(body)
        recorded = Recorded(handler.command, unquote(path), query, headers, parsed)
        with self.lock:
            self.requests.append(recorded)
        try:
            problem = self.check_signature(handler.command, handler.path, headers, body)
            if problem:
                with self.lock:
                    self.signature_failures.append(problem)
                raise ApiError(
                    401,
                    "NotAuthenticated",
                    f"The required information to complete authentication was not provided or was incorrect: {problem}",
                )
            try:
                status, payload, extra = self.route(handler.command, path, query, headers, body)
            except json.JSONDecodeError as exc:
                raise ApiError(400, "InvalidParameter", f"the request body is not valid JSON: {exc}") from None
        except ApiError as exc:
            status, payload, extra = exc.status, {"code": exc.code, "message": exc.message}, {}
        recorded.status = status
        raw = payload if isinstance(payload, bytes) else (json.dumps(payload).encode() if payload is not None else b"")
        handler.send_response(status)
        handler.send_header("opc-request-id", uuid.uuid4().hex)
        if not isinstance(payload, bytes) and payload is not None:
            handler.send_header("content-type", "application/json")
        for name, value in extra.items():
            handler.send_header(name, value)
        handler.send_header("content-length", str(len(raw)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(raw)

    def check_signature(self, method: str, target: str, headers: dict[str, str], body: bytes) -> str | None:
        """The signature check the real services make (draft-cavage-http-signatures-08)."""
        authorization = headers.get("authorization", "")
        if not authorization.startswith("Signature "):
            return "no Signature authorization header"
        fields = dict(re.findall(r'(\w+)="([^"]*)"', authorization))
        if fields.get("version") != "1" or fields.get("algorithm") != "rsa-sha256":
            return f"unexpected version/algorithm {fields.get('version')}/{fields.get('algorithm')}"
        public_key, problem = self.signing_key(fields.get("keyId", ""))
        if problem:
            return problem
        signed = fields.get("headers", "").split()
        required = {"date", "(request-target)", "host"}
        if method in ("POST", "PUT") and not target.startswith("/n/"):
            required |= {"content-length", "content-type", "x-content-sha256"}
        if not required <= set(signed):
            return f"headers {sorted(required - set(signed))} not signed"
        if headers.get("host") != self.host:
            return f"the Host header {headers.get('host')!r} does not name this endpoint ({self.host})"
        lines = []
        for name in signed:
            if name == "(request-target)":
                lines.append(f"(request-target): {method.lower()} {target}")
            elif name not in headers:
                return f"signed header {name!r} missing"
            else:
                lines.append(f"{name}: {headers[name]}")
        try:
            public_key.verify(
                base64.b64decode(fields.get("signature", "")),
                "\n".join(lines).encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except Exception:
            return "signature does not verify"
        body_hash = base64.b64encode(hashlib.sha256(body).digest()).decode()
        if "x-content-sha256" in signed and headers["x-content-sha256"] != body_hash:
            return "x-content-sha256 does not match the body"
        sent = dt.datetime.strptime(headers["date"], "%a, %d %b %Y %H:%M:%S GMT").replace(tzinfo=dt.timezone.utc)
        if abs((now_utc() - sent).total_seconds()) > 300:
            return "date header more than 5 minutes off"
        return None

    def signing_key(self, key_id: str) -> tuple[Any, str | None]:
        """The public key a keyId names: the API key's, or a session's for "ST$<token>" (SecurityTokenSigner)."""
        if key_id == self.key.key_id:
            return self.public_key, None
        if not key_id.startswith("ST$"):
            return None, f"unknown keyId {key_id!r}"
        token = key_id[3:]
        with self.lock:
            public_key = self.session_tokens.get(token)
        if public_key is None:
            return None, "unknown security token"
        try:
            jwt.decode(token, self.token_secret, algorithms=["HS256"])
        except jwt.ExpiredSignatureError:
            return None, "the security token has expired"
        return public_key, None

    def route(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes
    ) -> tuple[int, Any, dict[str, str]]:
        q = {k: v[0] for k, v in query.items()}
        if path.startswith(DS):
            return self.data_science(method, path[len(DS) :], q, json.loads(body) if body else {})
        if path == SEARCH and method == "POST":
            return self.search(q, json.loads(body))
        match = re.fullmatch(rf"{LOGGING}/logGroups/([^/]+)/logs/([^/]+)", path)
        if match and method == "GET":
            return 200, self.get_log(match.group(1), match.group(2)), {"etag": uuid.uuid4().hex}
        match = re.fullmatch(r"/n/([^/]+)/b/([^/]+)/(o|u)(?:/(.+))?", path)
        if match:
            namespace, bucket, kind, name = match.group(1), match.group(2), match.group(3), match.group(4)
            if (namespace, bucket) not in self.buckets:
                raise ApiError(
                    404,
                    "BucketNotFound",
                    f"Either the bucket named '{bucket}' does not exist in the namespace '{namespace}' or you are not authorized to access it",
                )
            name = unquote(name) if name else None
            if kind == "o":
                return self.object_call(method, namespace, bucket, name, q, headers, body)
            return self.multipart_call(method, namespace, bucket, name, q, headers, body)
        raise ApiError(404, "NotFound", f"no route for {method} {path}")

    # -- Data Science ---------------------------------------------------------------------
    def data_science(
        self, method: str, path: str, q: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, Any, dict[str, str]]:
        with self.lock:
            if method == "POST" and path == "/jobs":
                return 200, self.create_job(body), {"etag": uuid.uuid4().hex}
            match = re.fullmatch(r"/jobs/([^/]+)", path)
            if method == "GET" and match:
                job = self.jobs.get(match.group(1))
                if not job:
                    raise ApiError(404, "NotAuthorizedOrNotFound", "job not found")
                if job["lifecycleState"] == "CREATING":
                    job["lifecycleState"] = "ACTIVE"  # the first look after creation finds it ready
                return 200, job, {"etag": uuid.uuid4().hex}
            if method == "POST" and path == "/jobRuns":
                return 200, self.create_run(body), {"etag": uuid.uuid4().hex}
            if method == "GET" and path == "/jobRuns":
                return self.list_runs(q)
            match = re.fullmatch(r"/jobRuns/([^/]+)(/actions/cancelJobRun)?", path)
            if match:
                run = self.runs.get(match.group(1))
                if not run:
                    raise ApiError(404, "NotAuthorizedOrNotFound", f"job run {match.group(1)} not found")
                if method == "GET" and not match.group(2):
                    self.observed.setdefault(run["id"], set()).add(run["lifecycleState"])
                    return 200, run, {"etag": uuid.uuid4().hex}
                if method == "POST" and match.group(2):
                    if run["lifecycleState"] in TERMINAL:
                        raise ApiError(409, "IncorrectState", f"job run is {run['lifecycleState']}")
                    run["lifecycleState"] = "CANCELING"
                    return 202, None, {}
        raise ApiError(404, "NotFound", f"no Data Science route for {method} {path}")

    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        for name in ("compartmentId", "projectId"):
            if not body.get(name):
                raise ApiError(400, "InvalidParameter", f"{name} is required")
        for name in (
            "jobConfigurationDetails",
            "jobInfrastructureConfigurationDetails",
            "jobEnvironmentConfigurationDetails",
        ):
            if body.get(name) is not None:
                raise ApiError(400, "InvalidParameter", f"{name} must be empty for a multi-node job")
        node = body.get("jobNodeConfigurationDetails") or {}
        if node.get("jobNodeType") != "MULTI_NODE":
            raise ApiError(400, "InvalidParameter", "jobNodeConfigurationDetails.jobNodeType must be MULTI_NODE")
        if node.get("startupOrder") not in ("IN_PARALLEL", "IN_ORDER"):
            raise ApiError(400, "InvalidParameter", "startupOrder must be IN_PARALLEL or IN_ORDER")
        network = node.get("jobNetworkConfiguration") or {}
        if network.get("jobNetworkType") not in ("DEFAULT_NETWORK", "CUSTOM_NETWORK"):
            raise ApiError(400, "InvalidParameter", "jobNetworkConfiguration.jobNetworkType is required")
        if network.get("jobNetworkType") == "CUSTOM_NETWORK" and not network.get("subnetId"):
            raise ApiError(400, "InvalidParameter", "subnetId is required for CUSTOM_NETWORK")
        groups = node.get("jobNodeGroupConfigurationDetailsList") or []
        if not groups:
            raise ApiError(400, "InvalidParameter", "at least one node group is required")
        for group in groups:
            infra = group.get("jobInfrastructureConfigurationDetails") or {}
            config = group.get("jobConfigurationDetails") or {}
            environment = group.get("jobEnvironmentConfigurationDetails") or {}
            if not group.get("name") or int(group.get("replicas") or 0) < 1:
                raise ApiError(400, "InvalidParameter", "a node group needs a name and replicas >= 1")
            if infra.get("jobInfrastructureType") != "MULTI_NODE" or not infra.get("shapeName"):
                raise ApiError(400, "InvalidParameter", "jobInfrastructureType MULTI_NODE with a shapeName is required")
            if int(infra.get("blockStorageSizeInGBs") or 0) < 50:
                raise ApiError(400, "InvalidParameter", "blockStorageSizeInGBs must be at least 50")
            if config.get("jobType") != "DEFAULT":
                raise ApiError(400, "InvalidParameter", "jobConfigurationDetails.jobType must be DEFAULT")
            env = config.get("environmentVariables") or {}
            if sum(len(k) + len(v) for k, v in env.items()) > MAX_ENV_CHARS:
                raise ApiError(400, "InvalidParameter", "environment variables exceed 20000 characters")
            if environment.get("jobEnvironmentType") != "OCIR_CONTAINER" or not environment.get("image"):
                raise ApiError(400, "InvalidParameter", "an OCIR_CONTAINER environment with an image is required")
            # The SDK's wording: "The combined size of `CMD` and `ENTRYPOINT` must be less than 2048 bytes."
            # Counted here as the bytes of every string: the most lenient reading (cloudddp's own count is stricter).
            command = [*(environment.get("entrypoint") or []), *(environment.get("cmd") or [])]
            size = sum(len(str(part).encode()) for part in command)
            if size >= MAX_COMMAND_BYTES:
                raise ApiError(400, "InvalidParameter", f"The combined size of cmd and entrypoint ({size} bytes) "
                                                        f"must be less than {MAX_COMMAND_BYTES} bytes")  # fmt: skip
        self.check_log_configuration(body.get("jobLogConfigurationDetails") or {})
        for mount in body.get("jobStorageMountConfigurationDetailsList") or []:
            if mount.get("storageType") != "OBJECT_STORAGE" or not mount.get("destinationDirectoryName"):
                raise ApiError(400, "InvalidParameter", "storage mounts need storageType and destinationDirectoryName")
            if (mount.get("namespace"), mount.get("bucket")) not in self.buckets:
                raise ApiError(400, "InvalidParameter", f"bucket {mount.get('bucket')} not found")
        job = {
            **body,
            "id": ocid("datasciencejob"),
            "timeCreated": stamp(now_utc()),
            "createdBy": self.key.user,
            "lifecycleState": "CREATING",
            "definedTags": body.get("definedTags") or {},
        }
        self.jobs[job["id"]] = job
        return job

    def check_log_configuration(self, logging: dict[str, Any]) -> None:
        """The log group must exist, and a given log must be one of its logs."""
        if not logging.get("enableLogging"):
            return
        group = logging.get("logGroupId")
        if group not in self.log_groups:
            raise ApiError(400, "InvalidParameter", f"log group {group} not found")
        log_id = logging.get("logId")
        if log_id and (self.log_resources.get(log_id) or {}).get("logGroupId") != group:
            raise ApiError(400, "InvalidParameter", f"log {log_id} not found in log group {group}")

    def get_log(self, log_group_id: str, log_id: str) -> dict[str, Any]:
        with self.lock:
            log = self.log_resources.get(log_id)
            if not log or log["logGroupId"] != log_group_id:
                raise ApiError(404, "NotAuthorizedOrNotFound", f"log {log_id} not found in log group {log_group_id}")
            return dict(log)

    def create_run(self, body: dict[str, Any]) -> dict[str, Any]:
        job = self.jobs.get(body.get("jobId", ""))
        if not job:
            raise ApiError(404, "NotAuthorizedOrNotFound", f"job {body.get('jobId')} not found")
        if job["lifecycleState"] != "ACTIVE":
            raise ApiError(409, "IncorrectState", f"job is {job['lifecycleState']}")
        for name in ("compartmentId", "projectId"):
            if not body.get(name):
                raise ApiError(400, "InvalidParameter", f"{name} is required")
        logging = job.get("jobLogConfigurationDetails") or {}
        log_details = None
        if logging.get("enableLogging"):
            log_id = logging.get("logId") or (
                self.add_log(logging["logGroupId"]) if logging.get("enableAutoLogCreation") else None
            )
            log_details = {"logGroupId": logging.get("logGroupId"), "logId": log_id}
        groups = job["jobNodeConfigurationDetails"]["jobNodeGroupConfigurationDetailsList"]
        run = {
            **body,
            "id": ocid("datasciencejobrun"),
            "timeAccepted": stamp(now_utc()),
            "timeStarted": None,
            "timeFinished": None,
            "createdBy": self.key.user,
            "lifecycleState": "ACCEPTED",
            "lifecycleDetails": None,
            "logDetails": None if self.late_log_details else log_details,
            "nodeGroupDetailsList": [
                {"name": g["name"], "lifecycleState": "CREATING", "lifecycleDetails": None} for g in groups
            ],
            "definedTags": body.get("definedTags") or {},
        }
        self.runs[run["id"]] = run
        if log_details:
            self.run_logs[run["id"]] = log_details
        threading.Thread(target=self.drive, args=(run["id"],), daemon=True).start()
        return run

    def list_runs(self, q: dict[str, str]) -> tuple[int, list[dict[str, Any]], dict[str, str]]:
        """One page of ListJobRuns: `limit` 1-100 (oci 2.189.0 DataScienceClient.list_job_runs docstring: "1 is
        the minimum, 100 is the maximum"), the next page's token in opc-next-page while more remain."""
        if not q.get("compartmentId"):
            raise ApiError(400, "MissingParameter", "compartmentId is required")
        limit = int(q.get("limit", 100))
        if not 1 <= limit <= 100:
            raise ApiError(400, "InvalidParameter", "limit must be between 1 and 100")
        runs = [r for r in self.runs.values() if r["compartmentId"] == q["compartmentId"]]
        if q.get("jobId"):
            runs = [r for r in runs if r["jobId"] == q["jobId"]]
        if q.get("lifecycleState"):
            runs = [r for r in runs if r["lifecycleState"] == q["lifecycleState"]]
        if q.get("displayName"):  # the whole name ("Filter results by its user-friendly name", as jobId and state)
            runs = [r for r in runs if r.get("displayName") == q["displayName"]]
        runs.sort(key=lambda r: r["timeAccepted"], reverse=q.get("sortOrder", "DESC") == "DESC")
        keys = (
            "id",
            "timeAccepted",
            "timeStarted",
            "timeFinished",
            "createdBy",
            "projectId",
            "compartmentId",
            "jobId",
            "displayName",
            "lifecycleState",
            "lifecycleDetails",
            "freeformTags",
            "definedTags",
        )
        offset = int(q.get("page", "0"))
        more = {"opc-next-page": str(offset + limit)} if offset + limit < len(runs) else {}
        return 200, [{k: r.get(k) for k in keys} for r in runs[offset : offset + limit]], more

    # -- running a job run ----------------------------------------------------------------
    def set_run(self, run_id: str, **changes: Any) -> dict[str, Any]:
        with self.lock:
            self.runs[run_id].update(changes)
            return self.runs[run_id]

    def set_groups(self, run_id: str, state: str, details: str | None = None) -> None:
        with self.lock:
            for group in self.runs[run_id]["nodeGroupDetailsList"]:
                group.update(lifecycleState=state, lifecycleDetails=details)

    def log(self, run_id: str, message: str) -> None:
        with self.lock:
            log_id = (self.run_logs.get(run_id) or {}).get("logId")
            self.logs.append(LogRecord(run_id, message, now_utc(), time.time() + self.ingestion_delay, log_id))

    def canceled(self, run_id: str) -> bool:
        with self.lock:
            return self.runs[run_id]["lifecycleState"] == "CANCELING"

    def wait_observed(self, run_id: str, state: str, limit: float = 60.0) -> None:
        """With hold_states, keep `state` until a GetJobRun returned it (or `limit` s, if no one polls)."""
        deadline = time.monotonic() + limit
        while (
            self.hold_states and time.monotonic() < deadline and not self.canceled(run_id) and not self.closed.is_set()
        ):
            with self.lock:
                if state in self.observed.get(run_id, set()):
                    return
            time.sleep(0.02)

    def drive(self, run_id: str) -> None:
        self.wait_observed(run_id, "ACCEPTED")
        time.sleep(self.step)
        with self.lock:
            run = self.runs[run_id]
            job = self.jobs[run["jobId"]]
        group = job["jobNodeConfigurationDetails"]["jobNodeGroupConfigurationDetailsList"][0]
        replicas = int(group["replicas"])
        if self.canceled(run_id):
            self.set_run(run_id, lifecycleState="CANCELED", timeFinished=stamp(now_utc()))
            return
        if self.closed.is_set():
            return
        self.set_groups(run_id, "ACTIVE")
        self.set_run(run_id, lifecycleState="IN_PROGRESS", timeStarted=stamp(now_utc()),
                     logDetails=self.run_logs.get(run_id))  # fmt: skip
        codes = self.execute(run_id, job, group, replicas)
        self.wait_observed(run_id, "IN_PROGRESS")
        if self.canceled(run_id) or codes is None:
            self.set_groups(run_id, "DELETED")
            self.set_run(run_id, lifecycleState="CANCELED", timeFinished=stamp(now_utc()))
            return
        failed = [(rank, code) for rank, code in enumerate(codes) if code != 0]
        if len(codes) - len(failed) >= int(group.get("minimumSuccessReplicas") or replicas):
            self.set_groups(run_id, "DELETED")
            self.set_run(run_id, lifecycleState="SUCCEEDED", timeFinished=stamp(now_utc()))
        else:  # no lifecycleDetails: the service's wording for multi-node runs is not published (see above)
            self.set_groups(run_id, "FAILED")
            self.set_run(run_id, lifecycleState="FAILED", timeFinished=stamp(now_utc()))

    @staticmethod
    def mounts(job: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        found = []
        for mount in job.get("jobStorageMountConfigurationDetailsList") or []:
            base = mount.get("destinationPath") or "/mnt"
            found.append((f"{base.rstrip('/')}/{mount['destinationDirectoryName']}", mount))
        return found

    def container_path_to_object(
        self, job: dict[str, Any], group: dict[str, Any], variable: str
    ) -> tuple[str, str, str] | None:
        value = (group["jobConfigurationDetails"].get("environmentVariables") or {}).get(variable)
        for path, mount in self.mounts(job):
            if value and (value == path or value.startswith(path + "/")):
                rest = value[len(path) :].strip("/")
                prefix = "/".join(p for p in ((mount.get("prefix") or "").strip("/"), rest) if p)
                return mount["namespace"], mount["bucket"], prefix
        return None

    def execute(self, run_id: str, job: dict[str, Any], group: dict[str, Any], replicas: int) -> list[int] | None:
        """Run every node as the service runs the container, with the mounts as local folders."""
        root = self.run_root / run_id
        translate: list[tuple[str, Path]] = []
        for path, mount in self.mounts(job):
            local = root / "mounts" / mount["destinationDirectoryName"]
            local.mkdir(parents=True, exist_ok=True)
            prefix = mount.get("prefix") or ""
            with self.lock:
                chosen = [(n, o.data) for (ns, b, n), o in self.objects.items()
                          if ns == mount["namespace"] and b == mount["bucket"] and n.startswith(prefix)]  # fmt: skip
            for name, data in chosen:
                target = local / name[len(prefix) :].lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            translate.append((path, local))

        def local_path(value: str) -> str:
            for path, local in translate:
                if value == path or value.startswith(path + "/"):
                    return str(local) + value[len(path) :]
            return value

        config = group["jobConfigurationDetails"]
        container = group["jobEnvironmentConfigurationDetails"]
        argv = [local_path(a) for a in [*(container.get("entrypoint") or []), *(container.get("cmd") or [])]]
        metadata = root / "cluster_nodes_metadata.json"
        metadata.write_text("[]")
        processes: list[subprocess.Popen[bytes]] = []
        self.processes[run_id] = processes  # __exit__ kills what has started
        readers = []
        # Each node is a host of its own on the service, all rendezvousing on OCI's port 29400; here they share
        # 127.0.0.1, so each run gets a free port (and its neighbour, the fail-fast channel), as two runs' hosts
        # would not collide. The job's own MASTER_PORT, set below, still wins.
        port = str(free_port())
        for rank in range(replicas):
            if self.closed.is_set():
                break
            temp = self.node_temp(run_id, rank)
            temp.mkdir(parents=True, exist_ok=True)
            env = {
                **self.node_env,
                "TMPDIR": str(temp), "MASTER_PORT": port,
                **{k: local_path(v) for k, v in (config.get("environmentVariables") or {}).items()},
                "NODE_RANK": str(rank), "INITIAL_CLUSTER_SIZE": str(replicas),
                "CLUSTER_NODES_METADATA_FILE": str(metadata), "NODE_GROUP_NAME": group["name"],
                "JOB_OCID": job["id"], "JOB_RUN_OCID": run_id, "NCCL_SOCKET_IFNAME": "lo", "GLOO_SOCKET_IFNAME": "lo",
                "CLOUDDDP_NODE_ROOT": str(root / f"node-{rank}"),
            }  # fmt: skip
            process = subprocess.Popen(
                argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
            )
            processes.append(process)
            thread = threading.Thread(target=self.pump, args=(run_id, process), daemon=True)
            thread.start()
            readers.append(thread)
            # The service lists a node once it is up: rank by rank, `node_start_delay` apart.
            entries = json.loads(metadata.read_text())
            entries.append({"Rank": rank, "IPAddress": "127.0.0.1"})
            metadata.write_text(json.dumps(entries))
            if rank < replicas - 1:
                time.sleep(self.node_start_delay)
        signalled: float | None = None
        while any(p.poll() is None for p in processes):
            if self.canceled(run_id) and signalled is None:
                for p in processes:  # a container stop: SIGTERM to the main process only
                    if p.poll() is None:
                        os.kill(p.pid, signal.SIGTERM)
                signalled = time.monotonic()
            if signalled is not None and time.monotonic() - signalled > self.kill_grace:
                for p in processes:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
            time.sleep(0.05)
        for thread in readers:
            thread.join(timeout=10)
        shutil.rmtree(self.node_temp(run_id), ignore_errors=True)
        self.write_back(translate, job)
        return None if signalled is not None else [p.returncode for p in processes]

    def pump(self, run_id: str, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            self.log(run_id, raw.decode(errors="replace").rstrip("\n"))

    def write_back(self, translate: list[tuple[str, Path]], job: dict[str, Any]) -> None:
        """What the nodes wrote into a mount ends up in the bucket."""
        mounts = dict(self.mounts(job))
        for path, local in translate:
            mount = mounts[path]
            prefix = mount.get("prefix") or ""
            for file in sorted(local.rglob("*")):
                if not file.is_file():
                    continue
                name = prefix + file.relative_to(local).as_posix()
                key = (mount["namespace"], mount["bucket"], name)
                data = file.read_bytes()
                with self.lock:
                    if key not in self.objects or self.objects[key].data != data:
                        self.objects[key] = StoredObject(data, {})

    # -- Logging Search -------------------------------------------------------------------
    def search(self, q: dict[str, str], body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        query = body.get("searchQuery") or ""
        # The query language's keywords are case-insensitive: cloudddp writes them lower case, ADS upper case.
        stream = re.match(r'search "([^"/]+)/([^"/]+)/([^"/]+)"', query, re.IGNORECASE)
        source = re.search(r"where source = '\*?([^']+)'", query, re.IGNORECASE)
        if not stream or not source or not body.get("timeStart") or not body.get("timeEnd"):
            raise ApiError(400, "InvalidParameter", f"unsupported search {query!r}")
        compartment, group, log_id = stream.groups()
        with self.lock:
            log = self.log_resources.get(log_id)
        if not log or log["logGroupId"] != group:
            raise ApiError(404, "NotAuthorizedOrNotFound", f"log {log_id} not found in log group {group}")
        if compartment != log["compartmentId"]:
            # The service's answer to a wrong compartment is not documented: refused loudly, never an empty result.
            raise ApiError(400, "InvalidParameter", f"the log {log_id} is not in compartment {compartment}")
        start, end = parse_time(body["timeStart"]), parse_time(body["timeEnd"])
        if end <= start:
            raise ApiError(400, "InvalidParameter", "timeEnd must be after timeStart")
        limit = int(q.get("limit", 100))
        if limit > 1000:
            raise ApiError(400, "InvalidParameter", "limit must be at most 1000")
        with self.lock:
            self.search_calls += 1
            now = time.time()
            found = [
                r
                for r in self.logs
                if r.log_id == log_id and r.source == source.group(1) and r.visible_at <= now and start <= r.when < end
            ]
        found.sort(key=lambda r: r.when)  # stable: records of the same instant keep their order
        if self.too_large_above is not None and len(found) > self.too_large_above:
            raise ApiError(400, "InvalidParameter", "The search result is too large; narrow the time range")
        offset = int(q.get("page", "0"))
        page = found[offset : offset + limit]
        results = [
            {"data": {
                "datetime": int(r.when.timestamp() * 1000),
                "logContent": {
                    "data": {"message": r.message}, "id": r.id, "source": r.source, "specversion": "1.0",
                    "subject": "", "time": stamp(r.when), "type": "com.oraclecloud.datascience.jobrun.stdout",
                    "oracle": {"compartmentid": stream.group(1), "loggroupid": stream.group(2), "logid": stream.group(3),
                               "tenantid": self.key.tenancy},
                },
            }}
            for r in page
        ]  # fmt: skip
        extra = {"opc-next-page": str(offset + limit)} if offset + limit < len(found) else {}
        return 200, {"results": results, "summary": {"resultCount": len(results), "fieldCount": 0}}, extra

    # -- Object Storage -------------------------------------------------------------------
    def object_call(self, method: str, namespace: str, bucket: str, name: str | None, q: dict[str, str],
                    headers: dict[str, str], body: bytes) -> tuple[int, Any, dict[str, str]]:  # fmt: skip
        with self.lock:
            if name is None:
                if method != "GET":
                    raise ApiError(405, "MethodNotAllowed", method)
                return 200, self.list_objects(namespace, bucket, q), {}
            key = (namespace, bucket, name)
            if method == "PUT":
                if "content-md5" in headers and headers["content-md5"] != b64md5(body):
                    raise ApiError(400, "InvalidContentMd5", "The computed MD5 does not match the Content-MD5 header")
                check_object_name(name)
                metadata = {k: v for k, v in headers.items() if k.startswith("opc-meta-")}
                written = self.objects[key] = StoredObject(body, metadata)
                return 200, None, {"opc-content-md5": b64md5(body), "etag": written.etag}
            stored = self.objects.get(key)
            if method == "DELETE":
                if stored is None:
                    raise ApiError(404, "ObjectNotFound", f"The object '{name}' was not found in the bucket '{bucket}'")
                if "if-match" in headers and headers["if-match"] != stored.etag:
                    raise ApiError(412, "NoEtagMatch", "The ETag specified in the request does not match the ETag "
                                   "for the resource")  # fmt: skip
                del self.objects[key]
                return 204, None, {}
            if stored is None:
                raise ApiError(404, "ObjectNotFound", f"The object '{name}' was not found in the bucket '{bucket}'")
            extra = {"etag": stored.etag, **stored.metadata}
            extra["opc-multipart-md5" if stored.multipart_md5 else "content-md5"] = stored.listed_md5
            if method == "HEAD":
                extra["content-length-hint"] = str(len(stored.data))
                return 200, None, extra
            if method == "GET":
                return 200, stored.data, {**extra, "content-type": "application/octet-stream"}
        raise ApiError(405, "MethodNotAllowed", method)

    def list_objects(self, namespace: str, bucket: str, q: dict[str, str]) -> dict[str, Any]:
        prefix, start = q.get("prefix", ""), q.get("start", "")
        limit = min(int(q.get("limit", 1000)), 1000)
        fields = set((q.get("fields") or "name").split(","))
        names = sorted(
            n for (ns, b, n) in self.objects if ns == namespace and b == bucket and n.startswith(prefix) and n >= start
        )
        page, rest = names[:limit], names[limit:]
        objects = []
        for name in page:
            stored = self.objects[(namespace, bucket, name)]
            item: dict[str, Any] = {"name": name}
            if "size" in fields:
                item["size"] = len(stored.data)
            if "md5" in fields:
                item["md5"] = stored.listed_md5
            objects.append(item)
        result: dict[str, Any] = {"objects": objects, "prefixes": []}
        if rest:
            result["nextStartWith"] = rest[0]
        return result

    def multipart_call(self, method: str, namespace: str, bucket: str, name: str | None, q: dict[str, str],
                       headers: dict[str, str], body: bytes) -> tuple[int, Any, dict[str, str]]:  # fmt: skip
        with self.lock:
            if method == "POST" and name is None:
                details = json.loads(body)
                check_object_name(details["object"])
                upload_id = uuid.uuid4().hex
                self.uploads[upload_id] = {"namespace": namespace, "bucket": bucket, "object": details["object"],
                                           "metadata": details.get("metadata") or {}, "parts": {}}  # fmt: skip
                return 200, {"namespace": namespace, "bucket": bucket, "object": details["object"], "uploadId": upload_id,
                             "timeCreated": stamp(now_utc())}, {}  # fmt: skip
            upload = self.uploads.get(q.get("uploadId", ""))
            if upload is None or upload["object"] != name:
                raise ApiError(404, "NoSuchUpload", "The upload does not exist")
            if method == "PUT":
                if "content-md5" in headers and headers["content-md5"] != b64md5(body):
                    raise ApiError(400, "InvalidContentMd5", "The computed MD5 does not match the Content-MD5 header")
                etag = uuid.uuid4().hex
                upload["parts"][int(q["uploadPartNum"])] = (etag, body)
                return 200, None, {"etag": etag, "opc-content-md5": b64md5(body)}
            if method == "POST":
                details = json.loads(body)
                chosen = sorted(details.get("partsToCommit") or [], key=lambda p: p["partNum"])
                data, digests = b"", b""
                for part in chosen:
                    etag, chunk = upload["parts"][part["partNum"]]
                    if etag != part["etag"]:
                        raise ApiError(400, "InvalidParameter", f"etag mismatch for part {part['partNum']}")
                    data += chunk
                    digests += hashlib.md5(chunk, usedforsecurity=False).digest()
                multipart = (
                    f"{base64.b64encode(hashlib.md5(digests, usedforsecurity=False).digest()).decode()}-{len(chosen)}"
                )
                stored = self.objects[(namespace, bucket, upload["object"])] = StoredObject(  # == name, checked above
                    data, dict(upload["metadata"]), multipart
                )
                del self.uploads[q["uploadId"]]
                return 200, None, {"opc-multipart-md5": multipart, "etag": stored.etag}
            if method == "DELETE":
                del self.uploads[q["uploadId"]]
                return 204, None, {}
        raise ApiError(405, "MethodNotAllowed", method)


# -- helpers the OCI tests, the benchmark and the notebook test share -----------------------
COMPARTMENT = "ocid1.compartment.oc1..aaaaaaaacompartmentloopback"
PROJECT = "ocid1.datascienceproject.oc1.iad.aaaaaaaaprojectloopback"
# The log group is in a logging compartment of its own, so a search scoped to the jobs' compartment fails.
LOG_COMPARTMENT = "ocid1.compartment.oc1..aaaaaaaaloggingloopback"
LOG_GROUP = "ocid1.loggroup.oc1.iad.aaaaaaaaloggrouploopback"
LOG = "ocid1.log.oc1.iad.aaaaaaaalogloopback"  # a log of LOG_GROUP that exists from the start
IMAGE = "iad.ocir.io/ns/cloudddp-train:1"
# The jobs the fake runs: quick scripts, and the image's environment (this venv's python; the launcher runs the
# script without torchrun).
QUICK_SOURCES = Path(__file__).resolve().parents[1] / "providers" / "oci" / "quick_sources"
IMAGE_ENV = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "TORCHELASTIC_RUN_ID": "oci-fake"}
WORK_DIR = "oci://bkt@ns/cloudddp"


def oci_settings(**overrides: Any) -> dict[str, Any]:
    """An `oci:` spec section that passes validation and points at the fake bucket."""
    return {"compartment_id": COMPARTMENT, "project_id": PROJECT, "image": IMAGE, "work_dir": WORK_DIR,
            "log_group_id": LOG_GROUP, **overrides}  # fmt: skip
