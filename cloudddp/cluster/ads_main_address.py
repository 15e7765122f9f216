"""The main job run's address in an ADS multi-run job, read from its log through OCI Logging as ADS's runner does.

oracle/accelerated-data-science @0e785b9fd36fb354019e0924b94ac2b0ec6f235a, `ads/jobs/templates/driver_pytorch.py`:
the main run (no MAIN_JOB_RUN_OCID) prints "Distributed Training HOST IP: <ip>" (LOG_PREFIX_HOST_IP); every other
run loads the main run (DataScienceJobRun.from_ocid) and, in Runner.wait_for_log, reads its log, keeps the messages
that start with that prefix and takes the first one's rest, stripped. It checks, and if nothing is there yet and
more than `timeout` (15 min) has passed since it began, fails; else sleeps 60 s and checks again.

The log is read as DataScienceJobRun.logs reads it (`ads/common/oci_logging.py` OCILog.tail, search,
_search_logs): from the run's timeAccepted to now, the query `SEARCH "<the log's compartment>/<log group>/<log>" |
WHERE source = '*<run OCID>' | SORT BY datetime DESC` (the compartment from GetLog), at most 1000 results a call,
a window that comes back full or "too large" split in half down to 1 ms, windows at most 14 days long.

Authentication is ADS's inside a job run (`ads/jobs/templates/driver_utils.py` OCIHelper.init_oci_client):
resource principals where OCI_RESOURCE_PRINCIPAL_VERSION is set and OCI_IAM_TYPE is not "api_key", else the API key
of the config file OCI_CONFIG_LOCATION (default ~/.oci/config), profile OCI_CONFIG_PROFILE (default DEFAULT).
CLOUDDDP_OCI_SERVICE_ENDPOINT, only when set, sends every call to that endpoint (the client side's variable of the
same name; tests point it at the OCI loopback service).

The `oci` SDK is imported here, lazily: the job side is otherwise standard library only, and an image without the
SDK gets a clear refusal from the caller instead.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Mapping
from typing import Any

HOST_IP_PREFIX = "Distributed Training HOST IP: "  # driver_pytorch.py LOG_PREFIX_HOST_IP
TIMEOUT = 15 * 60.0  # Runner.wait_for_host_ip_address's default
POLL = 60.0  # Runner.wait_for_log's sleep between checks
LIMIT = 1000  # OCILog._search_logs: LIMIT_PER_REQUEST
RESOLUTION = dt.timedelta(milliseconds=1)  # RFC 3339 times of the Logging Search API
MAX_WINDOW = dt.timedelta(days=14)  # the API refuses windows that start earlier
ENDPOINT_VARIABLE = "CLOUDDDP_OCI_SERVICE_ENDPOINT"


class NotFound(Exception):
    """The main run's address could not be read from its log; the message says what was tried."""


def announce(address: str) -> None:
    """The main run's line, as ADS's host prints it; on stderr, which the job run's log holds as it holds stdout,
    so that `cloudddp-launch --dry-run` keeps its JSON on stdout."""
    print(f"{HOST_IP_PREFIX}{address}", file=sys.stderr, flush=True)


def search_query(compartment_id: str, log_group_id: str, log_id: str, run_id: str) -> str:
    return f"SEARCH \"{compartment_id}/{log_group_id}/{log_id}\" | WHERE source = '*{run_id}' | SORT BY datetime DESC"


def clients(environ: Mapping[str, str]) -> tuple[Any, Any, Any]:
    """Data Science, Logging Management and Logging Search clients, authenticated as ADS does in a job run."""
    try:
        import oci
    except ImportError:
        raise NotFound(f"the oci SDK is not importable in {sys.executable}") from None
    kwargs: dict[str, Any]
    if environ.get("OCI_IAM_TYPE", "").lower() == "api_key" or "OCI_RESOURCE_PRINCIPAL_VERSION" not in environ:
        location = environ.get("OCI_CONFIG_LOCATION", oci.config.DEFAULT_LOCATION)
        kwargs = {"config": oci.config.from_file(location, environ.get("OCI_CONFIG_PROFILE", "DEFAULT"))}
    else:
        kwargs = {"config": {}, "signer": oci.auth.signers.get_resource_principals_signer()}
    if environ.get(ENDPOINT_VARIABLE):
        kwargs["service_endpoint"] = environ[ENDPOINT_VARIABLE]
    return (
        oci.data_science.DataScienceClient(**kwargs),
        oci.logging.LoggingManagementClient(**kwargs),
        oci.loggingsearch.LogSearchClient(**kwargs),
    )


def messages(search: Any, query: str, start: dt.datetime, end: dt.datetime) -> list[tuple[dt.datetime, str]]:
    """(time, message) of every record in [start, end), splitting windows the service cannot answer whole."""
    import oci

    start = max(start, end - MAX_WINDOW)
    if end - start < RESOLUTION:
        return []
    details = oci.loggingsearch.models.SearchLogsDetails(time_start=start, time_end=end, search_query=query)
    try:
        results = search.search_logs(details, limit=LIMIT).data.results or []
        full = len(results) >= LIMIT
    except oci.exceptions.ServiceError as exc:
        if exc.status != 400 or "too large" not in str(exc.message).lower():
            raise
        results, full = [], True
    middle = start + (end - start) / 2
    if full and middle - start >= RESOLUTION:
        return messages(search, query, start, middle) + messages(search, query, middle, end)
    found = []
    for result in results:
        content = (result.data or {}).get("logContent") or {}
        when = dt.datetime.fromisoformat(str(content.get("time") or start.isoformat()).replace("Z", "+00:00"))
        found.append((when, str((content.get("data") or {}).get("message") or "")))
    return found


def find(
    main_run_id: str,
    environ: Mapping[str, str],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    timeout: float = TIMEOUT,
    poll: float = POLL,
) -> str:
    """The address the main run logged, waiting as ADS's Runner.wait_for_log waits. Raises NotFound."""
    try:
        data_science, logging, search = clients(environ)
        run = data_science.get_job_run(main_run_id).data
        details = run.log_details
        if not details or not details.log_id:
            raise NotFound(f"the main job run {main_run_id} has no log (its job was created without logging)")
        compartment = logging.get_log(details.log_group_id, details.log_id).data.compartment_id
        query = search_query(compartment, details.log_group_id, details.log_id, main_run_id)
        began, waited = clock(), False
        while True:
            found = []
            if run.time_accepted:  # DataScienceJobRun.logs: no search before the run was accepted
                found = messages(search, query, run.time_accepted, dt.datetime.now(dt.timezone.utc))
            ordered = sorted(found, key=lambda record: record[0])  # OCILog.tail: oldest first; ADS takes the first
            lines = [m[len(HOST_IP_PREFIX) :].strip() for _, m in ordered if m.startswith(HOST_IP_PREFIX)]
            if lines:
                return lines[0]
            if clock() - began > timeout:
                raise NotFound(f"no line starting {HOST_IP_PREFIX!r} in its log after {timeout:g} s")
            if not waited:  # once: a run waiting minutes for the main one says why in its log
                waited = True
                print(f"cloudddp: oci: MASTER_ADDR is not set; waiting up to {timeout:g} s for the main job run's "
                      f"address in its log (OCI Logging), as ADS's runner waits", file=sys.stderr, flush=True)  # fmt: skip
            sleep(poll)
    except NotFound:
        raise
    except Exception as exc:  # the SDK's config, auth and service errors: named, never a traceback
        raise NotFound(f"{type(exc).__name__}: {str(exc).strip()[:300]}") from None
