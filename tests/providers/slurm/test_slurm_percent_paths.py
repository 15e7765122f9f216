"""A run folder with % in its path: cloudddp writes it as %% in #SBATCH --output, and Slurm up to 23.x (the
project's 22.05 included) prints scontrol's StdOut with the %% still in it (src/api/job_info.c _fname_format at
slurm-22-05-8-1 and slurm-23-11-0-1); from 24.11 it prints the real path. Both must lead to the real file.
A scontrol stand-in prints the job record as each version does."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudddp.providers.slurm.provider import SlurmProvider


def provider_for(tmp_path: Path, runs: Path, shown: str) -> SlurmProvider:
    (runs / "weird-7" / "model").mkdir(parents=True)
    (runs / "weird-7.out").write_text("0: epoch 1\n1: epoch 1\nbatch line\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "record"
    record.write_text(
        f"JobId=7 JobName=weird JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=n[1-2] StdOut={shown}\n"
    )
    (bin_dir / "scontrol").write_text(f'#!/bin/sh\ncat "{record}"\n')
    (bin_dir / "scontrol").chmod(0o755)
    return SlurmProvider(environ={"PATH": f"{bin_dir}:/usr/bin:/bin"})


@pytest.mark.process
@pytest.mark.parametrize("slurm", ["22.05", "24.11"])
def test_logs_and_model_come_from_the_real_file(tmp_path: Path, slurm: str) -> None:
    runs = tmp_path / "out dir 50%"
    shown = str(runs).replace("%", "%%") if slurm == "22.05" else str(runs)
    provider = provider_for(tmp_path, runs, f"{shown}/weird-7.out")
    assert list(provider.logs("7")) == ["[n1] epoch 1", "[n2] epoch 1", "[batch] batch line"]
    current = provider.status("7")
    assert (current.state, current.artifacts) == ("SUCCEEDED", str(runs / "weird-7" / "model"))


@pytest.mark.process
def test_a_literal_double_percent_shown_by_a_newer_slurm_stays(tmp_path: Path) -> None:
    runs = tmp_path / "a%%b"  # written as %%%% by cloudddp; Slurm 24.11+ shows the real %%
    provider = provider_for(tmp_path, runs, f"{runs}/weird-7.out")
    assert provider.status("7").artifacts == str(runs / "weird-7" / "model")
    assert len(list(provider.logs("7"))) == 3
