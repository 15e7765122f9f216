"""cloudddp/failover.py over scripted providers: a capacity error moves to the next target, anything else stops;
each attempt is in the job index before it is submitted, and a rerun adopts an open attempt's job instead of
submitting another."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.capacity_errors import SAGEMAKER_CAPACITY, as_provider_raises, aws_json_error, oci_error

from cloudddp import job_index
from cloudddp.errors import CloudDDPError
from cloudddp.failover import Failover, Target, attempt_name, run_name
from cloudddp.job_list import attempts_lines, job_table
from cloudddp.job_spec import build_spec
from cloudddp.providers import JobHandle, JobRequest, JobStatus, Provider


@dataclass
class Scripted(Provider):
    """A provider whose service answers as scripted: `refusal` at submit, then `states` one per status call (the
    last repeats). `status` of a job it never accepted raises as the providers do."""

    name: str = "sagemaker"
    refusal: Exception | None = None
    states: list[tuple[str, str]] = field(default_factory=lambda: [("RUNNING", ""), ("SUCCEEDED", "")])
    exit_code: int | None = None
    submitted: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    known: set[str] = field(default_factory=set)
    rendered: list[str] = field(default_factory=list)  # the names of the specs it rendered: each attempt's name
    looked_up: list[str] = field(default_factory=list)
    numbered: bool = False  # the service assigns the ids (Slurm's 101, 102...); else the id is the name (SageMaker)
    jobs: dict[str, str] = field(default_factory=dict)  # id -> the name it was submitted under

    def render(self, spec: Any) -> JobRequest:
        """The job's name is its spec's first word, so that the tests can name it (`rendered` has the whole)."""
        self.rendered.append(spec.name)
        return JobRequest(provider=self.name, name=f"{spec.name.split('-')[0]}-{self.name}-job", spec=spec, request={})

    def find_by_name(self, name: str, spec: Any) -> str | None:
        """The service's job submitted under `name`, as a provider's hook finds it (the newest)."""
        self.looked_up.append(name)
        found = [job_id for job_id, named in self.jobs.items() if named == name and job_id in self.known]
        return found[-1] if found else None

    def submit(self, request: JobRequest) -> JobHandle:
        if self.refusal is not None:
            raise as_provider_raises(self.refusal)
        self.submitted.append(request.name)
        job_id = str(101 + len(self.jobs)) if self.numbered else request.name
        self.jobs[job_id] = request.name
        self.known.add(job_id)
        return JobHandle(self.name, job_id)

    def status(self, job_id: str) -> JobStatus:
        if job_id not in self.known:
            raise CloudDDPError(f"no job named {job_id!r}")
        state, reason = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        if state == "Ctrl-C":
            raise KeyboardInterrupt
        code = self.exit_code if state == "FAILED" else None
        return JobStatus(job_id=job_id, state=state, reason=reason, exit_code=code)

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        return iter(())

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)
        self.states = [("STOPPED", "cancelled")]

    def wait(self, job_id: str, poll: float = 5.0, on_status: Any = None) -> JobStatus:
        while not (current := self.status(job_id)).done:
            pass
        return current


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def targets(*providers: Scripted, **failover: int) -> list[Target]:
    found = []
    for position, provider in enumerate(providers):
        spec = build_spec({"name": "fo", "entry_point": "train.py", "failover": failover,
                           "targets": []})  # fmt: skip
        found.append(Target(position, f"t{position + 1}", provider.name, spec))
    return found


def launch(providers: list[Scripted], said: list[str], **failover: int) -> int:
    """The providers' names are distinct: each target's provider is found by its name."""
    clock = Clock()
    by_name = {provider.name: provider for provider in providers}
    found = targets(*providers, **failover)
    run = Failover(found, say=said.append, provider_for=by_name.__getitem__, clock=clock, sleep=clock.sleep, poll=1)
    return run.run(logs=False)


def states_of(found: list[Target]) -> list[tuple[str, str]]:
    return [(a.target, a.state) for a in job_index.attempts(run_name(found))]


def test_a_refusal_for_capacity_at_submit_moves_to_the_next_target() -> None:
    first = Scripted("sagemaker", refusal=aws_json_error("ResourceLimitExceeded", "limit for ml.p4d is 0"))
    second = Scripted("local")
    said: list[str] = []
    assert launch([first, second], said) == 0
    assert first.submitted == [] and second.submitted == ["fo-local-job"]
    assert states_of(targets(first, second)) == [("t1", "moved on"), ("t2", "succeeded")]
    assert any("no capacity on target 1 (t1, sagemaker): ResourceLimitExceeded" in line for line in said)


def test_any_other_refusal_stops_and_never_hops() -> None:
    first = Scripted("sagemaker", refusal=aws_json_error("ValidationException", "bad role"))
    second = Scripted("local")
    with pytest.raises(CloudDDPError, match="bad role"):
        launch([first, second], [])
    assert second.submitted == []
    assert states_of(targets(first, second)) == [("t1", "refused")]


def test_a_job_failed_for_capacity_before_training_moves_on() -> None:
    first = Scripted("sagemaker", states=[("PENDING", "Starting"), ("FAILED", SAGEMAKER_CAPACITY)])
    second = Scripted("local")
    assert launch([first, second], []) == 0
    assert first.submitted and second.submitted
    attempts = job_index.attempts(run_name(targets(first, second)))
    assert attempts[0].state == "moved on" and attempts[0].reason.startswith("CapacityError")
    assert attempts[0].ended is not None and attempts[1].state == "succeeded"


def test_the_scripts_own_failure_after_training_started_is_not_retried() -> None:
    first = Scripted("sagemaker", states=[("RUNNING", ""), ("FAILED", "AlgorithmError: exit code 3")], exit_code=3)
    second = Scripted("local")
    assert launch([first, second], []) == 3
    assert second.submitted == []


def test_a_failure_before_training_that_is_not_capacity_stops() -> None:
    first = Scripted("sagemaker", states=[("FAILED", "ClientError: Please ensure the role is valid")])
    second = Scripted("local")
    assert launch([first, second], []) == 1
    assert second.submitted == []


def test_pending_past_the_timeout_for_a_reason_in_the_table_is_cancelled_and_moves_on() -> None:
    first = Scripted("slurm", states=[("PENDING", "PENDING PartitionDown")])
    second = Scripted("local")
    said: list[str] = []
    assert launch([first, second], said, pending_timeout=5) == 0
    assert first.cancelled == first.submitted == ["fo-slurm-job"]
    assert any("pending over 5 s (PENDING PartitionDown): cancelling it" in line for line in said)


def test_pending_for_another_reason_waits_past_the_timeout() -> None:
    first = Scripted("slurm", states=[("PENDING", "PENDING Priority")] * 20 + [("RUNNING", ""), ("SUCCEEDED", "")])
    second = Scripted("local")
    assert launch([first, second], [], pending_timeout=5) == 0
    assert first.cancelled == [] and second.submitted == []


def test_the_hop_limit_stops_the_search() -> None:
    refusal = aws_json_error("ResourceLimitExceeded", "limit is 0")
    first, second = Scripted("sagemaker", refusal=refusal), Scripted("local")
    with pytest.raises(CloudDDPError, match="max_hops is 0") as stopped:
        launch([first, second], [], max_hops=0)
    assert stopped.value.exit_code == 1 and second.submitted == []


def test_no_capacity_anywhere_is_an_error_naming_the_attempts() -> None:
    refusal = aws_json_error("ResourceLimitExceeded", "limit is 0")
    with pytest.raises(CloudDDPError, match="no capacity on any of the 2 targets"):
        oci = Scripted("oci", refusal=oci_error(400, "LimitExceeded", "exceeds the limit for this tenancy"))
        launch([Scripted("sagemaker", refusal=refusal), oci], [])


def test_attempt_names_are_derived_from_the_spec_and_the_target() -> None:
    one, again = targets(Scripted("sagemaker"), Scripted("local")), targets(Scripted("sagemaker"), Scripted("local"))
    assert [attempt_name(t) for t in one] == [attempt_name(t) for t in again]
    assert attempt_name(one[0]) != attempt_name(one[1])
    other = build_spec({"name": "fo", "entry_point": "train.py", "nodes": 2})
    assert attempt_name(Target(0, "t1", "sagemaker", other)) != attempt_name(one[0])


def open_attempt_left_by_a_killed_client(found: list[Target], job_id: str) -> int:
    """What a client killed between submit and record leaves: the attempt, recorded before submitting."""
    target = found[0]
    return job_index.begin_attempt(run_name(found), attempt_name(target), 0, target.name, target.provider, job_id)


def test_a_rerun_adopts_the_job_a_killed_client_submitted() -> None:
    first, second = Scripted("sagemaker"), Scripted("local")
    found = targets(first, second)
    open_attempt_left_by_a_killed_client(found, "fo-sagemaker-job")
    first.known.add("fo-sagemaker-job")  # the service has it
    first.jobs["fo-sagemaker-job"] = "fo-sagemaker-job"
    said: list[str] = []
    assert launch([first, second], said) == 0
    assert first.submitted == [] and second.submitted == []
    assert states_of(found) == [("t1", "succeeded")]
    assert any(line.startswith("cloudddp: adopting fo-sagemaker-job") for line in said)
    assert [entry.job_id for entry in job_index.entries()] == ["fo-sagemaker-job"]  # recorded once adopted


def test_a_rerun_submits_where_the_killed_client_never_reached_the_service() -> None:
    first, second = Scripted("sagemaker"), Scripted("local")
    found = targets(first, second)
    open_attempt_left_by_a_killed_client(found, "fo-sagemaker-job")
    assert launch([first, second], []) == 0
    assert first.submitted == ["fo-sagemaker-job"]
    assert states_of(found) == [("t1", "never submitted"), ("t1", "succeeded")]


def test_a_finished_attempt_is_not_adopted_by_the_next_launch() -> None:
    first, second = Scripted("sagemaker"), Scripted("local")
    assert launch([first, second], []) == 0
    first.states = [("RUNNING", ""), ("SUCCEEDED", "")]
    assert launch([first, second], []) == 0
    assert first.submitted == ["fo-sagemaker-job", "fo-sagemaker-job"]


def test_status_lines_show_each_attempt() -> None:
    first = Scripted("sagemaker", refusal=aws_json_error("ResourceLimitExceeded", "limit for ml.p4d is 0"))
    second = Scripted("local")
    launch([first, second], [])
    lines = attempts_lines(run_name(targets(first, second)))
    assert len(lines) == 2
    assert lines[0].startswith("1. t1 (sagemaker) fo-sagemaker-job ") and "moved on: " in lines[0]
    assert "limit for ml.p4d is 0" in lines[0]
    assert lines[1].startswith("2. t2 (local) fo-local-job ") and lines[1].endswith("succeeded")


def test_an_index_from_before_failover_gets_the_attempts_table_and_the_run_column() -> None:
    path = job_index.index_path()
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as db:  # the index as cloudddp wrote it before failover (metrics was the last column)
        db.execute(
            "CREATE TABLE jobs (job_id TEXT NOT NULL, provider TEXT NOT NULL, name TEXT NOT NULL, submitted REAL NOT "
            "NULL, command TEXT NOT NULL DEFAULT '', state TEXT NOT NULL DEFAULT '', checked REAL NOT NULL DEFAULT 0, "
            "nodes INTEGER, finished REAL, metrics TEXT, PRIMARY KEY (provider, job_id))"
        )
        db.execute("INSERT INTO jobs (job_id, provider, name, submitted) VALUES ('/runs/old', 'local', 'old', 1.0)")
    first = Scripted("sagemaker", refusal=aws_json_error("ResourceLimitExceeded", "limit is 0"))
    assert launch([first, Scripted("local")], []) == 0
    (new, old) = job_index.entries()
    assert (new.job_id, old.job_id, old.run) == ("fo-local-job", "/runs/old", None)
    assert new.run is not None and [a.state for a in job_index.attempts(new.run)] == ["moved on", "succeeded"]


def test_without_an_index_to_record_the_attempt_in_nothing_is_submitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "a-file"))  # its cloudddp folder cannot be made
    first = Scripted("sagemaker")
    with pytest.raises(CloudDDPError, match="could not record the attempt fo-1-"):
        launch([first], [])
    assert first.submitted == []


def test_ctrl_c_before_training_leaves_a_cloud_job_to_adopt_and_stops_a_local_one() -> None:
    cloud = Scripted("sagemaker", states=[("Ctrl-C", ""), ("PENDING", "Starting"), ("RUNNING", ""), ("SUCCEEDED", "")])
    said: list[str] = []
    assert launch([cloud], said) == 130  # stdin is no terminal here: the prompt's default, leave it running
    assert cloud.cancelled == [] and any("left fo-sagemaker-job running" in line for line in said)
    assert launch([cloud], []) == 0  # the next launch adopts it
    assert cloud.submitted == ["fo-sagemaker-job"]
    local = Scripted("local", states=[("Ctrl-C", ""), ("RUNNING", "")])
    assert launch([local], []) == 130
    assert local.cancelled == ["fo-local-job"]  # the local provider's Ctrl-C stops its nodes
    assert [a.state for a in job_index.attempts(run_name(targets(local)))] == ["interrupted"]


def test_list_shows_the_attempts_under_the_job_they_led_to() -> None:
    first = Scripted("sagemaker", refusal=aws_json_error("ResourceLimitExceeded", "limit for ml.p4d is 0"))
    launch([first, Scripted("local")], [])
    job_index.record("slurm", "77", "other", "")  # a job without targets: no attempt lines
    table = job_table(job_index.entries(), {}).splitlines()
    assert table[1].startswith("other ") and table[2].startswith("fo ")
    assert table[3].startswith("  attempt 1. t1 (sagemaker) fo-sagemaker-job ") and "moved on" in table[3]
    assert table[4].startswith("  attempt 2. t2 (local) fo-local-job ") and len(table) == 5


class Killed(BaseException):
    """kill -9 of the client: nothing after it runs (no except clause of cloudddp catches a BaseException)."""


@dataclass
class KilledAfterSubmit(Scripted):
    """The service accepts the job, and the client dies before it hears the id back."""

    def submit(self, request: JobRequest) -> JobHandle:
        super().submit(request)
        raise Killed


def test_each_target_is_submitted_under_its_attempts_name() -> None:
    first = Scripted("slurm", numbered=True)
    launch([first], [])
    assert first.rendered == [attempt_name(targets(first)[0])]


@pytest.mark.parametrize("numbered", [True, False], ids=["the service assigns the id", "the id is the name"])
def test_a_client_killed_before_recording_the_id_is_adopted_by_name(numbered: bool) -> None:
    killed = KilledAfterSubmit("slurm", numbered=numbered, states=[("PENDING", "PENDING Priority")])
    with pytest.raises(Killed):
        launch([killed], [])
    (left,) = job_index.attempts(run_name(targets(killed)))
    assert (left.state, left.job_id) == ("submitting", "fo-slurm-job")  # the name, recorded before submitting
    rerun = Scripted("slurm", numbered=numbered, jobs=killed.jobs, known=killed.known,
                     states=[("RUNNING", ""), ("SUCCEEDED", "")])  # fmt: skip
    said: list[str] = []
    assert launch([rerun], said) == 0
    job_id = "101" if numbered else "fo-slurm-job"
    assert rerun.submitted == [] and rerun.looked_up == ["fo-slurm-job"]
    assert any(line.startswith(f"cloudddp: adopting {job_id} ") for line in said)
    (adopted,) = job_index.attempts(run_name(targets(rerun)))
    assert (adopted.state, adopted.job_id) == ("succeeded", job_id)
    assert [entry.job_id for entry in job_index.entries()] == [job_id]


def test_a_client_killed_before_the_service_had_the_job_submits_it_on_rerun() -> None:
    found = targets(Scripted("slurm", numbered=True))
    open_attempt_left_by_a_killed_client(found, "fo-slurm-job")
    rerun = Scripted("slurm", numbered=True)
    assert launch([rerun], []) == 0
    assert rerun.looked_up == ["fo-slurm-job"] and rerun.submitted == ["fo-slurm-job"]
    assert [(a.state, a.job_id) for a in job_index.attempts(run_name(found))] == [
        ("never submitted", "fo-slurm-job"), ("succeeded", "101")]  # fmt: skip


def test_a_service_that_cannot_be_asked_for_the_name_stops_the_launch() -> None:
    found = targets(Scripted("slurm", numbered=True))
    open_attempt_left_by_a_killed_client(found, "fo-slurm-job")

    @dataclass
    class Unreachable(Scripted):
        def find_by_name(self, name: str, spec: Any) -> str | None:
            raise CloudDDPError("squeue: error: slurm_load_jobs error: Unable to contact slurm controller")

    rerun = Unreachable("slurm", numbered=True)
    with pytest.raises(CloudDDPError, match="Unable to contact slurm controller"):
        launch([rerun], [])
    assert rerun.submitted == []
    assert [a.state for a in job_index.attempts(run_name(found))] == ["submitting"]  # left for the next rerun


def test_a_recorded_job_the_service_forgot_is_closed_and_submitted_again() -> None:
    found = targets(Scripted("slurm", numbered=True))
    attempt = open_attempt_left_by_a_killed_client(found, "fo-slurm-job")
    job_index.update_attempt(attempt, state="submitted", job_id="99")  # the id was recorded; Slurm purged the job
    rerun = Scripted("slurm", numbered=True)
    assert launch([rerun], []) == 0
    assert rerun.looked_up == [] and rerun.submitted == ["fo-slurm-job"]
    assert [a.state for a in job_index.attempts(run_name(found))] == ["not found", "succeeded"]


def test_by_default_a_job_is_found_by_name_where_its_name_is_its_id() -> None:
    service = Scripted("sagemaker", states=[("RUNNING", "")])
    service.known.add("fo-sagemaker-job")
    spec = build_spec({"name": "fo", "entry_point": "train.py"})
    assert Provider.find_by_name(service, "fo-sagemaker-job", spec) == "fo-sagemaker-job"
    assert Provider.find_by_name(service, "another-job", spec) is None


def test_the_estimator_runs_its_targets_as_launch_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Estimator(targets=[...]) is the notebook door to the same failover: SageMaker has no capacity, the job runs on
    the next target, and status()/stop() ask the provider the job runs on (the instance that submitted it: one per
    provider for the estimator's life), not the estimator's own."""
    from cloudddp import Estimator
    from cloudddp import estimator as estimator_module

    made: dict[str, list[Scripted]] = {"sagemaker": [], "local": []}

    def get_provider(name: str) -> Scripted:
        refusal = aws_json_error("ResourceLimitExceeded", "limit for ml.p4d is 0") if name == "sagemaker" else None
        made[name].append(Scripted(name, refusal=refusal))
        return made[name][-1]

    monkeypatch.setattr(estimator_module, "get_provider", get_provider)
    (tmp_path / "train.py").write_text("")
    est = Estimator(provider="sagemaker", entry_point="train.py", source_dir=str(tmp_path), name="fo",
                    targets=[{"provider": "sagemaker"}, {"provider": "local"}], failover={"max_hops": 1})  # fmt: skip
    assert "# target 1/2: sagemaker (sagemaker)" in est.dry_run() and "# target 2/2: local (local)" in est.dry_run()
    final = est.fit(logs=False)
    assert final is not None and final.state == "SUCCEEDED"
    (first,), (second,) = made["sagemaker"], made["local"]
    assert first.submitted == [] and second.submitted == ["fo-local-job"]
    assert est.latest_job is not None and est.latest_job.provider == "local"
    assert est.status().state == "SUCCEEDED" and second.known == {"fo-local-job"}
    est.stop()
    assert second.cancelled == ["fo-local-job"] and [len(made[name]) for name in made] == [1, 1]
