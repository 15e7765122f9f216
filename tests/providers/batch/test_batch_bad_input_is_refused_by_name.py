"""Bad input to the Slurm and PBS providers is refused by the field's name, before any script exists: values a
#SBATCH or #PBS line cannot carry (a newline would end the directive and run the rest as a command), and spec
fields no batch job can take."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import SOURCES, cli

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.pbs.provider import PBSProvider
from cloudddp.providers.slurm.provider import SlurmProvider

PROVIDERS = {"slurm": SlurmProvider, "pbs": PBSProvider}


def render(tmp_path: Path, provider: str, section: dict[str, Any], **fields: Any) -> Any:
    data = {"name": "check", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2,
            provider: {"runs_dir": str(tmp_path / "runs"), **section}, **fields}  # fmt: skip
    return PROVIDERS[provider]().render(build_spec(data))


@pytest.mark.parametrize(
    ("provider", "section", "message"),
    [
        ("slurm", {"partition": "gpu\necho INJECTED"}, "slurm.partition='gpu\\necho INJECTED': a newline or control"),
        ("slurm", {"account": "a\tb"}, "slurm.account='a\\tb': a newline or control character"),
        ("slurm", {"sbatch_args": ["--exclusive", "--comment=x\nrm -rf ~"]}, "slurm.sbatch_args[1]='--comment=x\\nrm -rf ~'"),
        ("slurm", {"mem": "64 G"}, "slurm.mem: Value error, must be a Slurm size"),
        ("slurm", {"mem": "64G\n"}, "slurm.mem: Value error, must be a Slurm size"),
        ("slurm", {"time": "1:00:00\n"}, "slurm.time: Value error, must be a Slurm time"),
        ("slurm", {"runs_dir": "/tmp/a\\b"}, "slurm.runs_dir='/tmp/a\\\\b': sbatch reads a backslash"),
        ("pbs", {"queue": "gpu\necho INJECTED"}, "pbs.queue='gpu\\necho INJECTED': a newline or control character"),
        ("pbs", {"account": 'a "b"'}, "pbs.account='a \"b\"': a double quote cannot go"),
        ("pbs", {"qsub_args": ["-l pmem=4gb", "-m n\necho INJECTED"]}, "pbs.qsub_args[1]='-m n\\necho INJECTED'"),
        ("pbs", {"runs_dir": "/tmp/it's here"}, "pbs.runs_dir=\"/tmp/it's here\": qsub's -v list cannot carry a quote"),
        ("pbs", {"walltime": "01:00:00\n"}, "pbs.walltime: Value error, must be a PBS walltime"),
        ("pbs", {"mem": "32gb\n"}, "pbs.mem: Value error, must be a PBS size"),
        ("slurm", {"time": "2 hours"}, "slurm.time: Value error, must be a Slurm time"),
        ("slurm", {"gpus_per_node": -1}, "slurm.gpus_per_node: Input should be greater than or equal to 0"),
        ("slurm", {"partiton": "gpu"}, "slurm.partiton: unknown field"),
        ("pbs", {"walltime": "2h"}, "pbs.walltime: Value error, must be a PBS walltime"),
        ("pbs", {"starter": "ssh"}, "pbs.starter: Input should be 'pbsdsh' or 'mpiexec'"),
        ("pbs", {"ncpus": 0}, "pbs.ncpus: Input should be greater than or equal to 1"),
        ("pbs", {"mem": "32 GB"}, "pbs.mem: Value error, must be a PBS size"),
        ("pbs", {"mem": "1.5gb"}, "pbs.mem: Value error, must be a PBS size"),
        ("pbs", {"queu": "gpu"}, "pbs.queu: unknown field"),
        ("pbs", {"place": "spread"}, "pbs.place: Value error, 'spread' is not a PBS placement"),
        ("pbs", {"place": "scatter:pack"}, "'scatter:pack' is not a PBS placement"),
        ("pbs", {"place": "pack:excl"}, "pbs.place='pack:excl' puts all 2 chunks on one host"),
        ("pbs", {"resources": "nodes", "mem": "32gb"}, "pbs: Value error, mem='32gb' is a per-node amount of a select chunk"),
    ],
)  # fmt: skip
def test_settings_a_directive_or_their_section_cannot_take_are_refused_by_name(
    tmp_path: Path, provider: str, section: dict[str, Any], message: str
) -> None:
    with pytest.raises(CloudDDPError) as caught:
        render(tmp_path, provider, section)
    assert message in str(caught.value)


@pytest.mark.parametrize(("provider", "flag"), [("slurm", "--partition"), ("pbs", "--queue")])
def test_a_newline_in_a_directive_from_the_cli_exits_2_without_a_script(provider: str, flag: str) -> None:
    result = cli("render", "-p", provider, flag, "gpu\necho INJECTED", "train_ddp.py", cwd=SOURCES)
    assert result.returncode == 2 and f"{provider}.{flag[2:]}=" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("fields", "section", "message"),
    [
        ({"nodes": 0}, {}, "nodes: Input should be greater than or equal to 1"),
        ({"inputs": {"train": "s3://bucket/x"}}, {}, "inputs.train='s3://bucket/x': the {provider} provider reads folders on the cluster's shared filesystem"),
        ({"inputs": {"train": "/no/such/folder"}}, {}, "inputs.train='/no/such/folder' does not exist"),
        ({"entry_point": "missing.py"}, {}, "entry_point 'missing.py': the training script"),
        ({"environment": {"BAD NAME": "x"}}, {}, "environment variable name 'BAD NAME' is not a valid shell variable name"),
        ({}, {"conda_env": "pt", "venv": "/opt/venv"}, "choose one environment to activate"),
    ],
)  # fmt: skip
def test_spec_fields_no_batch_job_can_take_are_named(
    tmp_path: Path, provider: str, fields: dict[str, Any], section: dict[str, Any], message: str
) -> None:
    with pytest.raises(CloudDDPError) as caught:
        render(tmp_path, provider, section, **fields)
    assert message.format(provider=provider) in str(caught.value)


@pytest.mark.parametrize(
    ("provider", "flags", "message"),
    [("slurm", ["--time", "soon"], "slurm.time"), ("slurm", ["--nodes", "0"], "nodes: "),
     ("pbs", ["--walltime", "2h"], "pbs.walltime: Value error, must be a PBS walltime"), ("pbs", ["--nodes", "0"], "nodes: "),
     ("pbs", ["--pbs-mem", "lots"], "pbs.mem: Value error, must be a PBS size")],
)  # fmt: skip
def test_bad_input_from_the_cli_is_one_paragraph_and_exit_2(
    tmp_path: Path, provider: str, flags: list[str], message: str
) -> None:
    result = cli("launch", "-p", provider, *flags, "--dry-run", str(SOURCES / "train_ddp.py"), cwd=tmp_path)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == "" and not list(tmp_path.iterdir())
