"""ADS's multi-run mode forms its cluster as ADS's runner does (issue 34, "Partial environments").

oracle/accelerated-data-science @0e785b9fd36fb354019e0924b94ac2b0ec6f235a, `ads/jobs/templates/driver_pytorch.py`:
the main run (no MAIN_JOB_RUN_OCID) prints "Distributed Training HOST IP: <ip>"; every later run reads the main
run's log (DataScienceJobRun.logs -> `ads/common/oci_logging.py` OCILog.tail/search) for the first message with that
prefix in Runner.wait_for_log: check, fail once more than `timeout` (15 min) has passed, else sleep 60 s. Inside a
job run ADS authenticates with resource principals, else the API key of OCI_CONFIG_LOCATION
(`ads/jobs/templates/driver_utils.py` OCIHelper.init_oci_client); the loopback service checks API-key signatures,
so these tests take the config-file branch, and CLOUDDDP_OCI_SERVICE_ENDPOINT points the SDK at the service.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import clean_env
from helpers.oci_loopback_server import LOG, LOG_COMPARTMENT, LOG_GROUP, FakeOCI, ThrowawayKey, now_utc, stamp

from cloudddp.cluster import DetectOptions, oci, resolve_plan
from cloudddp.errors import CloudDDPError
from cloudddp.launcher import cli

MAIN_RUN = "ocid1.datasciencejobrun.oc1.iad.amaaaaaamainrun"
ADS_HOST_LINE = "Distributed Training HOST IP: 10.0.3.7"  # driver_pytorch.py: f"{LOG_PREFIX_HOST_IP}{self.ip}"


def ads_run(rank: int, count: int = 2, **extra: str) -> dict[str, str]:
    """One job run of ADS's multi-run job (ads/jobs/builders/runtimes/base.py MultiNodeRuntime.run @0e785b9f)."""
    env = {"NODE_RANK": str(rank), "NODE_COUNT": str(count), "JOB_OCID": "ocid1.datasciencejob.oc1.iad.amaaaaaajob",
           "JOB_RUN_OCID": MAIN_RUN if rank == 0 else f"ocid1.datasciencejobrun.oc1.iad.amaaaaaarun{rank}"}  # fmt: skip
    if rank > 0:
        env["MAIN_JOB_RUN_OCID"] = MAIN_RUN
    return {**env, **extra}


class Clock:
    """options.clock and options.sleep: sleeping moves the clock; `on_sleep` runs at each sleep."""

    def __init__(self, on_sleep: Any = None) -> None:
        self.now, self.sleeps, self.on_sleep = 0.0, [], on_sleep

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep:
            self.on_sleep()

    def options(self) -> DetectOptions:
        return DetectOptions(clock=lambda: self.now, sleep=self.sleep)


@pytest.fixture(scope="module")
def key() -> ThrowawayKey:
    return ThrowawayKey.generate()


@pytest.fixture
def service(oci_service: Any, key: ThrowawayKey) -> FakeOCI:
    """The loopback service holding ADS's main job run, accepted a minute ago, logging to the service's LOG."""
    server: FakeOCI = oci_service(key, ingestion_delay=0.0)
    accepted = now_utc() - dt.timedelta(minutes=1)
    server.runs[MAIN_RUN] = {
        "id": MAIN_RUN, "jobId": "ocid1.datasciencejob.oc1.iad.amaaaaaajob", "lifecycleState": "IN_PROGRESS",
        "timeAccepted": stamp(accepted), "timeStarted": stamp(accepted), "timeFinished": None,
        "logDetails": {"logGroupId": LOG_GROUP, "logId": LOG},
    }  # fmt: skip
    return server


def worker_env(service: FakeOCI, tmp_path: Path, key: ThrowawayKey) -> dict[str, str]:
    config = key.write_config(tmp_path / ".oci")
    return ads_run(1, OCI_CONFIG_LOCATION=str(config), CLOUDDDP_OCI_SERVICE_ENDPOINT=service.url)


def log(service: FakeOCI, source: str, *messages: str) -> None:
    service.add_logs(source, list(messages), now_utc() - dt.timedelta(seconds=30), dt.timedelta(seconds=1))


def main_run_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """(address, the line) cloudddp's launcher logs as node 0, the main run."""
    monkeypatch.setattr(oci.socket, "gethostbyname", lambda name: "10.0.3.9")
    plan = resolve_plan(ads_run(0), None, DetectOptions())
    lines = [line for line in capsys.readouterr().err.splitlines() if "HOST IP" in line]
    return plan.master_addr, "\n".join(lines)


def test_the_main_run_logs_its_address_as_adss_host_does(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: node 0 of 2 without MASTER_ADDR was refused, and logged nothing an ADS worker could find."""
    address, line = main_run_line(monkeypatch, capsys)
    assert (address, line) == ("10.0.3.9", "Distributed Training HOST IP: 10.0.3.9")


@pytest.mark.parametrize("resolved", ["127.0.1.1", OSError("no such host")])
def test_a_main_run_without_a_reachable_address_is_refused(resolved: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def gethostbyname(name: str) -> str:
        if isinstance(resolved, Exception):
            raise resolved
        return resolved

    monkeypatch.setattr(oci.socket, "gethostbyname", gethostbyname)
    with pytest.raises(CloudDDPError, match=r"MASTER_ADDR is not set.*MASTER_ADDR supplies the main node's address"):
        resolve_plan(ads_run(0), None, DetectOptions())


@pytest.mark.parametrize("main", ["cloudddp", "ads"])
def test_a_worker_finds_the_main_runs_address_in_its_log(
    main: str, service: FakeOCI, key: ThrowawayKey, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Before: exit 2, "cloudddp does not" read the log. The main run is cloudddp's launcher or ADS's driver."""
    address, line = main_run_line(monkeypatch, capsys) if main == "cloudddp" else ("10.0.3.7", ADS_HOST_LINE)
    other_run = "ocid1.datasciencejobrun.oc1.iad.amaaaaaaotherrun"
    log(service, other_run, "Distributed Training HOST IP: 10.9.9.9")  # another run in the same log
    log(service, MAIN_RUN, "Job Run STARTED", "Node IP: 10.0.3.1", line, "Distributed Training HOST IP: 10.0.3.99")
    plan = resolve_plan(worker_env(service, tmp_path, key), None, Clock().options())
    assert (plan.provider, plan.nnodes, plan.node_rank, plan.master_addr) == ("oci", 2, 1, address)
    assert plan.master_port == oci.MASTER_PORT and plan.rdzv_id == MAIN_RUN
    search = service.calls("POST", "search")[-1].body
    assert search["searchQuery"] == (  # OCILog.search's query, scoped by the Log's own compartment (GetLog)
        f"SEARCH \"{LOG_COMPARTMENT}/{LOG_GROUP}/{LOG}\" | WHERE source = '*{MAIN_RUN}' | SORT BY datetime DESC"
    )
    assert search["timeStart"].startswith(service.runs[MAIN_RUN]["timeAccepted"][:19])  # from timeAccepted
    assert service.calls("GET", f"/jobRuns/{MAIN_RUN}") and service.calls("GET", f"/logs/{LOG}")


def test_a_worker_waits_for_the_line_as_ads_waits(
    service: FakeOCI, key: ThrowawayKey, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock(on_sleep=lambda: log(service, MAIN_RUN, ADS_HOST_LINE) if len(clock.sleeps) == 2 else None)
    plan = resolve_plan(worker_env(service, tmp_path, key), None, clock.options())
    assert plan.master_addr == "10.0.3.7" and clock.sleeps == [60.0, 60.0]  # Runner.wait_for_log: 60 s apart
    assert "waiting up to 900 s" in capsys.readouterr().err  # said once, in the run's log


def test_a_worker_whose_main_run_never_logs_its_address_is_refused_after_adss_timeout(
    service: FakeOCI, key: ThrowawayKey, tmp_path: Path
) -> None:
    clock = Clock()
    with pytest.raises(CloudDDPError) as raised:
        resolve_plan(worker_env(service, tmp_path, key), None, clock.options())
    # ADS checks at 0, 60, ..., 900 s and raises at the first check more than 900 s after it began.
    assert len(clock.sleeps) == 16 and len(service.calls("POST", "search")) == 17
    message = str(raised.value)
    assert "\n" not in message and f"MAIN_JOB_RUN_OCID='{MAIN_RUN}'" in message and "OCI Logging" in message
    assert "after 900 s" in message and "MASTER_ADDR supplies the main node's address" in message


def test_a_worker_without_the_oci_sdk_is_one_paragraph_naming_the_main_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "oci", None)  # `import oci` raises ImportError
    script = tmp_path / "train.py"
    script.write_text("print('hello')\n")
    target = clean_env({"SM_INPUT_CONFIG_DIR": str(tmp_path / "no-sagemaker-here"), **ads_run(1)})
    for name in set(os.environ) - set(target):
        monkeypatch.delenv(name)
    for name, value in target.items():
        monkeypatch.setenv(name, value)
    code = cli.main(["--dry-run", str(script)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and "\n" not in err, err
    assert f"MAIN_JOB_RUN_OCID='{MAIN_RUN}'" in err and "the oci SDK is not importable" in err
    assert "OCI Logging" in err and "MASTER_ADDR supplies the main node's address" in err
