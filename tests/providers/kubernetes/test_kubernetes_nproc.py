"""Processes per node on Kubeflow keep the README's promise, `nproc_per_node` default: visible GPUs, else 1.

Left out of the job, each operator picks its own default instead:
- kubeflow/training-operator v1.9.0 (commit 6f74c7f6b2ed6c27aabd82d0a316b23f0646059c)
  pkg/apis/kubeflow.org/v1/pytorch_defaults.go setDefaultNprocPerNode makes nprocPerNode "auto", which
  pkg/controller.v1/pytorch/envvar.go setPodEnv hands every pod as PET_NPROC_PER_NODE; torchrun's `auto` is the
  node's CPU count on a CPU pod (torch/distributed/run.py determine_local_world_size).
- kubeflow/trainer v2.2.0 (commit dc7656ad878916f526cd401f30a347574cd47877) and v2.3.0 (commit
  658725bdae5c7e3a0854d93ac6ff492e109a22ab) pkg/apis/trainer/v1alpha1/trainjob_types.go: numProcPerNode is an int32
  (the CRD refuses `auto`, `gpu`, `cpu`), and pkg/runtime/framework/plugins/torch/torch.go EnforceMLPolicy runs one
  process per requested CPU when it is left out on a CPU pod. v2.0.1 (commit 332ad393) and v2.1.0 (commit 73c9bece)
  take an int or `auto`, `cpu`, `gpu` (IntOrString).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import SOURCES, cli, run_launcher
from helpers.kubernetes_apiserver import OLDER_TRAINJOB_CRDS, crd_validator, trainjob_webhook_errors

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.kubernetes.provider import KubernetesProvider
from cloudddp.providers.local.layout import node_layouts

IMAGE = "registry.example.com/train:1"


def spec_data(nproc: Any = None, **kubernetes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "resnet", "entry_point": "train_ddp.py", "source_dir": str(SOURCES), "nodes": 2,
                            "kubernetes": {"image": IMAGE, "namespace": "team-a", **kubernetes}}  # fmt: skip
    if nproc is not None:
        data["nproc_per_node"] = nproc
    return data


def render(nproc: Any = None, **kubernetes: Any) -> dict[str, Any]:
    return KubernetesProvider().render(build_spec(spec_data(nproc, **kubernetes))).request.body  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("nproc", "gpus", "expected"),
    [(None, 0, "1"), (None, 2, "2"), ("auto", 0, "auto"), ("gpu", 4, "gpu"), (3, 0, "3")],
)
def test_a_pytorchjob_always_carries_nproc_per_node_the_default_as_a_number(
    nproc: Any, gpus: int, expected: str
) -> None:
    manifest = render(nproc, gpus=gpus)
    crd_validator("pytorchjobs").validate(manifest)
    assert manifest["spec"]["nprocPerNode"] == expected


def operator_env(manifest: dict[str, Any], rank: int) -> dict[str, str]:
    """What training-operator v1.9.0 injects into the pod of `rank` of a 2-node static job (envvar.go setPodEnv and
    master.go; the commit in the module docstring), PET_NPROC_PER_NODE defaulted as pytorch_defaults.go does."""
    job = manifest["metadata"]["name"]
    nproc = manifest["spec"].get("nprocPerNode", "auto")
    master = f"{job}-master-0"
    return {"HOSTNAME": master if rank == 0 else f"{job}-worker-{rank - 1}", "PYTHONUNBUFFERED": "1",
            "MASTER_ADDR": master, "PET_MASTER_ADDR": master, "MASTER_PORT": "23456", "PET_MASTER_PORT": "23456",
            "WORLD_SIZE": str(2 * (int(nproc) if nproc.isdigit() else 1)), "RANK": str(rank),
            "PET_NODE_RANK": str(rank), "PET_NPROC_PER_NODE": nproc, "PET_NNODES": "2"}  # fmt: skip


@pytest.mark.process
def test_a_default_pytorchjobs_pods_run_one_process_each_on_cpu_nodes() -> None:
    """The finding: with nprocPerNode left out, the operator's `auto` reached torchrun, which starts one process per
    core of a CPU node (64 under --cpu 4). The pod's own command runs here under the operator's variables."""
    manifest = render(cpu="4")
    container = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    script = str(SOURCES / "train_ddp.py")
    result = run_launcher(
        "--dry-run", script, *container["args"], env={**operator_env(manifest, 1), "CUDA_VISIBLE_DEVICES": ""}
    )
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["nproc_per_node"] == 1 and "--nproc_per_node=1" in plan["argv"]
    assert plan["sources"]["nproc_per_node"] == "PET_NPROC_PER_NODE"


def test_the_local_kubeflow_emulation_injects_what_the_operator_injects_for_the_rendered_job(tmp_path: Path) -> None:
    """The emulation gave PET_NPROC_PER_NODE=1 where the operator, given the rendered PyTorchJob, gave `auto`:
    it hid the finding. Now both follow the same job."""
    spec = build_spec({**spec_data(), "local": {"emulate": "kubeflow"}})
    manifest = KubernetesProvider().render(spec).request.body
    for layout in node_layouts(spec, tmp_path, "resnet"):
        expected = operator_env(manifest, layout.rank)
        assert {name: layout.env[name] for name in ("PET_NPROC_PER_NODE", "WORLD_SIZE")} == {
            name: expected[name] for name in ("PET_NPROC_PER_NODE", "WORLD_SIZE")
        }


@pytest.mark.parametrize(
    ("nproc", "gpus", "expected"),
    [(None, 0, 1), (None, 8, 8), (2, 0, 2), ("auto", 0, None)],
)
def test_a_trainjob_for_trainer_v2_2_and_later_takes_numprocpernode_as_a_number(
    nproc: Any, gpus: int, expected: int | None
) -> None:
    """`auto` is left out: it is what Trainer does without the field (torch.go), and the CRD takes no word."""
    manifest = render(nproc, kubeflow_api="trainer-v2", gpus=gpus)
    crd_validator("trainjobs").validate(manifest)
    assert trainjob_webhook_errors(manifest) == []
    assert manifest["spec"]["trainer"].get("numProcPerNode") == expected


@pytest.mark.parametrize("word", ["gpu", "cpu"])
def test_a_word_trainer_v2_2_cannot_take_is_refused_offline(word: str, tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError) as refused:
        render(word, kubeflow_api="trainer-v2")
    message = str(refused.value)
    assert f"nproc_per_node={word!r}" in message and "trainer_release='v2.2'" in message and "number" in message
    result = cli("launch", "-p", "kubernetes", "--dry-run", "--image", IMAGE, "--kubeflow-api", "trainer-v2",
                     "--nproc-per-node", word, str(SOURCES / "train_ddp.py"),
                     env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip
    assert result.returncode == 2 and f"nproc_per_node={word!r}" in result.stderr, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


@pytest.mark.parametrize("release", ["v2.1", "v2.0"])
@pytest.mark.parametrize(("nproc", "expected"), [(None, 1), ("gpu", "gpu"), ("auto", "auto"), (4, 4)])
def test_older_trainer_releases_take_the_words_and_the_default_as_a_number(
    release: str, nproc: Any, expected: Any
) -> None:
    manifest = render(nproc, kubeflow_api="trainer-v2", trainer_release=release)
    crd_validator("trainjobs", OLDER_TRAINJOB_CRDS[release]).validate(manifest)
    assert manifest["spec"]["trainer"]["numProcPerNode"] == expected
