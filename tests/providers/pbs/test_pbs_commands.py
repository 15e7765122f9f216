"""The PBS provider's qsub / qstat / qdel calls.

- Against Slurm's Torque wrappers (Debian's slurm-wlm-torque: SchedMD/slurm contribs/torque/*.pl) on
  the real two-node test Slurm, where they behave like PBS: qsub takes the #PBS directives (sbatch
  reads them), `qstat -f` prints Torque's text format, qdel cancels. The wrappers know no
  `qstat -F json` (PBS Pro only), so the provider's fallback to the text format is what runs there.
- `qstat -x -f -F json` itself against a stand-in printing a record in OpenPBS's layout
  (openpbs/openpbs src/cmds/qstat.c and doc/man1/qstat.1B, commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import SOURCES
from helpers.slurm_cluster import SlurmCluster, slurm_cluster

from cloudddp.job_spec import build_spec
from cloudddp.providers.base import JobRequest
from cloudddp.providers.pbs.provider import PBSProvider
from cloudddp.providers.pbs.script import QsubRequest

SPEC = {"name": "sleepy", "entry_point": "allreduce_check.py", "source_dir": str(SOURCES), "nodes": 2}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    if shutil.which("qsub") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the PBS wrapper tests: slurm-wlm-torque is missing (see .ci/run)")
        pytest.skip("needs Slurm's Torque wrappers (apt-get install -y slurm-wlm-torque)")
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), nodes=2) as running:
        yield running


def wait_for(provider: PBSProvider, job_id: str, done: bool, timeout: float = 60) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = provider.status(job_id)
        if current.done if done else current.state == "RUNNING":
            return current
        time.sleep(0.5)
    raise AssertionError(f"job {job_id}: {provider.status(job_id)}")


@pytest.mark.slow
@pytest.mark.slurm
def test_qsub_qstat_qdel_through_the_torque_wrappers(cluster: SlurmCluster, tmp_path: Path) -> None:
    provider = PBSProvider(environ=cluster.env)
    script = "#!/bin/bash\n#PBS -N sleepy\n#PBS -l select=2:ncpus=1\n#PBS -l walltime=00:05:00\n#PBS -j oe\nsleep 300\n"
    request = JobRequest(provider="pbs", name="sleepy", spec=build_spec(SPEC),
                         request=QsubRequest(script=script, runs_dir=str(tmp_path)))  # fmt: skip
    before = time.time()
    job_id = provider.submit(request).job_id
    running = wait_for(provider, job_id, done=False)
    # The directives were honoured: two nodes, the name and walltime from the #PBS lines.
    assert running.nodes == {"n1": "R", "n2": "R"}  # type: ignore[attr-defined]
    full = provider.describe(job_id)
    assert (full["Job_Name"], full["Resource_List.walltime"]) == ("sleepy", "00:05:00")
    provider.cancel(job_id)
    stopped = wait_for(provider, job_id, done=True)
    assert stopped.state == "STOPPED"  # type: ignore[attr-defined]
    # The timeline from the wrapper's qstat -f (qtime, mtime, ctime), asked from a far time zone (UTC+13:45).
    events = PBSProvider(environ={**cluster.env, "TZ": "Pacific/Chatham"}).events(job_id)
    assert [(event.node, event.what) for event in events] == [("", "submitted"), ("n1", "started"),
                                                              ("n2", "started"), ("", "stopped")], events  # fmt: skip
    assert before - 1 <= events[0].time <= events[1].time <= events[3].time <= time.time(), (before, events)
    queue = subprocess.run(["squeue", "-h", "-j", job_id], env=cluster.env, capture_output=True, text=True)
    assert queue.stdout.strip() == ""
    assert not list(tmp_path.glob("*.pbs")), "the submitted script file was left behind"
    # The job's own output came back to the runs folder, where qsub ran (not the caller's folder).
    assert list(tmp_path.glob("*.o*")) and not list(Path.cwd().glob("tmp*.pbs.*"))


@pytest.mark.slow
@pytest.mark.slurm
def test_a_qsub_refusal_shows_the_schedulers_reason(cluster: SlurmCluster, tmp_path: Path) -> None:
    provider = PBSProvider(environ=cluster.env)
    spec = build_spec({**SPEC, "pbs": {"queue": "no-such-queue", "runs_dir": str(tmp_path)}})
    with pytest.raises(Exception, match=r"(?s)qsub failed: .*invalid partition specified: no-such-queue") as caught:
        provider.submit(provider.render(spec))
    assert type(caught.value).__name__ == "CloudDDPError"


# OpenPBS's `qstat -f -F json` layout: Jobs -> id -> attributes; Variable_List is an object.
PBS_PRO_RECORD = {
    "timestamp": 1479277336, "pbs_version": "22.05.11", "pbs_server": "pbs-head",
    "Jobs": {"1234.pbs-head": {
        "Job_Name": "resnet", "Job_Owner": "me@login1", "job_state": "F", "queue": "workq",
        "exec_host": "cn01/0*8+cn02/0*8", "Exit_status": 0,
        "Resource_List": {"select": "2:ncpus=8:ngpus=1", "walltime": "02:00:00"},
        "Variable_List": {"PBS_O_WORKDIR": "/home/me/project", "CLOUDDDP_RUNS_DIR": "/scratch/me/runs"},
    }},
}  # fmt: skip


@pytest.mark.process
def test_pbs_pro_json_status_is_read(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    record = tmp_path / "record.json"
    record.write_text(json.dumps(PBS_PRO_RECORD))
    (bin_dir / "qstat").write_text(f'#!/bin/sh\necho "$@" >> {calls}\ncat {record}\n')
    (bin_dir / "qstat").chmod(0o755)
    provider = PBSProvider(environ={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    current = provider.status("1234.pbs-head")
    assert (current.state, current.exit_code) == ("SUCCEEDED", 0)
    assert current.nodes == {"cn01": "F", "cn02": "F"}
    assert current.artifacts == "/scratch/me/runs/resnet-1234.pbs-head/model"
    assert calls.read_text().split("\n")[0] == "-x -f -F json 1234.pbs-head"
    PBS_PRO_RECORD["Jobs"]["1234.pbs-head"]["Exit_status"] = 271  # type: ignore[index]  # qdel of a running job
    record.write_text(json.dumps(PBS_PRO_RECORD))
    assert provider.status("1234.pbs-head").state == "STOPPED"


@pytest.mark.process
@pytest.mark.parametrize(("code", "said"), [(-29, "exceeding its walltime"), (-27, "exceeding its mem"), (1, None)])
def test_a_job_pbs_killed_for_a_limit_says_which(tmp_path: Path, code: int, said: str | None) -> None:
    # OpenPBS's Exit_status for a job it killed over a limit: JOB_EXEC_KILL_WALLTIME -29, _MEM -27
    # (openpbs/openpbs cd7ab5ed src/include/job.h); a script's own exit 1 names no limit.
    record = json.loads(json.dumps(PBS_PRO_RECORD))
    record["Jobs"]["1234.pbs-head"]["Exit_status"] = code
    (tmp_path / "record.json").write_text(json.dumps(record))
    (tmp_path / "qstat").write_text(f"#!/bin/sh\ncat {tmp_path / 'record.json'}\n")
    (tmp_path / "qstat").chmod(0o755)
    current = PBSProvider(environ={"PATH": f"{tmp_path}:/usr/bin:/bin"}).status("1234.pbs-head")
    assert (current.state, current.exit_code) == ("FAILED", code)
    assert (said in current.reason) if said else current.reason == "job_state=F", current.reason
