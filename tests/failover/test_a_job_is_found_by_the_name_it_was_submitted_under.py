"""`find_by_name` of the schedulers whose service assigns the id (Slurm, PBS): the commands they run and how they
read the answer, over the commands' output as the tools print it (no process is started: `run_tool` answers).
The Slurm hook against the real Slurm test cluster, and PBS's qstat fallback against Slurm's Torque wrappers, are
in test_slurm_partition_down_and_adoption.py; OCI's and Kubernetes' against their fakes beside it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.pbs import provider as pbs
from cloudddp.providers.slurm import provider as slurm

SPEC = build_spec({"name": "fo", "entry_point": "train.py"})


class Tools:
    """Stands in for run_tool: each command's stdout by its name, every argv kept."""

    def __init__(self, **stdout: str) -> None:
        self.stdout, self.calls = stdout, []

    def __call__(self, argv: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        if argv[0] not in self.stdout:
            raise CloudDDPError(f"{argv[0]!r} was not found on PATH")
        return subprocess.CompletedProcess(argv, 0, self.stdout[argv[0]], "")


def test_slurm_asks_squeue_for_the_users_jobs_of_that_name_and_takes_the_newest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tools = Tools(squeue="41 fo-1-ab\n57 fo-1-ab\n60 fo-1-ab-longer\n")  # squeue --format='%i %j'
    monkeypatch.setattr(slurm, "run_tool", tools)
    assert slurm.SlurmProvider(environ={}).find_by_name("fo-1-ab", SPEC) == "57"
    assert tools.calls == [["squeue", "--me", "--noheader", "--format=%i %j", "--name=fo-1-ab"]]


def test_slurm_finds_none_where_the_queue_has_no_such_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm, "run_tool", Tools(squeue="60 another\n"))
    assert slurm.SlurmProvider(environ={}).find_by_name("fo-1-ab", SPEC) is None


def test_slurm_does_not_give_squeue_a_name_it_would_split_at_its_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    tools = Tools(squeue="7 a\n8 a,b-1-ab\n")
    monkeypatch.setattr(slurm, "run_tool", tools)
    assert slurm.SlurmProvider(environ={}).find_by_name("a,b-1-ab", SPEC) == "8"
    assert not any(word.startswith("--name") for word in tools.calls[0])


def test_slurm_that_cannot_be_asked_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm, "run_tool", Tools())
    with pytest.raises(CloudDDPError, match="squeue"):
        slurm.SlurmProvider(environ={}).find_by_name("fo-1-ab", SPEC)


def qselect_on_path(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "qselect").write_text("")
    (tmp_path / "qselect").chmod(0o755)
    return {"PATH": str(tmp_path), "USER": "ada"}


def test_pbs_selects_with_qselect_by_name_and_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # qselect.1B: ids separated by white space, each <sequence number>.<server name>[@<server name>]
    tools = Tools(qselect="1234.pbs01\n1240.pbs01@pbs01 998.pbs01\n")
    monkeypatch.setattr(pbs, "run_tool", tools)
    assert pbs.PBSProvider(environ=qselect_on_path(tmp_path)).find_by_name("fo-1-ab", SPEC) == "1240.pbs01"
    assert tools.calls == [["qselect", "-N", "fo-1-ab", "-u", "ada"]]


def test_pbs_finds_none_where_qselect_selects_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pbs, "run_tool", Tools(qselect=""))
    assert pbs.PBSProvider(environ=qselect_on_path(tmp_path)).find_by_name("fo-1-ab", SPEC) is None


# Slurm's Torque wrapper qstat -f (SchedMD/slurm contribs/torque/qstat.pl print_job_full): a tab before each key.
QSTAT_FULL = """Job Id:\t31
\tJob_Name = fo-1-ab
\tJob_Owner = ada@login1
\tjob_state = C
Job Id:\t35
\tJob_Name = fo-1-ab
\tJob_Owner = ada@login1
\tjob_state = Q
Job Id:\t36
\tJob_Name = fo-1-abc
\tJob_Owner = ada@login1
\tjob_state = R
"""


def test_pbs_without_qselect_reads_the_users_jobs_from_qstat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = Tools(qstat=QSTAT_FULL)
    monkeypatch.setattr(pbs, "run_tool", tools)
    provider = pbs.PBSProvider(environ={"PATH": str(tmp_path), "USER": "ada"})  # no qselect there
    assert provider.find_by_name("fo-1-ab", SPEC) == "35"  # 31 has ended (C), 36 is another name, 37 grace's
    assert tools.calls == [["qstat", "-f"]]  # the wrapper prints its short table once -u is given
    assert provider.find_by_name("fo-2-cd", SPEC) is None
