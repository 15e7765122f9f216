"""A short PBS job id (`1234`): qstat adds the default server (openpbs/openpbs src/lib/Libcmds/get_server.c
get_server, commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a) and answers for `1234.pbs-head`, and the job script
named the run folder with that full $PBS_JOBID. status and logs must find the same folder for both forms."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cloudddp.providers.pbs.provider import PBSProvider

TEXT_RECORD = """Job Id: 1234.pbs-head
    Job_Name = resnet
    job_state = C
    exec_host = cn01/0
    Variable_List = PBS_O_WORKDIR=/home/me,CLOUDDDP_RUNS_DIR={runs}
"""


def provider_with(tmp_path: Path, form: str) -> PBSProvider:
    """A finished job's run folder under tmp_path/runs, and a qstat stand-in printing its record in `form`."""
    runs = tmp_path / "runs"
    run = runs / "resnet-1234.pbs-head"
    for folder in ("logs", "exit", "model"):
        (run / folder).mkdir(parents=True)
    (run / "logs" / "cn01.log").write_text("epoch 1 acc 0.9\n")
    (run / "exit" / "cn01").write_text("0\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if form == "json":
        job = {"Job_Name": "resnet", "job_state": "F", "exec_host": "cn01/0*8", "Exit_status": 0,
               "Variable_List": {"CLOUDDDP_RUNS_DIR": str(runs)}}  # fmt: skip
        (tmp_path / "record").write_text(json.dumps({"pbs_server": "pbs-head", "Jobs": {"1234.pbs-head": job}}))
        script = f"#!/bin/sh\ncat {tmp_path / 'record'}\n"
    else:  # Torque-style: no JSON (qstat -F fails), text without exit_status
        (tmp_path / "record").write_text(TEXT_RECORD.format(runs=runs))
        script = f'#!/bin/sh\ncase "$*" in *json*) exit 2 ;; esac\ncat {tmp_path / "record"}\n'
    (bin_dir / "qstat").write_text(script)
    (bin_dir / "qstat").chmod(0o755)
    return PBSProvider(environ={"PATH": f"{bin_dir}:/usr/bin:/bin"})


@pytest.mark.process
@pytest.mark.parametrize("form", ["json", "text"])
@pytest.mark.parametrize("job_id", ["1234", "1234.pbs-head"])
def test_status_and_logs_read_the_run_folder_of_the_full_id(tmp_path: Path, form: str, job_id: str) -> None:
    provider = provider_with(tmp_path, form)
    current = provider.status(job_id)
    assert (current.job_id, current.state, current.exit_code) == (job_id, "SUCCEEDED", 0)
    assert current.artifacts == str(tmp_path / "runs" / "resnet-1234.pbs-head" / "model")
    assert list(provider.logs(job_id)) == ["[cn01] epoch 1 acc 0.9"]
