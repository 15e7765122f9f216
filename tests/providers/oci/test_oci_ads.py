"""Oracle ADS specs (the seed guide's train.yaml) and its docker-compose local test."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO, run_cli
from helpers.oci_loopback_server import COMPARTMENT, LOG_GROUP, PROJECT
from pydantic import BaseModel

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec, load_spec
from cloudddp.launcher.cli import build_parser, plan_for
from cloudddp.providers.oci.ads import TrainYaml, spec_dict_from_ads
from cloudddp.providers.oci.compose import compose_dict, compose_yaml
from cloudddp.providers.oci.provider import OCIProvider

# The guide's "Example train.yaml", verbatim.
SEED_TRAIN_YAML = """\
# Example train.yaml
kind: distributed
apiVersion: v1.0
spec:
  name: PyTorch-Distributed
  infrastructure:
    kind: infrastructure
    type: dataScienceJob
    apiVersion: v1.0
    spec:
      projectId: oci.xxxx.<project_ocid>
      compartmentId: oci.xxxx.<compartment_ocid>
      displayName: my_distributed_training
      logGroupId: oci.xxxx.<log_group_ocid>
      logId: oci.xxx.<log_ocid>
      subnetId: oci.xxxx.<subnet-ocid>
      shapeName: VM.GPU2.1
      blockStorageSize: 50
  cluster:
    kind: PYTORCH
    apiVersion: v1.0
    spec:
      image: <region.ocir.io/my-tenancy/image-name>
      workDir: "oci://my-bucket@my-namespace/path/to/dir/"
      config:
        env:
          - name: NCCL_ASYNC_ERROR_HANDLING
            value: '1'
      main:
        name: PyTorch-Distributed-main
        replicas: 1
      worker:
        name: PyTorch-Distributed-worker
        replicas: 2
  runtime:
    kind: python
    apiVersion: v1.0
    spec:
      entryPoint: "train.py"
      args:
        - --data-dir
        - /home/datascience/data
        - --output-dir
        - /home/datascience/outputs
        - --timeout
        - 5
"""
REAL_IDS = {
    "oci.xxxx.<project_ocid>": PROJECT,
    "oci.xxxx.<compartment_ocid>": COMPARTMENT,
    "oci.xxxx.<log_group_ocid>": LOG_GROUP,
    "oci.xxx.<log_ocid>": "ocid1.log.oc1.iad.aaaaaaaalog",
    "oci.xxxx.<subnet-ocid>": "ocid1.subnet.oc1.iad.aaaaaaaasubnet",
    "<region.ocir.io/my-tenancy/image-name>": "iad.ocir.io/my-tenancy/image-name:latest",
}


def seed_folder(tmp_path: Path, real_ids: bool = True) -> Path:
    """The folder the guide assumes: train.yaml next to train.py."""
    text = SEED_TRAIN_YAML
    if real_ids:
        for placeholder, value in REAL_IDS.items():
            text = text.replace(placeholder, value)
    (tmp_path / "train.yaml").write_text(text)
    (tmp_path / "train.py").write_text("print('training')\n")
    return tmp_path / "train.yaml"


def test_seed_train_yaml_converts_to_a_cloudddp_spec(tmp_path: Path) -> None:
    path = seed_folder(tmp_path, real_ids=False)
    converted = spec_dict_from_ads(yaml.safe_load(path.read_text()), str(path))
    assert converted == {
        "name": "my-distributed-training",
        "entry_point": "train.py",
        "args": ["--data-dir", "/home/datascience/data", "--output-dir", "/home/datascience/outputs", "--timeout", "5"],
        "source_dir": str(tmp_path),
        "nodes": 3,
        "environment": {"NCCL_ASYNC_ERROR_HANDLING": "1"},
        "oci": {
            "project_id": "oci.xxxx.<project_ocid>", "compartment_id": "oci.xxxx.<compartment_ocid>",
            "log_group_id": "oci.xxxx.<log_group_ocid>", "log_id": "oci.xxx.<log_ocid>",
            "subnet_id": "oci.xxxx.<subnet-ocid>", "shape": "VM.GPU2.1", "block_storage_gb": 50,
            "image": "<region.ocir.io/my-tenancy/image-name>",
            "work_dir": "oci://my-bucket@my-namespace/path/to/dir/",
        },
    }  # fmt: skip


def test_seed_train_yaml_becomes_the_expected_oci_request(tmp_path: Path) -> None:
    spec = load_spec(seed_folder(tmp_path))
    parts = OCIProvider(environ={}).render(spec).parts
    job = parts.create_job
    assert (job.compartment_id, job.project_id, job.display_name) == (COMPARTMENT, PROJECT, "my-distributed-training")
    assert job.job_log_configuration_details.log_id == "ocid1.log.oc1.iad.aaaaaaaalog"
    assert job.job_log_configuration_details.enable_auto_log_creation is False
    node = job.job_node_configuration_details
    assert node.job_network_configuration.job_network_type == "CUSTOM_NETWORK"
    assert node.job_network_configuration.subnet_id == "ocid1.subnet.oc1.iad.aaaaaaaasubnet"
    (group,) = node.job_node_group_configuration_details_list
    assert group.replicas == 3  # main 1 + worker 2, one node group
    infra = group.job_infrastructure_configuration_details
    assert (infra.shape_name, infra.block_storage_size_in_gbs, infra.job_shape_config_details) == (
        "VM.GPU2.1",
        50,
        None,
    )
    container = group.job_environment_configuration_details
    assert container.image == "iad.ocir.io/my-tenancy/image-name:latest"
    assert container.cmd == ["--data-dir", "/home/datascience/data", "--output-dir", "/home/datascience/outputs",
                             "--timeout", "5"]  # fmt: skip
    assert group.job_configuration_details.environment_variables["NCCL_ASYNC_ERROR_HANDLING"] == "1"
    (mount,) = job.job_storage_mount_configuration_details_list
    assert (mount.bucket, mount.namespace, mount.prefix) == (
        "my-bucket",
        "my-namespace",
        "path/to/dir/my-distributed-training/",
    )
    assert parts.job_config["entry_point"] == "train.py"
    assert parts.uploads[0].local == str(tmp_path)


def test_flags_override_the_ads_file(tmp_path: Path) -> None:
    spec = load_spec(seed_folder(tmp_path), {"nodes": 2, "oci": {"shape": "VM.GPU.A10.2"}})
    assert (spec.nodes, spec.oci.shape, spec.oci.block_storage_gb) == (2, "VM.GPU.A10.2", 50)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["spec"]["cluster"].update(kind="DASK"),
            "spec.cluster.kind: cloudddp runs PyTorch DDP (kind: PYTORCH)",
        ),
        (
            lambda d: d["spec"]["cluster"]["spec"].update(ps={"replicas": 1}),
            "spec.cluster.spec.ps: cloudddp does not support this ADS field: TensorFlow parameter servers and Dask TLS are not PyTorch DDP (got {'replicas': 1})",
        ),
        (
            lambda d: d["spec"]["cluster"]["spec"]["config"].update(startOptions=["--x=1"]),
            "spec.cluster.spec.config.startOptions: cloudddp does not support this ADS field: pass launcher options as cloudddp flags (got ['--x=1'])",
        ),
        (
            lambda d: d["spec"]["runtime"]["spec"].update(kwargs="--a 1"),
            "spec.runtime.spec.kwargs: cloudddp does not support this ADS field: cloudddp ships the folder that holds the YAML instead (got '--a 1')",
        ),
        (
            lambda d: d["spec"]["runtime"].update(type="git"),
            "spec.runtime.type: cloudddp does not support this ADS field: cloudddp ships the folder that holds the YAML instead (got 'git')",
        ),
        (lambda d: d["spec"]["cluster"]["spec"].pop("main"), "spec.cluster.spec.main: Field required."),
        (
            lambda d: d["spec"]["cluster"]["spec"]["worker"].update(image="iad.ocir.io/t/other:1"),
            "spec.cluster.spec.worker.image is 'iad.ocir.io/t/other:1' but the job runs",
        ),
        (
            lambda d: d["spec"]["cluster"]["spec"]["main"].update(config={"env": [{"name": "ONLY_MAIN", "value": 1}]}),
            "ONLY_MAIN differs between main ('1') and worker (None)",
        ),
        (
            lambda d: d["spec"]["infrastructure"]["spec"].update(storageMount=[{"src": "oci://b@n/p"}]),
            "spec.infrastructure.spec.storageMount: cloudddp does not support this ADS field: use oci:// inputs",
        ),
        (lambda d: d["spec"]["runtime"]["spec"].pop("entryPoint"), "spec.runtime.spec.entryPoint: Field required."),
        (
            lambda d: d["spec"]["infrastructure"].update(type="dataFlow"),
            "spec.infrastructure.type: Input should be 'dataScienceJob' (got 'dataFlow')",
        ),
        (
            lambda d: d["spec"]["cluster"]["spec"]["worker"].update(replicas=-1),
            "spec.cluster.spec.worker.replicas: Input should be greater than or equal to 0 (got -1)",
        ),
        (
            lambda d: d["spec"]["cluster"]["spec"]["config"].update(env=["X=1"]),
            "spec.cluster.spec.config.env.0: Input should be a valid dictionary or instance of EnvVar (got 'X=1')",
        ),
    ],
)
def test_ads_fields_cloudddp_cannot_honour_are_errors(tmp_path: Path, change: Any, message: str) -> None:
    data = yaml.safe_load(SEED_TRAIN_YAML)
    change(data)
    with pytest.raises(CloudDDPError, match=None) as caught:
        spec_dict_from_ads(data, "train.yaml", warn=lambda message: None)
    assert message in str(caught.value)
    assert str(caught.value).startswith("train.yaml: ")


def test_seed_placeholders_fail_at_launch_naming_the_yamls_own_field(tmp_path: Path) -> None:
    path = seed_folder(tmp_path, real_ids=False)
    spec = load_spec(path)
    with pytest.raises(CloudDDPError) as caught:
        OCIProvider(environ={}).render(spec)
    assert str(caught.value).startswith(
        f"spec.infrastructure.spec.compartmentId='oci.xxxx.<compartment_ocid>' ({path}, cloudddp's "
        f"oci.compartment_id) is not an OCID"
    )
    # A value given on the command line instead is named as cloudddp's field.
    flagged = load_spec(path, {"oci": {"compartment_id": COMPARTMENT, "project_id": "ocid1.nope"}})
    with pytest.raises(CloudDDPError, match=r"^oci\.project_id='ocid1\.nope' is not an OCID"):
        OCIProvider(environ={}).render(flagged)
    fixed = load_spec(path, {"oci": {"compartment_id": COMPARTMENT, "project_id": PROJECT, "shape": "VM.GPU2.1"}})
    with pytest.raises(CloudDDPError, match=r"^spec\.infrastructure\.spec\.subnetId='oci\.xxxx\.<subnet-ocid>' \("):
        OCIProvider(environ={}).render(fixed)


def with_roles(main: dict[str, Any] | None, worker: dict[str, Any] | None, **cluster: Any) -> dict[str, Any]:
    data = yaml.safe_load(SEED_TRAIN_YAML)
    roles = data["spec"]["cluster"]["spec"]
    for role, value in (("main", main), ("worker", worker)):
        if value is None:
            roles.pop(role)
        else:
            roles[role] = value
    roles.update(cluster)
    return data


@pytest.mark.parametrize(
    ("main", "worker", "nodes", "warning"),
    [
        # ads/opctl/backend/ads_ml_job.py: one main job run, `worker.replicas` worker runs;
        # yaml_parser.py: `replicas or 1`, and a warning for main.replicas > 1.
        ({"replicas": 1}, {"replicas": 2}, 3, None),
        ({"replicas": 2}, {"replicas": 2}, 3, "main.replicas is 2; ADS runs one main node (and warns), and so does"),
        (
            {"replicas": 1},
            {"replicas": 0},
            2,
            "worker.replicas is 0; ADS reads it as 1 (`replicas or 1`), so this is 2",
        ),
        ({"replicas": 1}, {"name": "w"}, 2, None),
        ({"name": "only-main"}, None, 1, None),
    ],
)
def test_nodes_are_counted_as_ads_starts_job_runs(
    main: dict[str, Any], worker: dict[str, Any] | None, nodes: int, warning: str | None
) -> None:
    warnings: list[str] = []
    converted = spec_dict_from_ads(with_roles(main, worker), "train.yaml", warn=warnings.append)
    assert converted["nodes"] == nodes
    counted = [w for w in warnings if "replicas" in w]
    assert len(counted) == (1 if warning else 0)
    assert all(w.startswith(f"train.yaml: spec.cluster.spec.{warning}") for w in counted)


def test_the_job_name_follows_ads_and_warns_where_cloudddp_differs() -> None:
    warnings: list[str] = []
    named = spec_dict_from_ads(with_roles({}, None, name="ddp-run"), "train.yaml", warn=warnings.append)
    assert named["name"] == "ddp-run" and warnings == []  # cluster.spec.name wins over displayName, as in ADS
    spec_dict_from_ads(with_roles({}, None), "train.yaml", warn=warnings.append)
    assert warnings == [
        "train.yaml: the job name 'my_distributed_training' becomes 'my-distributed-training' (cloudddp names are "
        "letters, digits, hyphens)."
    ]
    data = with_roles({}, None)
    data["spec"]["infrastructure"]["spec"].pop("displayName")
    warnings.clear()
    assert spec_dict_from_ads(data, "train.yaml", warn=warnings.append)["name"] == "PyTorch-Distributed"
    assert warnings == [
        "train.yaml: the job is named after spec.name 'PyTorch-Distributed', which ADS does not read (it uses "
        "spec.cluster.spec.name, else spec.infrastructure.spec.displayName)."
    ]


def test_the_image_falls_back_to_main_then_worker_as_in_ads() -> None:
    data = with_roles({"image": "iad.ocir.io/t/main:1"}, {"replicas": 1})
    data["spec"]["cluster"]["spec"].pop("image")
    assert spec_dict_from_ads(data, "t.yaml", warn=lambda m: None)["oci"]["image"] == "iad.ocir.io/t/main:1"


def test_ephemeral_is_ignored_with_a_warning() -> None:
    warnings: list[str] = []
    spec_dict_from_ads(with_roles({}, None, ephemeral=True, name="x"), "t.yaml", warn=warnings.append)
    assert warnings == ["t.yaml: spec.cluster.spec.ephemeral is ignored: a cloudddp cluster always ends with its job."]


def test_the_docs_table_lists_every_ads_field_and_what_cloudddp_does() -> None:
    from cloudddp.providers.oci.ads import FIELDS

    page = (REPO / "docs" / "providers" / "oci.md").read_text()
    for field, effect in FIELDS.items():
        assert f"| `{field}` | {effect} |" in page, field


def test_compose_file_matches_the_seed_guides_local_test(tmp_path: Path) -> None:
    spec = load_spec(seed_folder(tmp_path))
    services = compose_dict(spec)["services"]
    assert list(services) == ["my-distributed-training-main", "my-distributed-training-worker-0",
                              "my-distributed-training-worker-1"]  # fmt: skip
    main, worker = services["my-distributed-training-main"], services["my-distributed-training-worker-1"]
    assert main["network_mode"] == "host" and "ports" not in main
    assert {k: main["environment"][k] for k in ("OCI__MODE", "RANK", "OCI__WORKER_COUNT", "OCI__CLUSTER_TYPE")} == {
        "OCI__MODE": "MAIN",
        "RANK": "0",
        "OCI__WORKER_COUNT": "2",
        "OCI__CLUSTER_TYPE": "PYTORCH",
    }
    assert (worker["environment"]["OCI__MODE"], worker["environment"]["RANK"]) == ("WORKER", "2")
    assert worker["environment"]["OCI__ENTRY_SCRIPT_ARGS"] == (
        "--data-dir /home/datascience/data --output-dir /home/datascience/outputs --timeout 5"
    )
    assert worker["environment"]["OCI__WORK_DIR"] == "oci://my-bucket@my-namespace/path/to/dir/"
    assert worker["environment"]["NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert main["command"] == ["train.py", *shlex.split(worker["environment"]["OCI__ENTRY_SCRIPT_ARGS"])]
    assert f"{tmp_path}:/code:ro" in main["volumes"]
    # OCI__WORK_DIR is set: the credentials mount and OCI_IAM_TYPE of ADS's own local run
    # (ads/opctl/distributed/cmds.py: update_ini's oci_key_mnt, pytorch_cmd's OCI_IAM_TYPE=api_key).
    assert all("~/.oci:/home/oci_dist_training/.oci:ro" in s["volumes"] for s in services.values())
    assert all(s["environment"]["OCI_IAM_TYPE"] == "api_key" for s in services.values())


def test_compose_without_a_work_dir_puts_no_credentials_in_the_containers(tmp_path: Path) -> None:
    spec = build_spec({"entry_point": "train_ddp.py", "source_dir": str(REPO / "sources"), "nodes": 2})
    for service in compose_dict(spec)["services"].values():
        assert not any(".oci" in v for v in service["volumes"])
        assert "OCI_IAM_TYPE" not in service["environment"] and "OCI__WORK_DIR" not in service["environment"]


def test_compose_refuses_a_placeholder_image_naming_the_yamls_field(tmp_path: Path) -> None:
    path = seed_folder(tmp_path, real_ids=False)  # image: <region.ocir.io/my-tenancy/image-name>
    with pytest.raises(CloudDDPError) as caught:
        compose_yaml(load_spec(path))
    assert str(caught.value).startswith(
        f"spec.cluster.spec.image='<region.ocir.io/my-tenancy/image-name>' ({path}, cloudddp's oci.image) is not an "
        f"image name docker can pull (a placeholder?)."
    )


def test_compose_comment_points_only_at_what_the_user_has(tmp_path: Path) -> None:
    spec = build_spec({"entry_point": "train_ddp.py", "source_dir": str(REPO / "sources"), "nodes": 2})
    text = compose_yaml(spec)
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert header and not any("infra/" in line or "Dockerfile" in line for line in header)
    assert "# Image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime: any image with Python and PyTorch" in text
    dockerfile = (REPO / "infra" / "docker" / "Dockerfile").read_text()
    assert "ARG TORCH_VERSION=2.5.1" in dockerfile and "ARG CUDA_VERSION=12.4" in dockerfile  # the same base


@pytest.mark.process
def test_every_compose_service_runs_the_mounted_launcher_whatever_the_images_entrypoint(tmp_path: Path) -> None:
    """What docker does with a service (entrypoint + command, environment, volumes), done here with sh.

    An ADS-built image's entrypoint ignores `command`; the service's own `entrypoint` replaces
    it, and the launcher comes from the read-only job-side mount: `python -S` (no site-packages)
    proves nothing installed in the image is needed.
    """
    (tmp_path / "data").mkdir()
    spec = build_spec({"entry_point": "train_ddp.py", "source_dir": str(REPO / "sources"), "nodes": 2,
                       "inputs": {"train": str(tmp_path / "data")}, "oci": {"image": "iad.ocir.io/t/ads-built:1"}})  # fmt: skip
    for rank, service in enumerate(compose_dict(spec)["services"].values()):
        mounts = dict(v.rsplit(":", 2)[:2] if v.endswith(":ro") else v.split(":", 1) for v in service["volumes"])
        host_job_side = {c: h for h, c in mounts.items()}["/opt/cloudddp/cloudddp"]
        python = tmp_path / "bin" / "python3"
        python.parent.mkdir(exist_ok=True)
        python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
        python.chmod(0o755)
        environment = {**service["environment"], "PYTHONPATH": str(Path(host_job_side).parent),
                       "PATH": f"{python.parent}:/usr/bin:/bin"}  # fmt: skip
        result = subprocess.run([*service["entrypoint"], "--dry-run", *service["command"]], env=environment,
                                cwd=REPO / "sources", capture_output=True, text=True, timeout=60)  # fmt: skip
        assert result.returncode == 0, result.stderr
        plan = json.loads(result.stdout)
        assert (plan["provider"], plan["node_rank"], plan["nnodes"], plan["master_port"]) == ("oci", rank, 2, 29400)
        assert plan["argv"][-1] == "train_ddp.py"


def test_compose_variables_are_what_the_launcher_understands(tmp_path: Path) -> None:
    """Each service's environment gives the launcher the right rank, size and master (its --dry-run plan)."""
    (tmp_path / "data").mkdir()
    spec = build_spec({"entry_point": "train_ddp.py", "source_dir": str(REPO / "sources"), "nodes": 3,
                       "inputs": {"train": str(tmp_path / "data")}})  # fmt: skip
    for rank, service in enumerate(compose_dict(spec)["services"].values()):
        args = build_parser().parse_args(["--dry-run", *service["command"]])
        plan = plan_for(args, service["environment"])
        assert (plan.provider, plan.node_rank, plan.nnodes) == ("oci", rank, 3)
        assert (plan.master_addr, plan.master_port) == ("127.0.0.1", 29400)
        assert service["environment"]["CLOUDDDP_CHANNEL_TRAIN"] == "/data/train"


def test_compose_keeps_secret_values_out_of_the_file(tmp_path: Path) -> None:
    spec = build_spec({"entry_point": "train_ddp.py", "source_dir": str(REPO / "sources"), "nodes": 2,
                       "environment": {"WANDB_API_KEY": "abc123secret", "LR": "0.1"}})  # fmt: skip
    text = compose_yaml(spec)
    assert "abc123secret" not in text
    assert yaml.safe_load(text)["services"]["cloudddp-job-main"]["environment"]["WANDB_API_KEY"] == "${WANDB_API_KEY}"


@pytest.mark.slow
def test_cli_launch_dry_run_and_render_compose_read_the_ads_file(tmp_path: Path) -> None:
    path = seed_folder(tmp_path)
    dry = run_cli("launch", "--provider", "oci", "-f", str(path), "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert (
        f"cloudddp: warning: {path}: the job name 'my_distributed_training' becomes 'my-distributed-training'"
        in dry.stderr
    )
    document = yaml.safe_load(dry.stdout)
    group = document["request"]["create_job"]["job_node_configuration_details"][
        "job_node_group_configuration_details_list"
    ][0]
    assert group["replicas"] == 3
    rendered = run_cli("render", "--provider", "oci", "-f", str(path), cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    same = yaml.safe_load(rendered.stdout)["request"]["create_job"]
    assert same["job_log_configuration_details"] == document["request"]["create_job"]["job_log_configuration_details"]
    compose = run_cli("render", "--provider", "oci", "--compose", "-f", str(path), cwd=tmp_path)
    assert compose.returncode == 0, compose.stderr
    assert len(yaml.safe_load(compose.stdout)["services"]) == 3
    wrong = run_cli("render", "--provider", "local", "--compose", "-f", str(path), cwd=tmp_path)
    assert wrong.returncode == 2 and "use it with --provider oci" in wrong.stderr
    # A wrong value: one paragraph naming the YAML's field and value, exit 2, nothing on stdout, no traceback.
    path.write_text(path.read_text().replace("replicas: 2", "replicas: two"))
    bad = run_cli("launch", "--provider", "oci", "-f", str(path), "--dry-run", cwd=tmp_path)
    assert (bad.returncode, bad.stdout) == (2, "")
    error = " ".join(bad.stderr.split())  # the console wraps long lines
    assert f"error: {path}: spec.cluster.spec.worker.replicas: Input should be a valid integer (got 'two')." in error
    assert "Traceback" not in bad.stderr


# -- the pydantic model of the file against ADS's own field lists ------------------------------------------------------

ADS_SCHEMA = Path(__file__).parent / "data" / "ads_distributed_schema.yaml"
# Fields ADS's code reads that its documented schema leaves out, from oracle/accelerated-data-science at
# 0e785b9fd36fb354019e0924b94ac2b0ec6f235a: ads/opctl/config/yaml_parsers/distributed/yaml_parser.py
# (parse_cluster: ephemeral, ps, certificate; parse_runtime: codeDir, pythonPath, runtime.type) and
# ads/jobs/builders/infrastructure/dsc_job.py (DataScienceJob.attribute_map and shape_config_details_attribute_map).
ADS_CODE_FIELDS = [
    "spec.cluster.spec.ephemeral", "spec.cluster.spec.ps", "spec.cluster.spec.certificate",
    "spec.runtime.type", "spec.runtime.spec.codeDir", "spec.runtime.spec.pythonPath",
    *(f"spec.infrastructure.spec.{name}" for name in (
        "projectId", "compartmentId", "displayName", "jobType", "jobInfrastructureType", "shapeName",
        "blockStorageSize", "subnetId", "shapeConfigDetails", "logId", "logGroupId", "storageMount", "freeformTags",
        "definedTags", "shapeConfigDetails.memoryInGBs", "shapeConfigDetails.ocpus",
    )),
]  # fmt: skip


def cerberus_fields(schema: dict[str, Any], prefix: str = "") -> list[str]:
    """Every field path a Cerberus schema names (list items as `*`)."""
    paths = []
    for name, rule in schema.items():
        path = f"{prefix}{name}"
        paths.append(path)
        inner = rule.get("schema")
        if rule.get("type") == "list" and isinstance(inner, dict) and inner.get("type") == "dict":
            paths += cerberus_fields(inner["schema"], f"{path}.*.")
        elif rule.get("type") == "dict" and isinstance(inner, dict):
            paths += cerberus_fields(inner, f"{path}.")
    return paths


def model_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field path of cloudddp's model of the file, by the YAML's names (list items as `*`)."""
    paths = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        paths.append(path)
        for inner in typing.get_args(field.annotation) or (field.annotation,):
            if typing.get_origin(inner) is list:
                inner, path = typing.get_args(inner)[0], f"{path}.*"
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                paths += model_fields(inner, f"{path}.")
    return paths


def test_every_field_ads_knows_is_a_field_of_the_model() -> None:
    documented = cerberus_fields(yaml.safe_load(ADS_SCHEMA.read_text()))
    assert "spec.cluster.spec.worker.replicas" in documented and "spec.runtime.spec.env.*.value" in documented
    known = set(model_fields(TrainYaml))
    assert sorted(set(documented + ADS_CODE_FIELDS) - known) == []


def test_keys_ads_does_not_know_are_ignored_as_ads_does_with_a_warning_naming_them() -> None:
    data = yaml.safe_load(SEED_TRAIN_YAML)
    expected = spec_dict_from_ads(yaml.safe_load(SEED_TRAIN_YAML), "train.yaml", warn=lambda m: None)
    data["spec"]["infrastructure"]["spec"]["shapeNmae"] = "BM.GPU.H100.8"
    data["spec"]["cluster"]["spec"]["config"]["env"][0]["valueFrom"] = "vault"
    data["owner"] = "ml-team"
    warnings: list[str] = []
    assert spec_dict_from_ads(data, "train.yaml", warn=warnings.append) == expected
    unknown = [w for w in warnings if "not a field of ADS" in w]
    assert unknown == [
        "train.yaml: owner, spec.infrastructure.spec.shapeNmae, spec.cluster.spec.config.env.0.valueFrom: not a field "
        "of ADS's distributed spec; ADS ignores unknown fields, and so does cloudddp (check the spelling)."
    ]


def test_infrastructure_takes_the_sdks_snake_case_names_as_ads_does() -> None:
    """dsc_job.py DataScienceJob.standardize_spec (commit above): snake_case keys, any case, become camelCase."""
    data = yaml.safe_load(SEED_TRAIN_YAML)
    infra = data["spec"]["infrastructure"]["spec"]
    del infra["shapeName"], infra["blockStorageSize"]
    infra.update(SHAPE_NAME="VM.Standard.E4.Flex", block_storage_size_in_gbs=60,
                 shape_config_details={"memory_in_gbs": 32, "ocpus": 2})  # fmt: skip
    warnings: list[str] = []
    oci = spec_dict_from_ads(data, "train.yaml", warn=warnings.append)["oci"]
    assert (oci["shape"], oci["block_storage_gb"], oci["memory_in_gbs"], oci["ocpus"]) == (
        "VM.Standard.E4.Flex", 60, 32, 2,
    )  # fmt: skip
    assert not [w for w in warnings if "not a field of ADS" in w]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # ADS would run `range(True)`; a count is a whole number, never a flag or a text.
        (lambda d: d["spec"]["cluster"]["spec"]["worker"].update(replicas=True),
         "spec.cluster.spec.worker.replicas: Input should be a valid integer (got True)"),
        (lambda d: d["spec"]["cluster"]["spec"]["main"].update(replicas="2"),
         "spec.cluster.spec.main.replicas: Input should be a valid integer (got '2')"),
        (lambda d: d["spec"]["infrastructure"]["spec"].update(blockStorageSize="lots"),
         "spec.infrastructure.spec.blockStorageSize: Input should be a valid integer, unable to parse string as an "
         "integer (got 'lots')"),
        (lambda d: d["spec"]["infrastructure"]["spec"].update(shapeConfigDetails={"memoryInGBs": [16]}),
         "spec.infrastructure.spec.shapeConfigDetails.memoryInGBs: Input should be a valid number (got [16])"),
        (lambda d: d.update(apiVersion="v2.0"), "apiVersion: Input should be 'v1.0' (got 'v2.0')"),
        (lambda d: d["spec"]["infrastructure"]["spec"].update(freeformTags={"team": "ml"}),
         "spec.infrastructure.spec.freeformTags: cloudddp does not support this ADS field: not supported"),
    ],
)  # fmt: skip
def test_a_wrong_value_is_one_error_naming_the_yamls_field_and_value(change: Any, message: str) -> None:
    data = yaml.safe_load(SEED_TRAIN_YAML)
    change(data)
    with pytest.raises(CloudDDPError) as caught:
        spec_dict_from_ads(data, "train.yaml", warn=lambda m: None)
    text = str(caught.value)
    assert text.startswith(f"train.yaml: {message}")
    assert (
        "\n" not in text and text.count("train.yaml") == 2
    )  # one paragraph; the file, then "An Oracle ADS train.yaml"


def test_a_worker_section_left_empty_is_no_worker_as_in_ads() -> None:
    """yaml_parser.py parse_worker: `if not worker: return None` (an empty section starts no worker run)."""
    assert spec_dict_from_ads(with_roles({}, {}), "train.yaml", warn=lambda m: None)["nodes"] == 1


def test_a_wrong_value_of_a_secret_looking_variable_is_named_not_shown() -> None:
    data = yaml.safe_load(SEED_TRAIN_YAML)
    data["spec"]["runtime"]["spec"]["env"] = [{"name": "HF_TOKEN", "value": ["hf_s3cr3t"]}]
    with pytest.raises(CloudDDPError) as caught:
        spec_dict_from_ads(data, "train.yaml", warn=lambda m: None)
    assert str(caught.value).startswith(
        "train.yaml: spec.runtime.spec.env.0.value: the value of HF_TOKEN must be text or a number (got ***)."
    )
    assert "s3cr3t" not in str(caught.value)
    # The job spec's own variables: the name is in the error's location.
    with pytest.raises(CloudDDPError) as caught:
        build_spec({"entry_point": "train.py", "environment": {"DB_PASSWORD": 12345, "LR": 1}})
    assert "environment.DB_PASSWORD: Input should be a valid string (got ***)" in str(caught.value)
    assert "12345" not in str(caught.value) and "environment.LR: Input should be a valid string (got 1)" in str(
        caught.value
    )
