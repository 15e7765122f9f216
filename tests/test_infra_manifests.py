"""The Kubernetes examples are valid against the real Kubeflow CRD schemas, and the launcher
plans every pod right from the variables the operators inject."""

from __future__ import annotations

import json
import os
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import REPO, SOURCES, run_launcher

SCHEMAS = REPO.parent / "shared" / "schemas"
INFRA = REPO / "infra" / "kubernetes"


def crd_schema(name: str) -> dict[str, Any]:
    path = SCHEMAS / name
    if not path.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing: CI must validate manifests against the real CRD schemas")
        pytest.skip(f"{path} not found (shared/ beside the checkout)")
    crd = yaml.safe_load(path.read_text())
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize(
    ("manifest", "schema"),
    [
        ("pytorchjob.yaml", "kubeflow.org_pytorchjobs.v1.9.0.yaml"),
        ("trainjob.yaml", "trainer.kubeflow.org_trainjobs.yaml"),
    ],
)
def test_manifest_is_valid_against_the_crd_schema(manifest: str, schema: str) -> None:
    document = yaml.safe_load((INFRA / manifest).read_text())
    jsonschema.validate(document, crd_schema(schema))


def test_a_broken_manifest_is_caught_by_the_schema() -> None:
    document = yaml.safe_load((INFRA / "pytorchjob.yaml").read_text())
    document["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = "one"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, crd_schema("kubeflow.org_pytorchjobs.v1.9.0.yaml"))


def pod_plan(command: list[str], args: list[str], env: dict[str, str]) -> dict[str, Any]:
    assert command[0] == "cloudddp-launch"
    launcher_args = [
        SOURCES.joinpath("train_ddp.py").as_posix() if a.endswith("train_ddp.py") else a for a in command[1:]
    ]
    result = run_launcher("--dry-run", *launcher_args, *args, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_pytorchjob_pods_get_their_ranks_from_the_operators_variables() -> None:
    spec = yaml.safe_load((INFRA / "pytorchjob.yaml").read_text())["spec"]["pytorchReplicaSpecs"]
    for rank, role in enumerate(("Master", "Worker")):
        container = spec[role]["template"]["spec"]["containers"][0]
        env = {"MASTER_ADDR": "resnet-ddp-master-0", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": str(rank),
               "PET_NNODES": "2", "PET_NODE_RANK": str(rank), "PET_MASTER_ADDR": "resnet-ddp-master-0",
               "PET_MASTER_PORT": "23456"}  # fmt: skip
        plan = pod_plan(container["command"], container["args"], env)
        assert (plan["provider"], plan["node_rank"], plan["nnodes"], plan["nproc_per_node"]) == ("kubeflow", rank, 2, 1)
        assert (plan["master_addr"], plan["master_port"]) == ("resnet-ddp-master-0", 23456)


def test_trainjob_pods_get_their_ranks_from_the_runtimes_variables() -> None:
    trainer = yaml.safe_load((INFRA / "trainjob.yaml").read_text())["spec"]["trainer"]
    env = {"PET_NNODES": str(trainer["numNodes"]), "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "resnet-ddp-node-0-0.resnet-ddp",
           "PET_MASTER_PORT": "29500", "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"])}  # fmt: skip
    plan = pod_plan(trainer["command"], trainer["args"], env)
    assert (plan["node_rank"], plan["nnodes"], plan["nproc_per_node"], plan["master_port"]) == (1, 2, 1, 29500)


def test_pbs_template_starts_one_launcher_per_host() -> None:
    # No PBS server exists for Debian; the launcher's PBS side is covered by tests/test_cluster_detection.py.
    pbs = (REPO / "infra" / "pbs" / "cloudddp.pbs").read_text()
    assert "pbsdsh -u" in pbs and "cloudddp-launch ${SCRIPT" in pbs
