"""A job launched on any provider is listed and cancelled by its name alone, no `-p` (issue 37): the job index
remembers where each job runs. One case per provider against its real local part: SageMaker on the moto server,
OCI on the loopback service, Kubernetes on the API fake, Slurm on a real Slurm, PBS through Slurm's Torque wrappers
(qsub/qstat/qdel) on that Slurm. Each launches with `--no-wait`, finds its job in `cloudddp list` under its name
and provider, cancels it by name, and checks the service was asked to stop it."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import PYTHON, SOURCES, clean_env, cli, wait_until
from helpers.slurm_cluster import SlurmCluster, slurm_cluster

NAME = "find-me"
# The state a listed job may show: whatever the service says, so long as it answered (not "unknown (...)").
ANSWERED = ("PENDING", "RUNNING")


@dataclass
class Target:
    """One provider's service, ready for a launch: the environment and launch arguments that point at it, what to
    do once the job is submitted (make it run, where the service has no scheduler of its own), and whether the
    service has recorded a stop of the job (given its id and the test's environment)."""

    env: dict[str, str]
    launch: list[str]
    stopped: Callable[[str, dict[str, str]], bool]
    submitted: Callable[[str], None] = lambda job_id: None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The real Slurm the Slurm and PBS cases share (Debian's slurm-wlm; PBS through slurm-wlm-torque's wrappers)."""
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), nodes=2) as running:
        yield running


def sagemaker(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    from helpers.sagemaker_fixtures import register_stop_training_job, set_job_status

    env = request.getfixturevalue("moto_server")
    stopped = register_stop_training_job(request.getfixturevalue("monkeypatch"))
    script = tmp_path / "project" / "train.py"
    script.parent.mkdir()
    script.write_text("print('training')\n")
    # moto completes a job at once; a real one runs for a while, which is what a cancel needs.
    return Target(env, ["-p", "sagemaker", str(script)], lambda job, _: stopped == [job],
                  lambda job: set_job_status(job, "InProgress", "Training"))  # fmt: skip


def oci(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    from helpers.oci_loopback_server import (
        COMPARTMENT,
        IMAGE,
        IMAGE_ENV,
        LOG_GROUP,
        PROJECT,
        QUICK_SOURCES,
        WORK_DIR,
        ThrowawayKey,
    )

    key = ThrowawayKey.generate()
    # hold_states: the run stays ACCEPTED until a GetJobRun (here: list's) has seen it, whatever the machine's load.
    server = request.getfixturevalue("oci_service")(key, node_env=clean_env(IMAGE_ENV), hold_states=True)
    env = {"CLOUDDDP_OCI_SERVICE_ENDPOINT": server.url, "OCI_CONFIG_FILE": str(key.write_config(tmp_path / ".oci"))}
    launch = ["-p", "oci", "--compartment", COMPARTMENT, "--project", PROJECT, "--image", IMAGE, "--work-dir",
              WORK_DIR, "--log-group", LOG_GROUP, str(QUICK_SOURCES / "quick_train.py"), "--", "--wait"]  # fmt: skip
    return Target(env, launch, lambda job, _: bool(server.calls("POST", rf"/jobRuns/{re.escape(job)}/actions/cancel")))


def kubernetes(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    fake, kubeconfig = request.getfixturevalue("kube_api")
    launch = ["-p", "kubernetes", "--image", "registry.example.com/train:1", "-i", "train=pvc://datasets/demo",
              str(SOURCES / "train_ddp.py")]  # fmt: skip

    def running(job_id: str) -> None:  # the operator's part: the fake has none
        plural, namespace, name = job_id.split("/")
        fake.set_conditions(plural, namespace, name, [{"type": "Running", "status": "True"}])

    def deleted(job_id: str, _: dict[str, str]) -> bool:  # the object was there: `list` read it
        return tuple(job_id.split("/")) not in fake.objects

    return Target({"KUBECONFIG": str(kubeconfig)}, launch, deleted, running)


def scheduler(provider: str, request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """Slurm, or PBS through the Torque wrappers, on the real test Slurm. The job's setup line sleeps: it runs (or
    waits for a node) until cancelled, and no launcher starts."""
    if provider == "pbs" and shutil.which("qsub") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the PBS wrapper tests: slurm-wlm-torque is missing (see .ci/run)")
        pytest.skip("needs Slurm's Torque wrappers (apt-get install -y slurm-wlm-torque)")
    running: SlurmCluster = request.getfixturevalue("cluster")
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('training')\n")
    spec = {"entry_point": "train.py", "source_dir": str(source), "nodes": 1,
            provider: {"runs_dir": str(tmp_path / "runs"), "setup": ["sleep 300"],
                       "launcher": f"{PYTHON} -m cloudddp.launcher", "host_map": {"n1": "127.0.0.1"}}}  # fmt: skip
    spec_file = tmp_path / "job.yaml"
    spec_file.write_text(json.dumps(spec))  # JSON is YAML
    env = {key: value for key, value in running.env.items() if key != "XDG_STATE_HOME"}  # (the test sets its own)

    def stopped(job_id: str, env: dict[str, str]) -> bool:  # what the scheduler says now, through cloudddp, by name
        return cli("status", NAME, env=env).stdout.startswith(f"{job_id}: STOPPED")

    return Target(env, ["-p", provider, "-f", str(spec_file)], stopped)


TARGETS: dict[str, Callable[[pytest.FixtureRequest, Path], Target]] = {
    "sagemaker": sagemaker,
    "oci": oci,
    "kubernetes": kubernetes,
    "slurm": lambda request, tmp_path: scheduler("slurm", request, tmp_path),
    "pbs": lambda request, tmp_path: scheduler("pbs", request, tmp_path),
}


@pytest.mark.parametrize(
    "provider",
    [
        pytest.param("sagemaker", marks=pytest.mark.moto),
        pytest.param("oci", marks=pytest.mark.oci_service),
        pytest.param("kubernetes", marks=pytest.mark.kube_api),
        pytest.param("slurm", marks=pytest.mark.slurm),
        pytest.param("pbs", marks=pytest.mark.slurm),
    ],
)
def test_a_launched_job_is_listed_and_cancelled_by_its_name_alone(
    provider: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    target = TARGETS[provider](request, tmp_path)
    env = {**target.env, "XDG_STATE_HOME": str(tmp_path / "state")}  # this test's own job index
    launched = cli("launch", "--no-wait", "--name", NAME, *target.launch, env=env, cwd=tmp_path)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    found = re.search(rf"submitted (\S+) \({provider}\)", launched.stdout)
    assert found, launched.stdout
    job_id = found.group(1)
    target.submitted(job_id)

    listed = cli("list", env=env, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split()[:3] == ["NAME", "PROVIDER", "STATE"]
    assert row.split()[:3] in ([NAME, provider, state] for state in ANSWERED), listed.stdout  # the service answered
    assert row.split()[3] == "1" and row.split()[-1] == job_id  # its nodes as launched, its id last

    cancelled = cli("cancel", NAME, env=env, cwd=tmp_path)  # no -p: the index knows where it runs
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert f"asked {provider} to stop {job_id}" in cancelled.stdout
    wait_until(lambda: target.stopped(job_id, env), 60, f"{provider} to record the stop of {job_id}")
