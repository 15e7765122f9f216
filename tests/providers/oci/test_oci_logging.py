"""Following a job run's log, and the exit code of a finished run, against the loopback service.

- The service may name a run's log only once the run is IN_PROGRESS: ADS's
  DataScienceJobRun.watch keeps polling until it does (ads/jobs/builders/infrastructure/
  dsc_job.py @0e785b9f). The fake does it both ways (`late_log_details`).
- A search scope is "<the Log's compartment>/<log group>/<log>", as ADS's OCILog.search
  builds it after `get_log` (ads/common/oci_logging.py @0e785b9f); the fake's log group is
  in a logging compartment apart from the jobs' and refuses any other scope.
- The exit code of a failed or cancelled run is the first failing node's, read from its
  last log line; without one, a cancelled run ends 143 as the local emulation's does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import oci
import pytest
from helpers import clean_env
from helpers.oci_loopback_server import (
    IMAGE_ENV,
    LOG_COMPARTMENT,
    LOG_GROUP,
    QUICK_SOURCES,
    FakeOCI,
    ThrowawayKey,
    oci_settings,
)

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.oci.provider import OCIProvider
from cloudddp.session import command_exit_code


@pytest.fixture
def late_server(key: ThrowawayKey, tmp_path: Path) -> Iterator[FakeOCI]:
    with fake(key, tmp_path, late_log_details=True) as service:
        yield service


def fake(key: ThrowawayKey, root: Path, **options: Any) -> FakeOCI:
    return FakeOCI(key, run_root=root / "service", node_env=clean_env(IMAGE_ENV), hold_states=True,
                   ingestion_delay=0.1, **options)  # fmt: skip


def make_provider(server: FakeOCI, config: Path) -> OCIProvider:
    return OCIProvider(service_endpoint=server.url, environ={"OCI_CONFIG_FILE": str(config)}, poll=0.1, log_grace=3)


def submit(provider: OCIProvider, *args: str, **oci_fields: Any) -> str:
    spec = build_spec({"entry_point": "quick_train.py", "source_dir": str(QUICK_SOURCES), "nodes": 2, "args": list(args),
                       "oci": oci_settings(**oci_fields)})  # fmt: skip
    return provider.submit(provider.render(spec)).job_id


# -- finding 3: the service names the log late -----------------------------------------------
@pytest.mark.oci_service
@pytest.mark.parametrize("late", [False, True], ids=["log-at-creation", "log-once-in-progress"])
def test_following_streams_the_log_whether_the_service_names_it_at_once_or_later(
    key: ThrowawayKey, config: Path, tmp_path: Path, late: bool
) -> None:
    with fake(key, tmp_path, late_log_details=late) as server:
        provider = make_provider(server, config)
        run_id = submit(provider)
        assert (server.runs[run_id]["logDetails"] is None) is late
        lines = list(provider.logs(run_id, follow=True))
    assert not any("logging is off" in line or "no log" in line for line in lines)
    assert [line for line in lines if line.startswith("[oci] job run")] == [
        "[oci] job run ACCEPTED (node groups: cloudddp: CREATING)",
        "[oci] job run IN_PROGRESS (node groups: cloudddp: ACTIVE)",
        "[oci] job run SUCCEEDED (node groups: cloudddp: DELETED)",
    ]  # each state once, also across the wait for the log
    for rank in (0, 1):
        assert f"[node-{rank}] cloudddp: node {rank} exited with code 0" in lines


@pytest.mark.oci_service
def test_logs_without_follow_before_the_log_exists_say_so(late_server: FakeOCI, config: Path) -> None:
    provider = make_provider(late_server, config)
    run_id = submit(provider)
    assert list(provider.logs(run_id)) == [
        "[oci] job run ACCEPTED (node groups: cloudddp: CREATING)",
        "[oci] the job run has no log yet: the service names it once the run starts (ACCEPTED)",
    ]


@pytest.mark.oci_service
def test_a_job_without_a_log_configuration_shows_states_only(key: ThrowawayKey, config: Path, tmp_path: Path) -> None:
    with fake(key, tmp_path) as server:
        provider = make_provider(server, config)
        run_id = submit(provider, log_group_id=None)
        lines = list(provider.logs(run_id, follow=True))
    assert lines[0] == "[oci] logging is off for this job (it has no log configuration); showing the run's state only"
    assert lines[-1] == "[oci] job run SUCCEEDED (node groups: cloudddp: DELETED)"
    assert not server.calls("POST", "/20190909/search")


# -- finding 4: the search scope is the log's compartment ------------------------------------
@pytest.mark.oci_service
def test_the_search_is_scoped_to_the_logs_own_compartment(late_server: FakeOCI, config: Path) -> None:
    provider = make_provider(late_server, config)
    run_id = submit(provider)
    list(provider.logs(run_id, follow=True))
    log_id = late_server.runs[run_id]["logDetails"]["logId"]
    assert late_server.calls("GET", rf"^/20200531/logGroups/{LOG_GROUP}/logs/{log_id}$")
    searches = late_server.calls("POST", "/20190909/search")
    assert searches and all(r.status == 200 for r in searches)
    assert {r.body["searchQuery"].split('"')[1] for r in searches} == {f"{LOG_COMPARTMENT}/{LOG_GROUP}/{log_id}"}


@pytest.mark.oci_service
def test_a_log_that_cannot_be_read_is_one_clear_error(late_server: FakeOCI, config: Path) -> None:
    provider = make_provider(late_server, config)
    run_id = submit(provider)
    provider.wait(run_id, poll=0.1)  # the log is named once the run is IN_PROGRESS
    del late_server.log_resources[late_server.runs[run_id]["logDetails"]["logId"]]
    with pytest.raises(
        CloudDDPError,
        match=r"refused get_log: 404 NotAuthorizedOrNotFound: .* needs the log's compartment, which GetLog",
    ):
        list(provider.logs(run_id))


# -- finding 8: the exit code of a cancelled or failed run -----------------------------------
def wait_for_line(provider: OCIProvider, server: FakeOCI, run_id: str, text: str, count: int) -> None:
    deadline = time.monotonic() + 60
    while sum(r.source == run_id and text in r.message for r in list(server.logs)) < count:
        assert time.monotonic() < deadline, f"no {count} x {text!r}"
        provider.status(run_id)  # the fake holds each state until a poll has seen it
        time.sleep(0.1)


@pytest.mark.oci_service
def test_a_cancelled_run_exits_with_its_nodes_code(key: ThrowawayKey, config: Path, tmp_path: Path) -> None:
    with fake(key, tmp_path) as server:
        provider = make_provider(server, config)
        run_id = submit(provider, "--wait")
        wait_for_line(provider, server, run_id, "waiting for SIGTERM", 2)
        provider.cancel(run_id)
        lines = list(provider.logs(run_id, follow=True))
        assert "[node-1] cloudddp: node 1 exited with code 143" in lines
        status = provider.status(run_id)
        assert (status.state, status.exit_code, command_exit_code(status)) == ("STOPPED", 143, 143)
        fresh = make_provider(server, config).status(run_id)  # no logs read: the lifecycle alone
        assert (fresh.state, fresh.exit_code) == ("STOPPED", 143)
        assert server.runs[run_id]["lifecycleDetails"] is None  # nothing the fake made up


@pytest.mark.oci_service
def test_a_failed_run_exits_with_the_failing_nodes_code_from_its_log(late_server: FakeOCI, config: Path) -> None:
    provider = make_provider(late_server, config)
    run_id = submit(provider, "--fail-rank", "1")
    lines = list(provider.logs(run_id, follow=True))
    assert "[node-1] cloudddp: node 1 exited with code 3" in lines
    status = provider.status(run_id)
    assert (status.state, status.exit_code) == ("FAILED", 3)
    assert make_provider(late_server, config).status(run_id).exit_code is None  # no logs, no details: unknown


def job_run(state: str, details: str | None = None) -> Any:
    return oci.data_science.models.JobRun(id="ocid1.datasciencejobrun.oc1.iad.aaaa", lifecycle_state=state,
                                          lifecycle_details=details, freeform_tags={})  # fmt: skip


# The single-node wording, as ADS's tests show it (tests/unitary/default_setup/jobs/test_jobs_run.py @0e785b9f).
ADS_DETAILS = "Job run artifact execution failed with exit code 21."


def test_the_nodes_codes_win_over_the_lifecycle_details() -> None:
    provider = OCIProvider(environ={})
    assert provider.to_status(job_run("FAILED", ADS_DETAILS)).exit_code == 21  # as ADS's exit_code reads it
    assert provider.to_status(job_run("CANCELED")).exit_code == 143
    assert provider.to_status(job_run("SUCCEEDED")).exit_code is None
    provider.node_exit_codes["ocid1.datasciencejobrun.oc1.iad.aaaa"] = {1: 0, 0: 137, 2: 143}
    assert provider.to_status(job_run("FAILED", ADS_DETAILS)).exit_code == 137  # the first failure read
    assert provider.to_status(job_run("CANCELED")).exit_code == 137
    assert provider.to_status(job_run("IN_PROGRESS")).exit_code is None
