"""The sbatch script rendered from a job spec: directives, the job step, the environment."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import SOURCES, cli

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.slurm.provider import SlurmProvider


def spec_data(tmp_path: Path, **slurm: Any) -> dict[str, Any]:
    return {"name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 4,
            "hyperparameters": {"epochs": 3}, "environment": {"MODE": "fast", "HF_TOKEN": "hf_secret"},
            "slurm": {"runs_dir": str(tmp_path / "runs"), **slurm}}  # fmt: skip


def script_for(tmp_path: Path, **slurm: Any) -> str:
    return str(SlurmProvider().render(build_spec(spec_data(tmp_path, **slurm))).request.script)


def sbatch_options(script: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH ")]


def test_directives_ask_for_one_task_per_node_with_the_resources(tmp_path: Path) -> None:
    options = sbatch_options(script_for(tmp_path, partition="gpu", account="proj", qos="high", gpus_per_node=8,
                                        cpus_per_task=32, mem="500G", time="2-00:00:00"))  # fmt: skip
    assert options == [
        "--job-name=resnet", "--nodes=4", "--ntasks-per-node=1", "--time=2-00:00:00",
        f"--output={tmp_path}/runs/%x-%j.out", f"--chdir={SOURCES}", "--gpus-per-node=8", "--cpus-per-task=32",
        "--mem=500G", "--partition=gpu", "--account=proj", "--qos=high", "--signal=B:USR1@120",
    ]  # fmt: skip


def test_the_step_runs_one_launcher_per_node_and_fails_the_step_if_one_fails(tmp_path: Path) -> None:
    script = script_for(tmp_path, host_map={"n1": "127.0.0.1"})
    step = next(line for line in script.splitlines() if line.startswith("srun "))
    assert step == ("srun --kill-on-bad-exit=1 --ntasks-per-node=1 --label cloudddp-launch --host-map n1=127.0.0.1 "
                    "train_ddp.py --epochs 3 &")  # fmt: skip


def test_a_container_image_runs_the_step_through_pyxis(tmp_path: Path) -> None:
    script = script_for(tmp_path, container_image="nvcr.io#nvidia/pytorch:24.05-py3", container_mounts=["/fsx:/fsx"])
    assert (f"srun --kill-on-bad-exit=1 --ntasks-per-node=1 --label '--container-image=nvcr.io#nvidia/pytorch:24.05-py3' "
            f"--container-workdir={SOURCES} --container-mounts=/fsx:/fsx cloudddp-launch") in script  # fmt: skip


def test_preemption_signal_and_requeue(tmp_path: Path) -> None:
    script = script_for(tmp_path, signal_seconds=300, requeue=True)
    options = sbatch_options(script)
    assert "--signal=B:USR1@300" in options and "--requeue" in options and "--open-mode=append" in options
    assert "trap" in script and 'kill -USR1 "$step"' in script
    assert "--signal" not in " ".join(sbatch_options(script_for(tmp_path, signal_seconds=0)))


def test_environment_activation_and_secrets(tmp_path: Path) -> None:
    request = SlurmProvider().render(build_spec(spec_data(tmp_path, conda_env="pt", setup=["module load cuda"])))
    script = request.request.script
    assert "export MODE=fast" in script and "hf_secret" not in script and "hf_secret" not in request.to_yaml()
    assert request.request.secret_names == ["HF_TOKEN"]  # passed through sbatch's environment instead
    assert script.index("module load cuda") < script.index("conda activate pt") < script.index("srun ")
    assert 'export CLOUDDDP_CHECKPOINT_DIR="$CLOUDDDP_RUN_DIR/checkpoints"' in script


def test_dry_run_prints_the_script() -> None:
    ok = cli("launch", "-p", "slurm", "--dry-run", "--nodes", "2", "--partition", "gpu", str(SOURCES / "train_ddp.py"))
    assert ok.returncode == 0 and ok.stdout.startswith("#!/bin/bash\n") and "#SBATCH --partition=gpu" in ok.stdout


def test_the_estimator_switches_to_slurm_and_pbs_with_their_settings() -> None:
    from cloudddp import Estimator

    local = Estimator(entry_point="train_ddp.py", source_dir=str(SOURCES), nodes=2, hyperparameters={"epochs": 1})
    slurm = local.with_provider("slurm", partition="gpu", gpus_per_node=4)
    assert "#SBATCH --partition=gpu" in slurm.dry_run() and "#SBATCH --gpus-per-node=4" in slurm.dry_run()
    assert "#PBS -l select=2:ncpus=4" in local.with_provider("pbs", ncpus=4).dry_run()
    with pytest.raises(CloudDDPError, match="unknown option"):
        local.with_provider("slurm", partion="gpu")


def elastic_script(tmp_path: Path, **top: Any) -> str:
    data = {**spec_data(tmp_path, launcher_args=["--torchrun-arg=--rdzv-conf=last_call_timeout=5"]), "min_nodes": 2,
            "max_restarts": 3, **top}  # fmt: skip
    return str(SlurmProvider().render(build_spec(data)).request.script)


# Expected flags from Slurm's own docs and source: sbatch(1)/srun(1) `--nodes=MIN-MAX`, `--no-kill`,
# `--kill-on-bad-exit`, `--wait` (SchedMD/slurm doc/man/man1/sbatch.1 and srun.1, commit
# 284c3b95f08a2dc2478499837b03355e1b9c5c75); in 22.05.8 (d525b6872a106d32916b33a8738f12510ec7cf04)
# src/plugins/launch/slurm/launch_slurm.c `_task_finish` kills the step on a bad exit only with kill-on-bad-exit.
def test_an_elastic_job_asks_for_a_node_range_that_survives_a_lost_node(tmp_path: Path) -> None:
    script = elastic_script(tmp_path)
    options = sbatch_options(script)
    assert "--nodes=2-4" in options and "--no-kill" in options  # sbatch(1): a failed node ends the job otherwise
    assert "--ntasks-per-node=1" not in options  # it would hold the allocation at MIN nodes (script.py)
    step = next(line for line in script.splitlines() if line.startswith("srun "))
    assert step == (
        "srun --no-kill --kill-on-bad-exit=0 --wait=0 --ntasks-per-node=1 --label cloudddp-launch --nnodes=2:4 "
        "--rdzv-backend=c10d --max-restarts=3 --torchrun-arg=--rdzv-conf=last_call_timeout=5 train_ddp.py --epochs 3 &"
    )  # the user's launcher_args come last, so they win
    assert 'export CLOUDDDP_EXIT_DIR="$CLOUDDDP_RUN_DIR/exit"' in script
    etcd = elastic_script(tmp_path, rdzv_backend="etcd-v2", rdzv_endpoint="etcd.example:2379")
    assert "--rdzv-backend=etcd-v2 --max-restarts=3 --rdzv-endpoint=etcd.example:2379" in etcd
    static = script_for(tmp_path)
    assert "--no-kill" not in static and "CLOUDDDP_EXIT_DIR" not in static and "--nodes=4" in sbatch_options(static)
    # The CLI's range reaches the script (the Slurm provider declares supports_elastic; SageMaker/OCI refuse).
    from_cli = cli(
        "launch", "-p", "slurm", "--dry-run", "--nodes", "1:2", "--max-restarts", "2", str(SOURCES / "train_ddp.py")
    )
    assert (
        from_cli.returncode == 0 and "#SBATCH --nodes=1-2\n" in from_cli.stdout and "--nnodes=1:2" in from_cli.stdout
    ), from_cli.stderr


# A stand-in for srun with srun's documented exit code (srun(1) RETURN VALUE: the highest of every task's, 128+N
# for a signal), and the records the launchers leave (cloudddp/launcher/exit_record.py): "" = none (lost node).
FAKE_SRUN = """#!/bin/bash
i=0
for record in $FAKE_RECORDS; do
  [ "$record" = lost ] || { mkdir -p "$CLOUDDDP_EXIT_DIR"; echo "$record" > "$CLOUDDDP_EXIT_DIR/node-$i"; }
  i=$((i + 1))
done
exit "$FAKE_SRUN_CODE"
"""


@pytest.mark.process
@pytest.mark.parametrize(
    ("records", "srun_code", "job_code", "said"),
    [
        ("0 lost", 137, 0, "node(s) 1 were lost and the other 1 finished: the elastic job succeeded"),
        ("0 0", 0, 0, ""),
        ("1 lost", 137, 137, ""),  # the survivor failed too: the job failed
        ("0 143", 143, 143, ""),  # a node that failed (or was stopped) is no lost node
        ("lost lost", 137, 137, ""),  # nobody finished
    ],
)
def test_an_elastic_job_succeeds_when_the_survivors_finish(
    tmp_path: Path, records: str, srun_code: int, job_code: int, said: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(0o755)
    script = elastic_script(tmp_path, nodes=2, min_nodes=1)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_NAME": "resnet", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NUM_NODES": "2", "FAKE_RECORDS": records, "FAKE_SRUN_CODE": str(srun_code)}  # fmt: skip
    ran = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert ran.returncode == job_code, ran.stdout + ran.stderr
    assert said in ran.stdout and (said or "elastic job succeeded" not in ran.stdout)
