"""A job with `targets:` runs on the first that has capacity (docs/guides/failover.md).

Each target is tried in order. A capacity or quota error (cloudddp/capacity.py's table) moves to the next: the
service's refusal at submit, a job that fails for capacity before training starts, or one still pending past
`failover.pending_timeout` for a reason that says it cannot be scheduled. Anything else stops with that error.

Never two at once: every attempt is written to the job index before it is submitted, under a name derived from the
job spec and the target (`attempt_name`), with the name the job is submitted under: each target's job is named
after its attempt (`attempt_spec`; SageMaker, OCI and local runs add a time stamp). A client killed after
submitting finds that open attempt when rerun and adopts its job (still running, or pending) instead of submitting
another: by the id it recorded, or, killed before it could record one, through the provider's `find_by_name` (a
Slurm, PBS or OCI service assigns the id on submit). `failover.max_hops` and `failover.deadline` bound the search.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudddp import capacity, job_index, session
from cloudddp.config import target_specs
from cloudddp.errors import CloudDDPError
from cloudddp.providers import JobHandle, JobRequest, Provider, get_provider
from cloudddp.terminal import emit

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec


@dataclass(frozen=True)
class Target:
    position: int  # 0 first
    name: str
    provider: str
    spec: JobSpec


@dataclass(frozen=True)
class MovedOn:
    """An attempt that found no capacity: the table's row and what the service said."""

    row: capacity.Row
    said: str


def launch_targets(
    spec: JobSpec, file: Path | None, overrides: dict[str, Any], context: str | None, choice: str | None,
    dry_run: bool, follow: dict[str, bool],
) -> int:  # fmt: skip
    """`cloudddp launch` of a spec with `targets:`: every target's request (dry run), one target (--target N|NAME),
    or each in turn until one has capacity."""
    if not spec.targets:
        raise CloudDDPError(f"--target {choice!r}: the job spec has no `targets:` list (docs/guides/failover.md).")
    targets = targets_from(target_specs(spec, file, overrides, context=context))
    if choice:
        chosen = pick(targets, choice)
        return session.run_job(chosen.provider, chosen.spec, dry_run=dry_run, wait=follow["wait"],
                               logs=follow["logs"], stop_on_interrupt=follow["stop_on_interrupt"])  # fmt: skip
    if dry_run:
        return print_requests(targets)
    return Failover(targets).run(**follow)


def targets_from(found: Sequence[tuple[str, str, JobSpec]]) -> list[Target]:
    return [Target(position, name, provider, spec) for position, (name, provider, spec) in enumerate(found)]


def pick(targets: Sequence[Target], choice: str) -> Target:
    """`--target N|NAME`: the Nth target (from 1) or the one named so."""
    if choice.isdigit() and 1 <= int(choice) <= len(targets):
        return targets[int(choice) - 1]
    named = [target for target in targets if target.name == choice]
    if named:
        return named[0]
    listed = ", ".join(f"{t.position + 1} ({t.name})" for t in targets)
    raise CloudDDPError(f"--target {choice!r}: the job spec has no such target; it has {listed or 'none'}.")


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:10]


def attempt_name(target: Target) -> str:
    """The same job spec and target give the same name, on every run of the client."""
    described = [target.position, target.name, target.provider, target.spec.model_dump(mode="json")]
    return f"{target.spec.name}-{target.position + 1}-{digest(described)}"


def attempt_spec(target: Target) -> JobSpec:
    """The target's spec named after its attempt: the job is submitted under that name, which `find_by_name` finds
    again (a Slurm or PBS job's name, a Kubernetes job's metadata.name, the stem of SageMaker's, OCI's and local's)."""
    return target.spec.model_copy(update={"name": attempt_name(target)})


def run_name(targets: Sequence[Target]) -> str:
    return f"{targets[0].spec.name}-{digest([attempt_name(target) for target in targets])}"


def render_all(targets: Sequence[Target], provider_for: Callable[[str], Provider]) -> list[JobRequest]:
    """Every target's request, through session.render (each provider's own checks: the inputs it can read, the
    secrets policy); a target that cannot run the job is refused here, before anything is submitted."""
    requests, refused = [], []
    for target in targets:
        try:
            requests.append(session.render(provider_for(target.provider), attempt_spec(target)))
        except CloudDDPError as exc:
            refused.append(f"- target {target.position + 1} ({target.name}, {target.provider}): {exc}")
    if refused:
        raise CloudDDPError(f"{len(refused)} of the {len(targets)} targets cannot run this job; fix or remove them "
                            "(nothing was submitted):\n" + "\n".join(refused))  # fmt: skip
    return requests


def print_requests(targets: Sequence[Target], say: Callable[[str], None] = emit,
            provider_for: Callable[[str], Provider] = get_provider) -> int:  # fmt: skip
    """Every target's request, in order, each under a comment naming it."""
    for target, request in zip(targets, render_all(targets, provider_for), strict=True):
        say(f"# target {target.position + 1}/{len(targets)}: {target.name} ({target.provider})")
        say(request.to_yaml().rstrip())
    return 0


@dataclass
class Failover:
    """One launch over `targets`; `provider_for`, `clock`, `sleep` and `poll` are the tests' seams."""

    targets: Sequence[Target]
    say: Callable[[str], None] = emit
    provider_for: Callable[[str], Provider] = get_provider
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    poll: float = 2.0
    # The job of the attempt that ran (or was last tried) and, once followed to its end, its final status: what the
    # Estimator's fit() reads, as it reads run_job's.
    record: session.JobRecord = field(default_factory=session.JobRecord)

    def run(self, *, wait: bool = True, logs: bool = True, stop_on_interrupt: bool = False) -> int:
        settings = self.targets[0].spec.failover
        requests = render_all(self.targets, self.provider_for)
        run, began = run_name(self.targets), self.clock()
        for target, request in zip(self.targets, requests, strict=True):
            hops = target.position  # every target before this one moved on
            if hops > settings.max_hops:
                raise CloudDDPError(f"no capacity on the first {hops} targets and failover.max_hops is "
                                    f"{settings.max_hops}: stopped before target {target.position + 1} "
                                    f"({target.name}); `cloudddp status` lists the attempts.", exit_code=1)  # fmt: skip
            if self.clock() - began > settings.deadline:
                raise CloudDDPError(f"failover.deadline ({settings.deadline} s) passed: stopped before target "
                                    f"{target.position + 1} ({target.name}).", exit_code=1)  # fmt: skip
            outcome = self.attempt(run, target, request, wait, logs, stop_on_interrupt)
            if isinstance(outcome, int):
                return outcome
            self.say(f"cloudddp: no capacity on target {target.position + 1} ({target.name}, {target.provider}): "
                     f"{outcome.row.error} ({outcome.said}); trying the next")  # fmt: skip
        raise CloudDDPError(f"no capacity on any of the {len(self.targets)} targets; `cloudddp status` lists the "
                            "attempts and what each service said.", exit_code=1)  # fmt: skip

    def attempt(self, run: str, target: Target, request: JobRequest, wait: bool, logs: bool,
                stop_on_interrupt: bool) -> int | MovedOn:  # fmt: skip
        chosen = self.provider_for(target.provider)
        name = attempt_name(target)
        earlier = job_index.open_attempt(name)
        handle = self.adopt(chosen, earlier, target, run) if earlier else None
        if handle is not None and earlier is not None:
            attempt_id, started = earlier.id, earlier.started
        else:
            attempt_id, started = job_index.begin_attempt(run, name, target.position, target.name, chosen.name,
                                                          request.name), self.clock()  # fmt: skip
            try:
                handle = chosen.submit(request)
            except CloudDDPError as exc:
                row = capacity.at_submit(chosen.name, exc)
                state = "moved on" if row else "refused"
                job_index.update_attempt(attempt_id, state=state, reason=str(exc), ended=True)
                if row is None:
                    raise
                return MovedOn(row, str(exc))
            job_index.update_attempt(attempt_id, state="submitted", job_id=handle.job_id)
            self.say(f"cloudddp: submitted {handle.job_id} ({chosen.name}, target {target.position + 1}: "
                     f"{target.name})")  # fmt: skip
            session.index_job(chosen, handle, target.spec, run, request)
        self.record.handle, self.record.final = handle, None
        if not wait:
            return 0
        with session.stop_signals_interrupt():
            try:
                moved = self.before_training(chosen, handle, target, started)
            except KeyboardInterrupt as exc:  # as while following: stop the job or leave it (then adopted next time)
                job_index.update_attempt(attempt_id, state="interrupted")
                signum = exc.signum if isinstance(exc, session.StopSignal) else None
                return session.interrupted(chosen, handle, stop_on_interrupt, self.say, signum)
        if isinstance(moved, MovedOn):
            job_index.update_attempt(attempt_id, state="moved on", reason=moved.said, ended=True)
            return moved
        job_index.update_attempt(attempt_id, state="started")
        code = session.follow_job(chosen, handle, target.spec, logs=logs, stop_on_interrupt=stop_on_interrupt,
                                  say=self.say, record=self.record)  # fmt: skip
        final = self.record.final
        if final is not None:
            job_index.update_attempt(attempt_id, state=final.state.lower(), reason=final.reason, ended=True)
        return code

    def adopt(self, chosen: Provider, earlier: job_index.Attempt, target: Target, run: str) -> JobHandle | None:
        """The job of an attempt a killed client left open, where it still runs or waits; None where it never
        reached the service or has ended (that attempt is closed, and a new one made). Killed before it recorded
        the id (still 'submitting'), the service finds the job by the name it was submitted under; a service that
        cannot be asked stops the launch (CloudDDPError), so that nothing is submitted twice."""
        job_id = earlier.job_id
        if earlier.state == "submitting":
            found = chosen.find_by_name(earlier.job_id, attempt_spec(target))
            if found is None:  # killed before the service had it: nothing to adopt
                job_index.update_attempt(earlier.id, state="never submitted", ended=True)
                return None
            job_id = found
        try:
            current = chosen.status(job_id)
        except CloudDDPError as exc:  # a recorded job the service has forgotten (Slurm's MinJobAge)
            job_index.update_attempt(earlier.id, state="not found", reason=str(exc), ended=True)
            return None
        if current.done:
            job_index.update_attempt(earlier.id, state=current.state.lower(), reason=current.reason, ended=True)
            return None
        handle = JobHandle(provider=chosen.name, job_id=current.job_id or job_id)
        self.say(f"cloudddp: adopting {handle.job_id} ({chosen.name}, target {target.position + 1}: {target.name}), "
                 "submitted by an earlier launch of this job that ended before it finished")  # fmt: skip
        if earlier.state == "submitting":  # killed between submit and record: record it now
            job_index.update_attempt(earlier.id, state="submitted", job_id=handle.job_id)
            session.index_job(chosen, handle, target.spec, run)
        return handle

    def before_training(self, chosen: Provider, handle: JobHandle, target: Target, started: float) -> MovedOn | None:
        """Watch the job until training starts (RUNNING) or it ends; MovedOn where it failed for capacity, or waits
        past pending_timeout for a reason in the table (it is cancelled)."""
        timeout = target.spec.failover.pending_timeout
        while True:
            current = chosen.status(handle.job_id)
            if current.state == "FAILED":
                row = capacity.after_failure(chosen.name, current.reason)
                return MovedOn(row, current.reason) if row else None
            if current.state != "PENDING":
                return None
            row = capacity.while_pending(chosen.name, current.reason)
            if row and self.clock() - started > timeout:
                self.say(f"cloudddp: {handle.job_id} pending over {timeout} s ({current.reason}): cancelling it")
                chosen.cancel(handle.job_id)
                return MovedOn(row, f"pending over {timeout} s: {current.reason}")
            self.sleep(self.poll)
