"""The examples under infra/ are exactly what the renderers print for the job specs beside them, the
Kubernetes ones are valid against the Kubeflow CRD schemas (tests/data/schemas, copied from
kubeflow/training-operator v1.9.0 and kubeflow/trainer), and the launcher plans every pod right from
the variables the operators inject.

To regenerate after an intended renderer change: CLOUDDDP_REGENERATE_EXAMPLES=1 pytest tests/test_infra_manifests.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from helpers import REPO, SOURCES, run_cli, run_launcher
from helpers.kubernetes_apiserver import crd_validator, trainjob_webhook_errors

INFRA = REPO / "infra"
# Paths of this checkout are printed as this folder, so the examples read the same on every machine.
SHOWN_AS = "/home/me/project"
EXAMPLES = {
    "kubernetes/pytorchjob.yaml": ["-p", "kubernetes", "-f", "infra/kubernetes/job.yaml"],
    "kubernetes/pytorchjob-s3.yaml": ["-p", "kubernetes", "-f", "infra/kubernetes/job-s3.yaml"],
    "kubernetes/trainjob.yaml": ["-p", "kubernetes", "-f", "infra/kubernetes/job.yaml", "--kubeflow-api", "trainer-v2"],
    "slurm/example.sbatch": ["-p", "slurm", "-f", "infra/slurm/job.yaml"],
    "pbs/cloudddp.pbs": ["-p", "pbs", "-f", "infra/pbs/job.yaml"],
}


def rendered(args: list[str], tmp_path: Path) -> str:
    result = run_cli("render", *args, env={"KUBECONFIG": str(tmp_path / "no-kubeconfig")}, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.replace(str(REPO), SHOWN_AS)


@pytest.mark.process
@pytest.mark.parametrize("example", EXAMPLES)
def test_example_is_what_the_renderer_prints(example: str, tmp_path: Path) -> None:
    fresh = rendered(EXAMPLES[example], tmp_path)
    if os.environ.get("CLOUDDDP_REGENERATE_EXAMPLES"):
        (INFRA / example).write_text(fresh)
    assert (INFRA / example).read_text() == fresh, (
        f"infra/{example} is out of date: CLOUDDDP_REGENERATE_EXAMPLES=1 pytest tests/test_infra_manifests.py"
    )


@pytest.mark.parametrize(
    ("manifest", "plural"),
    [("pytorchjob.yaml", "pytorchjobs"), ("pytorchjob-s3.yaml", "pytorchjobs"), ("trainjob.yaml", "trainjobs")],
)
def test_manifest_is_valid_against_the_crd_schema(manifest: str, plural: str) -> None:
    document = yaml.safe_load((INFRA / "kubernetes" / manifest).read_text())
    crd_validator(plural).validate(document)
    assert plural != "trainjobs" or trainjob_webhook_errors(document) == []


def test_a_broken_manifest_is_caught_by_the_schema() -> None:
    document = yaml.safe_load((INFRA / "kubernetes" / "pytorchjob.yaml").read_text())
    document["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "one"
    with pytest.raises(jsonschema.ValidationError):
        crd_validator("pytorchjobs").validate(document)


def pod_plan(command: list[str], args: list[str], env: dict[str, str]) -> dict[str, Any]:
    assert command[-2] == "cloudddp-launch"
    launcher_args = [str(SOURCES / "train_ddp.py") if a.endswith("/train_ddp.py") else a for a in command[-1:]]
    result = run_launcher("--dry-run", *launcher_args, *args, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.process
def test_pytorchjob_pods_get_their_ranks_from_the_operators_variables() -> None:
    spec = yaml.safe_load((INFRA / "kubernetes" / "pytorchjob.yaml").read_text())["spec"]
    for rank, role in enumerate(("Master", "Worker")):
        container = spec["pytorchReplicaSpecs"][role]["template"]["spec"]["containers"][0]
        # envvar.go (training-operator v1.9.0): master variables, WORLD_SIZE, RANK, PET_* for every pod.
        env = {"MASTER_ADDR": "resnet-ddp-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": str(rank),
               "PET_NNODES": "2", "PET_NODE_RANK": str(rank), "PET_MASTER_ADDR": "resnet-ddp-master-0",
               "PET_MASTER_PORT": "23456", "PET_NPROC_PER_NODE": spec["nprocPerNode"]}  # fmt: skip
        plan = pod_plan(container["command"], container["args"], env)
        assert (plan["provider"], plan["node_rank"], plan["nnodes"], plan["nproc_per_node"]) == ("kubeflow", rank, 2, 1)
        assert (plan["master_addr"], plan["master_port"]) == ("resnet-ddp-master-0", 23456)


@pytest.mark.process
def test_trainjob_pods_get_their_ranks_from_the_runtimes_variables() -> None:
    trainer = yaml.safe_load((INFRA / "kubernetes" / "trainjob.yaml").read_text())["spec"]["trainer"]
    # torch.go (kubeflow/trainer): PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR/PORT.
    env = {"PET_NNODES": str(trainer["numNodes"]), "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "resnet-ddp-node-0-0.resnet-ddp",
           "PET_MASTER_PORT": "29500", "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"])}  # fmt: skip
    plan = pod_plan(trainer["command"], trainer["args"], env)
    assert (plan["node_rank"], plan["nnodes"], plan["nproc_per_node"], plan["master_port"]) == (1, 2, 1, 29500)
