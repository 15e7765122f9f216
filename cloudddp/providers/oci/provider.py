"""`--provider oci`: OCI Data Science native multi-node jobs through the `oci` SDK.

`render` builds CreateJobDetails/CreateJobRunDetails (request.py) and touches nothing:
no credentials, no client, no upload. `submit` loads credentials first (so a bad config
fails before anything is uploaded), uploads the source archive and stages local inputs to
the work dir with the staging engine (staging/engine.py: each input is published as a
version `inputs/<channel>/v-<content hash>/`, which the job reads; nothing is deleted),
then calls `create_job` once and `create_job_run` once.
`status`, `logs`, `cancel` take a job run OCID (a job OCID means its newest run;
"latest" means the newest cloudddp run in the compartment).

The service endpoint can be pointed elsewhere (a private endpoint, or the tests'
loopback server) with `service_endpoint=` or CLOUDDDP_OCI_SERVICE_ENDPOINT. Every call is
bounded in time (network.py: `timeout=` or CLOUDDDP_OCI_TIMEOUT), and a network failure in
submit, status, logs, cancel or fetch_artifacts ends as one CloudDDPError naming the
endpoint and region.
"""

from __future__ import annotations

import copy
import datetime as dt
import math
import os
import re
import tempfile
import time
import typing
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import oci

from cloudddp.errors import CloudDDPError
from cloudddp.providers.base import JobEvent, JobHandle, JobRequest, JobStatus, Provider
from cloudddp.providers.oci import OCISettings, auth, logs, network, node, request, validation
from cloudddp.staging.archive import pack_source
from cloudddp.staging.engine import copy_folder, counted, stage
from cloudddp.staging.location import Location
from cloudddp.staging.oci_object_store import PART_SIZE, OCIObjectStore
from cloudddp.terminal import emit

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

ENDPOINT_VARIABLE = "CLOUDDDP_OCI_SERVICE_ENDPOINT"
# The OCI CLI's variables, honoured where the spec leaves a setting at its default.
CLI_VARIABLES = {"profile": "OCI_CLI_PROFILE", "config_file": "OCI_CLI_CONFIG_FILE", "auth": "OCI_CLI_AUTH",
                 "region": "OCI_CLI_REGION"}  # fmt: skip
JOB_STATE_OF_LIFECYCLE_STATE = {
    "ACCEPTED": "PENDING",
    "IN_PROGRESS": "RUNNING",
    "NEEDS_ATTENTION": "RUNNING",
    "CANCELING": "STOPPING",
    "SUCCEEDED": "SUCCEEDED",
    "FAILED": "FAILED",
    "CANCELED": "STOPPED",
    "DELETED": "STOPPED",
}
FINISHED_LIFECYCLE_STATES = ("SUCCEEDED", "FAILED", "CANCELED", "DELETED")
STOPPED_LIFECYCLE_STATES = ("CANCELED", "DELETED")
# A stopped job whose nodes left no code of their own: SIGTERM's, as the local emulation reports
# (providers/local/runner.py `finish`: `exit_code or 143`).
STOPPED_EXIT_CODE = 143
AUTH_KINDS = typing.get_args(OCISettings.model_fields["auth"].annotation)  # the job spec's oci.auth values
DEFAULT_POLL = 3.0  # seconds between get_job_run/search_logs calls while following (ADS uses 3)


@dataclass
class OCIRequest:
    """The typed request: the SDK model objects `submit` sends (create_job, then create_job_run with its id)."""

    parts: request.Parts

    def to_document(self) -> dict[str, Any]:
        return {
            "create_job": oci.util.to_dict(self.parts.create_job),
            "create_job_run": oci.util.to_dict(self.parts.create_job_run),
        }


@dataclass
class OCIStaging:
    """What `submit` uploads first (`parts.uploads`, typed), printed as the dry run's `before_submit`."""

    parts: request.Parts

    def to_document(self) -> dict[str, Any]:
        return request.describe_plan(self.parts)


@dataclass
class OCIJobRequest(JobRequest[OCIRequest]):
    @property
    def parts(self) -> request.Parts:
        return self.request.parts


class Clients:
    """One configuration's SDK clients, each built when first used: building one costs ~40 ms (measured for
    each of the three), and `cloudddp stage oci://` uses Object Storage alone, `status` and `cancel` Data
    Science alone."""

    def __init__(self, credentials: auth.Credentials, kwargs: dict[str, Any]) -> None:
        self.credentials = credentials
        self._kwargs = kwargs

    @cached_property
    def data_science(self) -> Any:
        return oci.data_science.DataScienceClient(**self._kwargs)

    @cached_property
    def object_storage(self) -> Any:
        return oci.object_storage.ObjectStorageClient(**self._kwargs)

    @cached_property
    def log_search(self) -> Any:
        return oci.loggingsearch.LogSearchClient(**self._kwargs)

    @cached_property
    def logging(self) -> Any:
        return oci.logging.LoggingManagementClient(**self._kwargs)

    def endpoint(self) -> str | None:
        """The endpoint of a client built so far (Data Science first), for network errors that name no URL."""
        for name in ("data_science", "object_storage", "log_search", "logging"):
            if name in self.__dict__:  # built: cached_property keeps it there
                return self.__dict__[name].base_client.endpoint
        return None


def effective_settings(settings: OCISettings, environ: Mapping[str, str]) -> OCISettings:
    """Settings the spec left at their defaults, taken from the OCI CLI's variables if set."""
    updates = {
        name: environ[variable]
        for name, variable in CLI_VARIABLES.items()
        if name not in settings.model_fields_set and environ.get(variable)
    }
    if "auth" in updates and updates["auth"] not in AUTH_KINDS:
        raise CloudDDPError(f"OCI_CLI_AUTH={updates['auth']!r}: cloudddp supports {', '.join(AUTH_KINDS[:-1])} "
                            f"or {AUTH_KINDS[-1]}.")  # fmt: skip
    return settings.model_copy(update=updates) if updates else settings


def check_service_endpoint(endpoint: str, named: str) -> None:
    """What the oci SDK checks when a request is made (oci 2.189.0, base_client.py
    _validate_endpoint_host_components), checked offline: otherwise a ValueError in the middle of submit."""
    try:
        parsed = urlparse(endpoint)  # raises ValueError for an unbalanced or invalid [IPv6] host
        parsed.port  # noqa: B018 - raises ValueError for a port that is no number in 0-65535
    except ValueError:
        parsed = urlparse("")  # no scheme, no host: the message below
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise CloudDDPError(f"{named}={endpoint!r} is not a usable endpoint URL: it needs http:// or https:// and a host, "
                            f"like https://datascience.us-ashburn-1.oci.oraclecloud.com or http://127.0.0.1:8080.")  # fmt: skip
    if parsed.username is not None or parsed.password is not None:
        raise CloudDDPError(f"{named}={endpoint!r}: the oci SDK refuses user info in an endpoint; remove it.")


def service_error(exc: oci.exceptions.ServiceError, call: str, more: str = "") -> CloudDDPError:
    hint = ""
    if exc.status in (401, 403):
        hint = " Check the credentials (profile, key) and that your policies allow managing data-science-family."
    elif exc.status == 404:
        hint = " The OCID may be wrong, in another region, or not visible to you."
    message = str(exc.message or "").rstrip(".")
    return CloudDDPError(f"OCI refused {call}: {exc.status} {exc.code}: {message}.{hint}{more}")


@contextmanager
def refusals(call: str, more: str = "") -> Iterator[None]:
    """The service's refusal of `call` (a ServiceError) as one CloudDDPError (service_error), `more` at its end."""
    try:
        yield
    except oci.exceptions.ServiceError as exc:
        raise service_error(exc, call, more) from None


def has_log(run: Any) -> bool:
    return bool(run.log_details and run.log_details.log_id)


def describe_nodes(run: Any) -> dict[str, str]:
    nodes = {}
    for group in getattr(run, "node_group_details_list", None) or []:
        details = f" ({group.lifecycle_details})" if group.lifecycle_details else ""
        nodes[group.name] = f"{group.lifecycle_state}{details}"
    return nodes


def run_events(run: Any) -> list[JobEvent]:
    """A job run's course, for the dashboard's timeline: get_job_run's JobRun (oci SDK 2.189.0,
    data_science/models/job_run.py) has time_accepted (submitted), time_started and time_finished (its end, with
    lifecycle_details), each None until it happens. Its NodeGroupDetails (node_group_details.py) carry a name,
    lifecycle_state and lifecycle_details but no time, so each group is shown at the run's end, as it was left."""
    events = [JobEvent(run.time_accepted.timestamp(), "", "submitted")] if run.time_accepted else []
    if run.time_started:
        events.append(JobEvent(run.time_started.timestamp(), "", "started"))
    if run.time_finished:
        end = run.time_finished.timestamp()
        for group in getattr(run, "node_group_details_list", None) or []:
            details = f": {group.lifecycle_details}" if group.lifecycle_details else ""
            events.append(JobEvent(end, group.name, f"{str(group.lifecycle_state).lower()}{details}"))
        state = JOB_STATE_OF_LIFECYCLE_STATE.get(run.lifecycle_state, str(run.lifecycle_state)).lower()
        details = f": {run.lifecycle_details}" if run.lifecycle_details else ""
        events.append(JobEvent(end, "", f"{state}{details}"))
    return events


class OCIProvider(Provider):
    name = "oci"
    interrupt_stops = False  # Ctrl-C asks before cancelling a cloud job

    def __init__(
        self,
        service_endpoint: str | None = None,
        environ: Mapping[str, str] | None = None,
        poll: float | None = None,
        log_grace: float = 90.0,
        part_size: int = PART_SIZE,
        settings: OCISettings | None = None,
        sleep: Callable[[float], None] = time.sleep,
        timeout: float | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.environ = os.environ if environ is None else environ
        self.say = say or emit
        self.network = network.NetworkPolicy.choose(timeout, self.environ)
        self._last: Clients | None = None  # the clients of the latest call, named in network errors
        self.service_endpoint = service_endpoint or self.environ.get(ENDPOINT_VARIABLE) or None
        if self.service_endpoint:
            check_service_endpoint(self.service_endpoint, "service_endpoint" if service_endpoint else ENDPOINT_VARIABLE)
        self.poll = DEFAULT_POLL if poll is None else poll
        self.log_grace, self.part_size = log_grace, part_size
        self.default_settings = settings or OCISettings()
        self.sleep = sleep
        self._clients: dict[str, Clients] = {}
        self.timings: dict[str, float] = {}
        # run id -> {rank: exit code}, from the nodes' last log lines, in the order they were read
        self.node_exit_codes: dict[str, dict[int, int]] = {}

    # -- clients ------------------------------------------------------------------------
    def clients(self, settings: OCISettings | None = None) -> Clients:
        given = settings or self.default_settings
        chosen = effective_settings(given, self.environ)
        key = chosen.model_dump_json()
        if key not in self._clients:
            from_cli = chosen.region and "region" not in given.model_fields_set  # effective_settings took it
            region_origin = CLI_VARIABLES["region"] if from_cli else "oci.region"
            credentials = auth.load_credentials(chosen, self.environ, region_origin)
            kwargs = {**credentials.client_kwargs(), **self.network.client_kwargs()}
            if self.service_endpoint:
                kwargs["service_endpoint"] = self.service_endpoint
            self._clients[key] = Clients(credentials, kwargs)
        self._last = self._clients[key]
        return self._last

    @contextmanager
    def reaching(self, call: str) -> Iterator[None]:
        """Network failures inside become one paragraph naming `call`, the endpoint and the region."""
        try:
            yield
        except Exception as exc:
            last = self._last
            endpoint = self.service_endpoint or (last.endpoint() if last else None)
            region = last.credentials.region if last else None
            error = network.as_error(exc, call, endpoint, region, self.network)
            if error is None:
                raise
            raise error from None

    # -- render / submit ----------------------------------------------------------------
    def missing_settings(self, spec: JobSpec) -> list[str]:
        return request.missing_settings(spec, self.environ)

    def render(self, spec: JobSpec) -> OCIJobRequest:
        parts = request.build(spec, self.environ)
        return OCIJobRequest(
            provider=self.name, name=parts.create_job_run.display_name, spec=spec,
            request=OCIRequest(parts), before_submit=OCIStaging(parts),
        )  # fmt: skip

    def submit(self, job_request: JobRequest) -> JobHandle:
        with self.reaching("launch"):
            return self._submit(job_request)

    def _submit(self, job_request: JobRequest[OCIRequest]) -> JobHandle:
        parts = job_request.request.parts  # what render built and the dry run printed
        spec = job_request.spec
        started = time.perf_counter()
        clients = self.clients(spec.oci)  # credentials first: a bad config fails before any upload
        self.default_settings = spec.oci  # status/logs/cancel of this job use the same credentials
        create_job = self.stage_uploads(clients, parts)
        self.timings["staged"] = time.perf_counter() - started
        data_science = clients.data_science
        with refusals("create_job"):
            job = data_science.create_job(create_job, opc_retry_token=uuid.uuid4().hex).data
        self.wait_for_job(data_science, job)
        run_details = copy.deepcopy(parts.create_job_run)
        run_details.job_id = job.id
        with refusals("create_job_run", f" The job {job.id} was created; its run was not."):
            run = data_science.create_job_run(run_details, opc_retry_token=uuid.uuid4().hex).data
        self.timings["created"] = time.perf_counter() - started
        region = clients.credentials.region
        return JobHandle(
            provider=self.name,
            job_id=run.id,
            details={"job_id": job.id, "output": parts.output_uri,
                     "console": f"https://cloud.oracle.com/data-science/job-runs/{run.id}?region={region}"},
        )  # fmt: skip

    def store(self, clients: Clients, namespace: str, bucket: str, prefix: str) -> OCIObjectStore:
        """The staging engine's adapter for `prefix` in the work-dir bucket."""
        return OCIObjectStore(clients.object_storage, Location("oci", bucket, prefix.strip("/"), namespace),
                              part_size=self.part_size)  # fmt: skip

    def stage_uploads(self, clients: Clients, parts: request.Parts) -> Any:
        """Upload the source archive to this run's folder and stage each local input folder as a version.

        Returns CreateJobDetails with each staged channel's variable naming the published version (the
        dry run shows request.VERSION_AT_SUBMIT there: the version is the hash of the data)."""
        create_job = copy.deepcopy(parts.create_job)
        (group,) = create_job.job_node_configuration_details.job_node_group_configuration_details_list
        env = group.job_configuration_details.environment_variables
        with tempfile.TemporaryDirectory(prefix="cloudddp-oci-") as scratch:
            for upload in parts.uploads:
                store = self.store(clients, parts.namespace, parts.bucket, upload.prefix)
                if upload.kind == "archive":
                    archive = Path(scratch) / request.ARCHIVE_NAME
                    pack_source(
                        upload.local, archive, parts.job_config, {node.NODE_SCRIPT_NAME: node.NODE_SCRIPT.encode()}
                    )
                    copy_folder(archive, store)  # a fresh folder per run: nothing to compare with
                    continue
                result = stage(upload.local, store)
                files = counted(result.files, "file")
                self.say(f"cloudddp: staged {upload.local}: {files}, {result.changes()} -> {result.uri}")
                if upload.variable:
                    env[upload.variable] = env[upload.variable].replace(request.VERSION_AT_SUBMIT, result.version)
        return create_job

    def wait_for_job(self, data_science: Any, job: Any, timeout: float = 120.0) -> None:
        """A job is usable once ACTIVE; container jobs usually are at once. `oci.wait_until` polls GetJob."""
        state = job.lifecycle_state
        if state == "CREATING":
            try:
                ready: Any = oci.wait_until(  # a Response (a Sentinel only when waiting for a deletion)
                    data_science, data_science.get_job(job.id), max_wait_seconds=math.ceil(timeout),
                    max_interval_seconds=5, evaluate_response=lambda response: response.data.lifecycle_state != "CREATING",
                )  # fmt: skip
                state = ready.data.lifecycle_state
            except oci.exceptions.MaximumWaitTimeExceeded:
                raise CloudDDPError(f"the job {job.id} is still CREATING after {timeout:g} s.") from None
        if state != "ACTIVE":
            raise CloudDDPError(f"the job {job.id} is {state}, not ACTIVE: {getattr(job, 'lifecycle_details', '')}")

    # -- follow-up calls ----------------------------------------------------------------
    def resolve_run_id(self, job_id: str) -> str:
        """A job run OCID from a job run OCID, a job OCID (its newest run) or "latest"."""
        data_science = self.clients().data_science
        if job_id == "latest":
            compartment, _ = request.setting_or_environment(None, self.environ, request.COMPARTMENT_VARIABLES)
            validation.check_ocid(
                "compartment_id", compartment, required=True,
                hint=f" to find the latest run: set {' or '.join(request.COMPARTMENT_VARIABLES)}",
            )  # fmt: skip
            return self.newest_cloudddp_run(str(compartment))
        match = validation.OCID.fullmatch(job_id)
        if match and match["type"] == "datasciencejob":
            with refusals("get_job"):
                job = data_science.get_job(job_id).data
            runs = self.list_runs(compartment_id=job.compartment_id, job_id=job_id)
            if not runs:
                raise CloudDDPError(f"the job {job_id} has no runs.")
            return str(runs[0].id)
        validation.check_ocid("job_run_id", job_id, required=True)
        return job_id

    def newest_cloudddp_run(self, compartment: str) -> str:
        """The newest run cloudddp started in the compartment, paging past other runs (a page holds at most 100)."""
        pages = typing.cast(Iterator[Any], oci.pagination.list_call_get_all_results_generator(
            self.clients().data_science.list_job_runs, "record", compartment_id=compartment,
            sort_by="timeCreated", sort_order="DESC", limit=100,
        ))  # fmt: skip
        with refusals("list_job_runs"):
            for run in pages:
                if (run.freeform_tags or {}).get(request.NODES_TAG):
                    return str(run.id)
        raise CloudDDPError(f"no cloudddp job runs in compartment {compartment}.")

    def find_by_name(self, name: str, spec: JobSpec) -> str | None:
        """The newest job run in the job's compartment whose displayName is `name` (render names each run
        `<name>-<time stamp>`): ListJobRuns' displayName filter (oci 2.189.0 DataScienceClient.list_job_runs,
        `display_name`: "Filter results by its user-friendly name"). A client killed between CreateJob and
        CreateJobRun left a Job without a run: not found, so the rerun creates another Job and its run."""
        compartment, _ = request.setting_or_environment(spec.oci.compartment_id, self.environ,
                                                        request.COMPARTMENT_VARIABLES)  # fmt: skip
        validation.check_ocid(
            "compartment_id", compartment, required=True, hint=request.REQUIRED_HINTS["compartment_id"]
        )
        with self.reaching("find the job run"):
            self.clients(spec.oci)
            self.default_settings = spec.oci  # as submit: status of the run found uses the same credentials
            runs = self.list_runs(compartment_id=compartment, display_name=name)
        return str(runs[0].id) if runs else None

    def list_runs(self, **filters: Any) -> list[Any]:
        with refusals("list_job_runs"):
            response = self.clients().data_science.list_job_runs(
                sort_by="timeCreated", sort_order="DESC", limit=50, **filters
            )
        return list(response.data)

    def get_run(self, run_id: str) -> Any:
        with refusals("get_job_run"):
            return self.clients().data_science.get_job_run(run_id).data

    def exit_code(self, run: Any) -> int | None:
        """A finished run's code: the first failing node's (from its last log line) when following read it,
        else the lifecycle's ("exit code N" in the details, as ADS DataScienceJobRun.exit_code reads it); a
        stopped run with neither ends 143, as the local emulation's does."""
        failed = [code for code in self.node_exit_codes.get(run.id, {}).values() if code != 0]
        if run.lifecycle_state == "SUCCEEDED":
            return None
        if run.lifecycle_state in FINISHED_LIFECYCLE_STATES and failed:
            return failed[0]
        match = re.search(r"exit code (\d+)", run.lifecycle_details or "")
        if match:
            return int(match.group(1))
        return STOPPED_EXIT_CODE if run.lifecycle_state in STOPPED_LIFECYCLE_STATES else None

    def to_status(self, run: Any) -> JobStatus:
        details = run.lifecycle_details or ""
        return JobStatus(
            job_id=run.id, state=JOB_STATE_OF_LIFECYCLE_STATE.get(run.lifecycle_state, "RUNNING"),
            reason=f"{run.lifecycle_state}: {details}" if details else run.lifecycle_state,
            exit_code=self.exit_code(run), nodes=describe_nodes(run),
            artifacts=(run.freeform_tags or {}).get(request.OUTPUT_TAG),
        )  # fmt: skip

    def status(self, job_id: str) -> JobStatus:
        with self.reaching("status"):
            return self.to_status(self.get_run(self.resolve_run_id(job_id)))

    def events(self, job_id: str) -> list[JobEvent]:
        with self.reaching("events"):
            return run_events(self.get_run(self.resolve_run_id(job_id)))

    def cancel(self, job_id: str) -> None:
        with self.reaching("cancel"):
            self._cancel(job_id)

    def _cancel(self, job_id: str) -> None:
        run_id = self.resolve_run_id(job_id)
        if self.get_run(run_id).lifecycle_state in FINISHED_LIFECYCLE_STATES:
            return
        try:
            # No retries: the default strategy retries 409 IncorrectState (a run that just ended) for minutes.
            self.clients().data_science.cancel_job_run(run_id, retry_strategy=oci.retry.NoneRetryStrategy())
        except oci.exceptions.ServiceError as exc:
            if exc.status == 409:
                return  # already finished or already canceling
            raise service_error(exc, "cancel_job_run") from None

    def status_line(self, run: Any) -> str:
        nodes = ", ".join(f"{name}: {state}" for name, state in describe_nodes(run).items())
        details = f" - {run.lifecycle_details}" if run.lifecycle_details else ""
        return f"[oci] job run {run.lifecycle_state}{details}" + (f" (node groups: {nodes})" if nodes else "")

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        with self.reaching("logs"):
            yield from self._logs(job_id, follow)

    def _logs(self, job_id: str, follow: bool) -> Iterator[str]:
        run_id = self.resolve_run_id(job_id)
        run = self.get_run(run_id)
        shown = ""
        if not has_log(run):
            if not self.job_logs_enabled(run):
                yield "[oci] logging is off for this job (it has no log configuration); showing the run's state only"
                yield from self.watch_states(run, follow)
                return
            run, shown = yield from self.wait_for_log(run, follow)
            if not has_log(run):
                return
        log_details = run.log_details
        compartment = self.log_compartment(log_details.log_group_id, log_details.log_id)
        query = logs.search_query(compartment, log_details.log_group_id, log_details.log_id, run_id)
        search = logs.LogSearch(self.clients().log_search, query)
        accepted = run.time_accepted or logs.utc_now()
        start = accepted - dt.timedelta(minutes=1)  # clock skew between us and the service
        with refusals("search_logs"):
            if not follow:
                for record in sorted(search.window(start, logs.utc_now()), key=lambda r: r.time):
                    yield record.line()
                return
            yield from self.follow(run, logs.LogFollower(search, start), shown)

    def job_logs_enabled(self, run: Any) -> bool:
        """Whether the run's job was created with logging: then the service fills the run's log id later."""
        with refusals("get_job"):
            job = self.clients().data_science.get_job(run.job_id).data
        configuration = job.job_log_configuration_details
        return bool(configuration and configuration.enable_logging)

    def wait_for_log(self, run: Any, follow: bool) -> Generator[str, None, tuple[Any, str]]:
        """Re-read the run until the service names its log (once it runs, as ADS DataScienceJobRun.watch
        waits for it) or the run ends; shows the states meanwhile. Returns the run and the last state line."""
        run, line = yield from self.watch_states(run, follow, until=has_log)
        if has_log(run):
            return run, line
        if run.lifecycle_state in FINISHED_LIFECYCLE_STATES:
            yield "[oci] the job run ended before the service named its log: there are no log lines to show"
        else:
            yield f"[oci] the job run has no log yet: the service names it once the run starts ({run.lifecycle_state})"
        return run, line

    def log_compartment(self, log_group_id: str, log_id: str) -> str:
        """The Log's own compartment, the first part of a search scope (ADS OCILog.search: `get_log`, then
        its compartment_id); a log group often lives in a logging compartment apart from the jobs."""
        with refusals("get_log", f" The log search needs the log's compartment, which GetLog on {log_id} tells."):
            return str(self.clients().logging.get_log(log_group_id, log_id).data.compartment_id)

    def watch_states(
        self, run: Any, follow: bool, until: Callable[[Any], bool] = lambda run: False
    ) -> Generator[str, None, tuple[Any, str]]:
        """The run's state lines, each change once, re-read every poll while following, until the run ends or
        `until(run)`; returns the run as last read and the last line shown."""
        last = ""
        while True:
            line = self.status_line(run)
            if line != last:
                yield line
                last = line
            if not follow or run.lifecycle_state in FINISHED_LIFECYCLE_STATES or until(run):
                return run, last
            self.sleep(self.poll)
            run = self.get_run(run.id)

    def follow(self, run: Any, follower: logs.LogFollower, last_status: str = "") -> Iterator[str]:
        nodes = int((run.freeform_tags or {}).get(request.NODES_TAG, "0") or 0)
        finished = self.node_exit_codes.setdefault(run.id, {})  # status() reads the codes for the exit code
        while True:  # the first pass shows the run as the caller fetched it: no state goes unshown
            line = self.status_line(run)
            if line != last_status:
                yield line
                last_status = line
            for record in follower.poll():
                yield record.line()
                ended = logs.node_exit_in_line(record.message)
                if ended:
                    finished[ended[0]] = ended[1]
            if run.lifecycle_state in FINISHED_LIFECYCLE_STATES:
                if (nodes and len(finished) >= nodes) or run.time_started is None:
                    return  # every node wrote its last line, or no node ever started
                finished_at = run.time_finished or logs.utc_now()
                if logs.utc_now() - finished_at > dt.timedelta(seconds=self.log_grace):
                    missing = [str(r) for r in range(nodes) if r not in finished]
                    if missing:
                        yield (f"[oci] no final log line from node(s) {', '.join(missing)} within "
                               f"{self.log_grace:g} s of the end; `cloudddp logs {run.id} -p oci` shows late lines")  # fmt: skip
                    return
            self.sleep(self.poll)
            run = self.get_run(run.id)

    def fetch_artifacts(self, job_id: str, destination: str | Path) -> Path:
        """Download the run's output folder (node 0's model folder) into `destination`."""
        with self.reaching("fetch_artifacts"):
            return self._fetch_artifacts(job_id, destination)

    def _fetch_artifacts(self, job_id: str, destination: str | Path) -> Path:
        current = self.status(job_id)
        if not current.artifacts:
            raise CloudDDPError(f"the job run {current.job_id} has no {request.OUTPUT_TAG} tag: not a cloudddp run?")
        bucket, namespace, prefix = validation.parse_work_dir(current.artifacts, "the run's output")
        files = self.store(self.clients(), namespace, bucket, prefix).download(Path(destination))
        if not files:
            raise CloudDDPError(
                f"{current.artifacts} is empty (the job run is {current.state}); node 0 writes it when it exits."
            )
        return Path(destination)
