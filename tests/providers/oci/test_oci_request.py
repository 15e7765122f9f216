"""The OCI request as rendered (dry run): its shape, and every limit checked before any call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import oci
import pytest
import yaml
from helpers.oci_loopback_server import COMPARTMENT, IMAGE, LOG_GROUP, PROJECT, oci_settings

from cloudddp import session
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.oci import node as oci_node
from cloudddp.providers.oci import request, validation
from cloudddp.providers.oci.provider import OCIProvider

REPO = Path(__file__).resolve().parents[3]


def spec_for(tmp_path: Path, **fields: Any) -> Any:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    oci_fields = fields.pop("oci", {})
    base = {"entry_point": "train_ddp.py", "source_dir": str(REPO / "sources"), "nodes": 2,
            "inputs": {"train": str(data)}, "oci": oci_settings(**oci_fields)}  # fmt: skip
    return build_spec({**base, **fields})


def render(tmp_path: Path, environ: dict[str, str] | None = None, **fields: Any) -> Any:
    provider = OCIProvider(environ=environ if environ is not None else {}, service_endpoint="http://127.0.0.1:9")
    return session.render(provider, spec_for(tmp_path, **fields))  # as every door: the secrets policy, then render


def test_render_builds_one_multi_node_job_with_the_sdk_model_classes(tmp_path: Path) -> None:
    parts = render(tmp_path, args=["--epochs", "1"], max_runtime=3601).parts
    job = parts.create_job
    assert isinstance(job, oci.data_science.models.CreateJobDetails)
    assert job.job_configuration_details is None
    assert job.job_infrastructure_configuration_details is None
    assert job.job_environment_configuration_details is None
    node = job.job_node_configuration_details
    assert isinstance(node, oci.data_science.models.MultiNodeJobNodeConfigurationDetails)
    assert (node.job_node_type, node.startup_order, node.maximum_runtime_in_minutes) == (
        "MULTI_NODE",
        "IN_PARALLEL",
        61,
    )
    assert isinstance(node.job_network_configuration, oci.data_science.models.JobDefaultNetworkConfiguration)
    (group,) = node.job_node_group_configuration_details_list or []
    assert (group.name, group.replicas, group.minimum_success_replicas) == ("cloudddp", 2, 2)
    infra = group.job_infrastructure_configuration_details
    assert isinstance(infra, oci.data_science.models.MultiNodeJobInfrastructureConfigurationDetails)
    assert (infra.shape_name, infra.block_storage_size_in_gbs) == ("VM.Standard.E4.Flex", 100)
    shape = infra.job_shape_config_details
    assert isinstance(shape, oci.data_science.models.JobShapeConfigDetails)
    assert (shape.ocpus, shape.memory_in_gbs) == (2.0, 32.0)
    container = group.job_environment_configuration_details
    assert isinstance(container, oci.data_science.models.OcirContainerJobEnvironmentConfigurationDetails)
    assert container.image == IMAGE
    assert container.entrypoint == oci_node.ENTRYPOINT and oci_node.NODE_SCRIPT_NAME in oci_node.ENTRYPOINT[2]
    assert container.cmd == ["--epochs", "1"]
    env = group.job_configuration_details.environment_variables
    assert env["CLOUDDDP_SOURCE"].startswith("/mnt/cloudddp/runs/") and env["CLOUDDDP_SOURCE"].endswith(".tar.gz")
    assert env["CLOUDDDP_CHANNEL_TRAIN"] == "/mnt/cloudddp/inputs/train/v-<hash-at-submit>"  # filled in by submit
    (mount,) = job.job_storage_mount_configuration_details_list or []
    assert isinstance(mount, oci.data_science.models.ObjectStorageMountConfigurationDetails)
    assert (mount.bucket, mount.namespace, mount.prefix, mount.destination_directory_name) == (
        "bkt",
        "ns",
        "cloudddp/cloudddp-job/",
        "cloudddp",
    )
    logging = job.job_log_configuration_details
    assert isinstance(logging, oci.data_science.models.JobLogConfigurationDetails)
    assert (logging.enable_logging, logging.enable_auto_log_creation, logging.log_group_id) == (True, True, LOG_GROUP)
    run = parts.create_job_run
    assert isinstance(run, oci.data_science.models.CreateJobRunDetails)
    assert (run.compartment_id, run.project_id) == (COMPARTMENT, PROJECT)
    assert (run.freeform_tags or {})["cloudddp-output"] == parts.output_uri


def test_dry_run_yaml_is_the_sdk_dict_of_both_requests(tmp_path: Path) -> None:
    job_request = render(tmp_path)
    document = yaml.safe_load(job_request.to_yaml())
    assert document["request"]["create_job"] == oci.util.to_dict(job_request.parts.create_job)
    assert document["request"]["create_job_run"]["job_id"] == request.RUN_ID_PLACEHOLDER
    assert [s["what"].split()[0] for s in document["before_submit"]["stage"]] == ["source", "input"]
    # oci://bucket@namespace: the bucket is shown (it is not the user-info of a URL, nothing to redact).
    assert document["before_submit"]["output"].startswith("oci://bkt@ns/cloudddp/cloudddp-job/runs/")


def test_render_needs_no_config_file_no_client_and_no_network(tmp_path: Path) -> None:
    missing = {"OCI_CONFIG_FILE": str(tmp_path / "nowhere" / "config")}
    provider = OCIProvider(environ=missing, service_endpoint="http://127.0.0.1:9")
    provider.render(spec_for(tmp_path))
    assert provider._clients == {}


@pytest.mark.process
def test_dry_run_does_not_import_oci_for_the_cli_or_launcher() -> None:
    code = "import sys, cloudddp.cli, cloudddp.launcher.cli, cloudddp.spec, cloudddp.providers.oci.ads, cloudddp.providers.oci.compose; print('oci' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_custom_subnet_fixed_shape_logging_off_and_oci_inputs(tmp_path: Path) -> None:
    parts = render(
        tmp_path, nodes=3, inputs={"train": "oci://data@ns/sets/train"}, output="oci://models@ns/run7",
        checkpoint="oci://models@ns/ckpt",
        oci={"subnet_id": "ocid1.subnet.oc1.iad.aaaasubnet", "shape": "BM.GPU.A100-v2.8", "log_group_id": None},
    ).parts  # fmt: skip
    node = parts.create_job.job_node_configuration_details
    assert node.job_network_configuration.subnet_id == "ocid1.subnet.oc1.iad.aaaasubnet"
    group = node.job_node_group_configuration_details_list[0]
    assert group.job_infrastructure_configuration_details.job_shape_config_details is None
    assert parts.create_job.job_log_configuration_details.enable_logging is False
    mounts = {
        m.destination_directory_name: (m.bucket, m.prefix)
        for m in parts.create_job.job_storage_mount_configuration_details_list
    }
    assert mounts == {"cloudddp": ("bkt", "cloudddp/cloudddp-job/"), "cloudddp-in-train": ("data", "sets/train/"),
                      "cloudddp-output": ("models", "run7/"), "cloudddp-checkpoint": ("models", "ckpt/")}  # fmt: skip
    env = group.job_configuration_details.environment_variables
    assert env["CLOUDDDP_CHANNEL_TRAIN"] == "/mnt/cloudddp-in-train"
    assert env["CLOUDDDP_OUTPUT_DIR"] == "/mnt/cloudddp-output"
    assert env["CLOUDDDP_CHECKPOINT_DIR"] == "/mnt/cloudddp-checkpoint"
    assert parts.output_uri == "oci://models@ns/run7"
    assert [u.kind for u in parts.uploads] == ["archive"]


def test_compartment_and_project_come_from_the_notebook_session_environment(tmp_path: Path) -> None:
    environ = {"NB_SESSION_COMPARTMENT_OCID": COMPARTMENT, "PROJECT_OCID": PROJECT}
    job_request = render(tmp_path, environ=environ, oci={"compartment_id": None, "project_id": None})
    assert job_request.parts.create_job.compartment_id == COMPARTMENT
    assert job_request.before_submit.to_document()["from_environment"] == {"compartment_id": "NB_SESSION_COMPARTMENT_OCID",
                                                    "project_id": "PROJECT_OCID"}  # fmt: skip


@pytest.mark.parametrize(
    ("oci_fields", "message"),
    [
        ({"compartment_id": None}, "oci.compartment_id is required"),
        ({"project_id": None}, "oci.project_id is required"),
        ({"compartment_id": "oci.xxxx.<compartment_ocid>"}, "is not an OCID"),
        (
            {"project_id": "ocid1.compartment.oc1..aaaa"},
            "is the OCID of a compartment, but project_id needs a datascienceproject",
        ),
        ({"subnet_id": "ocid1.subnet.oc1.iad"}, "oci.subnet_id='ocid1.subnet.oc1.iad' is not an OCID"),
        (
            {"log_group_id": None, "log_id": "ocid1.log.oc1.iad.aaaa"},
            "oci.log_id='ocid1.log.oc1.iad.aaaa' is set without oci.log_group_id",
        ),
        ({"image": None}, "oci.image is required"),
        ({"image": "pytorch/pytorch:2.5.1"}, "OCI Container Registry only"),
        ({"shape": "VM.Standard2.1"}, "cannot run multi-node jobs"),
        ({"shape": "n1-standard-8"}, "is not an OCI shape name"),
        ({"shape": "VM.GPU.A10.2", "ocpus": 4}, "apply to flexible shapes only"),
        ({"block_storage_gb": 49}, "at least 50 GB of block storage"),
        ({"work_dir": None}, "oci.work_dir is required"),
        ({"work_dir": "s3://bucket/prefix"}, "must look like oci://bucket@namespace/prefix"),
        # Regions: oci.regions (the SDK's offline table), not a pattern.
        (
            {"region": "us-ashburn-1 "},
            "oci.region='us-ashburn-1 ' is not an OCI region (it has spaces around it). Did you mean 'us-ashburn-1'?",
        ),
        ({"region": "nowhere-1"}, "oci.region='nowhere-1' is not an OCI region."),
        ({"region": "US-ASHBURN-1"}, "(region names are lower case)"),
        # Flexible shapes: ranges from the Data Science "Supported Compute Shapes" table.
        ({"ocpus": 200}, "oci.ocpus=200: VM.Standard.E4.Flex takes 1 to 114 OCPUs."),
        ({"ocpus": 0.5}, "oci.ocpus=0.5: VM.Standard.E4.Flex takes 1 to 114 OCPUs."),
        (
            {"ocpus": 4, "memory_in_gbs": 300},
            "oci.memory_in_gbs=300 with oci.ocpus=4: VM.Standard.E4.Flex takes 4 to 256 GB for 4 OCPUs",
        ),
        ({"ocpus": 8, "memory_in_gbs": 4}, "takes 8 to 512 GB for 8 OCPUs"),
        ({"memory_in_gbs": 200}, "oci.memory_in_gbs=200 with oci.ocpus=2 (default)"),
        ({"shape": "VM.Optimized3.Flex", "ocpus": 16, "memory_in_gbs": 300}, "takes 16 to 256 GB"),
        ({"shape": "VM.Standard.E9.Flex"}, "'VM.Standard.E9.Flex' is not a flexible shape Data Science runs."),
        ({"shape": "VM.Standard.E4.flex"}, "cannot run multi-node jobs"),
        (
            {"shape": "VM.GPU.A10.3"},
            "is not a GPU shape cloudddp knows. Did you mean VM.GPU.A10.2 or VM.GPU.A10.1 or BM.GPU.A10.4?",
        ),
        # Object Storage URIs whose prefix the mount and the staging would read differently.
        ({"work_dir": "oci://bkt@ns/team//run"}, "the prefix has an empty segment (//)"),
        ({"work_dir": "oci://bkt@ns/team/../run"}, "the prefix has a '.' or '..' segment"),
        ({"work_dir": "oci://bkt@ns/team?x=1"}, "the prefix has a '?'"),
        ({"work_dir": "oci://bkt@ns/team run"}, "white space"),
    ],
)
def test_bad_settings_fail_at_render_with_the_field_named(
    tmp_path: Path, oci_fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(CloudDDPError, match=None) as caught:
        render(tmp_path, oci=oci_fields)
    assert message in str(caught.value)


def test_valid_names_the_sdk_and_the_tables_know_pass(tmp_path: Path) -> None:
    for fields in ({"region": "us-ashburn-1"}, {"region": "iad"}, {"shape": "BM.GPU.A100-v2.8"},
                   {"shape": "VM.Standard.E4.Flex", "ocpus": 114, "memory_in_gbs": 1760},
                   {"shape": "VM.Standard.A1.Flex", "ocpus": 1, "memory_in_gbs": 1}, {"work_dir": "oci://bkt@ns/a/b/"}):  # fmt: skip
        render(tmp_path, oci=fields)


def test_a_region_newer_than_the_sdk_passes_when_oci_region_metadata_describes_it(tmp_path: Path) -> None:
    metadata = '{"realmKey": "oc1", "realmDomainComponent": "oraclecloud.com", "regionKey": "new", "regionIdentifier": "xx-new-1"}'
    with pytest.raises(CloudDDPError, match="upgrade the oci package or describe it in OCI_REGION_METADATA"):
        render(tmp_path, oci={"region": "xx-new-1"})
    render(tmp_path, environ={"OCI_REGION_METADATA": metadata}, oci={"region": "xx-new-1"})


def test_a_gpu_shape_newer_than_the_table_passes_when_allowed(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match="CLOUDDDP_OCI_ALLOW_UNKNOWN_SHAPE=1"):
        render(tmp_path, oci={"shape": "BM.GPU.X9.8"})
    render(tmp_path, environ={"CLOUDDDP_OCI_ALLOW_UNKNOWN_SHAPE": "1"}, oci={"shape": "BM.GPU.X9.8"})


def test_channel_names_with_dashes_and_dots_reach_the_script_as_variable_names(tmp_path: Path) -> None:
    # As on Slurm and Kubernetes (cluster.environment.channel_variable); these channels were refused on OCI.
    (tmp_path / "data").mkdir()
    parts = render(tmp_path, inputs={"my-data": str(tmp_path / "data"), "v1.2": "oci://data@ns/v1"}).parts
    (group,) = parts.create_job.job_node_configuration_details.job_node_group_configuration_details_list
    env = group.job_configuration_details.environment_variables
    assert env["CLOUDDDP_CHANNEL_MY_DATA"] == "/mnt/cloudddp/inputs/my-data/v-<hash-at-submit>"
    assert env["CLOUDDDP_CHANNEL_V1_2"] == "/mnt/cloudddp-in-v1.2"


def test_variable_names_that_are_not_environment_variable_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match="environment 'MY-VAR': not valid environment variable names"):
        render(tmp_path, environment={"MY-VAR": "1"})


def test_environment_over_20000_characters_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match=r"hold 20,\d\d\d characters .* allows 20,000\. Largest: BIG"):
        render(tmp_path, environment={"BIG": "x" * 19_900})
    render(tmp_path, environment={"BIG": "x" * 19_700})  # under the limit with cloudddp's own variables


def test_cmd_plus_entrypoint_must_stay_under_2048_bytes_and_the_error_says_how_many_over(tmp_path: Path) -> None:
    # The oci SDK documents the rule on OcirContainerJobEnvironmentConfigurationDetails.cmd/.entrypoint
    # (oci 2.189.0): "The combined size of `CMD` and `ENTRYPOINT` must be less than 2048 bytes."
    room = 2047 - oci_node.command_bytes(oci_node.ENTRYPOINT, [""])
    assert room > 1500  # the entrypoint is short: the node script travels in the archive
    largest = render(tmp_path, args=["a" * room]).parts
    container = largest.create_job.job_node_configuration_details.job_node_group_configuration_details_list[0]
    sent = oci.util.to_dict(container.job_environment_configuration_details)
    assert (
        len(json.dumps(sent["entrypoint"], separators=(",", ":")) + json.dumps(sent["cmd"], separators=(",", ":")))
        == 2047
    )
    with pytest.raises(CloudDDPError, match=r"container command is 2,048 bytes.* under 2,048 bytes: 1 byte\(s\) over"):
        render(tmp_path, args=["a" * (room + 1)])
    with pytest.raises(CloudDDPError, match=r": 6 byte\(s\) over"):
        render(tmp_path, args=["a" * (room - 10)], hyperparameters={"lr": "0.0001"})  # ,"--lr","0.0001": 16 bytes


def test_a_node_group_below_one_replica_is_refused_by_the_job_spec(tmp_path: Path) -> None:
    """The node count is checked once, in the job spec (`nodes`), before the OCI request is built."""
    with pytest.raises(CloudDDPError, match=r"nodes: Input should be greater than or equal to 1 \(got 0\)"):
        render(tmp_path, nodes=0)


def test_secret_environment_variables_never_reach_the_job(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match=r"environment\.HF_TOKEN looks like a secret") as caught:
        render(tmp_path, environment={"HF_TOKEN": "hf_abcdef123"})
    assert "hf_abcdef123" not in str(caught.value)


def test_a_vault_secret_ocid_under_a_secret_looking_name_is_the_recommended_way_and_passes(tmp_path: Path) -> None:
    # README, Secrets: pass the Vault secret's OCID and read it in the job with the resource principal. Its
    # resource type is `vaultsecret` (oci 2.189.0, oci/apm_synthetics/models/password_in_vault.py docstring).
    secret_id = "ocid1.vaultsecret.oc1.iad.amaaaaaagpihjxqadwyc4kjhpeis2bylhzmp5r2si6mz2h4eujevnmf3zoca"
    parts = render(tmp_path, environment={"DB_PASSWORD_SECRET_ID": secret_id}).parts
    (group,) = parts.create_job.job_node_configuration_details.job_node_group_configuration_details_list
    assert group.job_configuration_details.environment_variables["DB_PASSWORD_SECRET_ID"] == secret_id
    # Any other OCID, or a secret's value, under such a name is still refused.
    for value in ("ocid1.vault.oc1.iad.aaaaaaaexample", "hunter2-but-longer"):
        with pytest.raises(CloudDDPError, match=r"environment\.DB_PASSWORD_SECRET_ID looks like a secret"):
            render(tmp_path, environment={"DB_PASSWORD_SECRET_ID": value})


def test_local_output_or_checkpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match=r"output='\./model': on OCI the output must be an oci://"):
        render(tmp_path, output="./model")
    with pytest.raises(CloudDDPError, match="checkpoint='/ckpt'"):
        render(tmp_path, checkpoint="/ckpt")


def test_missing_input_and_too_many_mounts(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match=r"inputs.train='/no/such/dir' does not exist"):
        render(tmp_path, inputs={"train": "/no/such/dir"})
    many = {f"c{i}": f"oci://b{i}@ns/x" for i in range(5)}
    with pytest.raises(CloudDDPError, match="needs 6 Object Storage mounts"):
        render(tmp_path, inputs=many)


@pytest.mark.process
def test_entrypoint_and_node_script_are_valid_posix_sh() -> None:
    subprocess.run(["sh", "-n", "-c", oci_node.NODE_SCRIPT], check=True)
    subprocess.run(["sh", "-n", "-c", oci_node.ENTRYPOINT_SCRIPT], check=True)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("ocid1.compartment.oc1..aaaaaaaa5tbquvc3", True),
        ("ocid1.tenancy.oc1..aaaaaaaaba3pv6wkcr4j", True),
        ("ocid1.datasciencejobrun.oc1.iad.amaaaaaa7uxnq", True),
        ("ocid1.datasciencejobrun.oc1.us-ashburn-1.future.amaaaaaa", True),
        ("ocid2.compartment.oc1..aaaa", False),
        ("ocid1.compartment.oc1.aaaa", False),
        ("ocid1.compartment..aaaa", False),
        ("ocid1.Compartment.oc1..aaaa", False),
        ("", False),
    ],
)
def test_ocid_format(value: str, ok: bool) -> None:
    assert bool(validation.OCID.fullmatch(value)) is ok


@pytest.mark.parametrize(
    "image",
    ["iad.ocir.io/ns/train", "iad.ocir.io/ns/Train:1", "iad.ocir.io/ns/train:1@sha256:xyz",
     "iad.ocir.io/ns/train:-1", "iad.ocir.io/NS/train:1"],
)  # fmt: skip
def test_an_image_the_service_would_not_pull_is_refused(tmp_path: Path, image: str) -> None:
    # oci 2.189.0 OcirContainerJobEnvironmentConfigurationDetails.image: <region>.ocir.io/<registry>/<image>:<tag>
    # (a tag in both documented forms); names, tags and digests as distribution/reference regexp.go (727f80d4).
    with pytest.raises(CloudDDPError, match="a tag is required, and the namespace and repository are lower-case"):
        render(tmp_path, oci={"image": image})


@pytest.mark.parametrize(
    "image",
    ["iad.ocir.io/ns/team/train:v1.2_rc-3", f"iad.ocir.io/ns/train:1@sha256:{'a' * 64}",
     "ocir.us-ashburn-1.oci.oraclecloud.com/ns/my__repo:latest"],
)  # fmt: skip
def test_documented_image_forms_pass(tmp_path: Path, image: str) -> None:
    parts = render(tmp_path, oci={"image": image}).parts
    (group,) = parts.create_job.job_node_configuration_details.job_node_group_configuration_details_list
    assert group.job_environment_configuration_details.image == image


@pytest.mark.parametrize("name", ["NODE_RANK", "INITIAL_CLUSTER_SIZE", "CLUSTER_NODES_METADATA_FILE", "JOB_RUN_OCID"])
def test_a_variable_the_service_sets_on_each_node_is_refused(tmp_path: Path, name: str) -> None:
    # shared/platforms.md: every node of a multi-node run gets its own NODE_RANK, INITIAL_CLUSTER_SIZE,
    # CLUSTER_NODES_METADATA_FILE, NODE_GROUP_NAME, JOB_OCID, JOB_RUN_OCID; the job's environment is one for all.
    # ADS reads the four tested here from the service: oracle/accelerated-data-science
    # ads/jobs/templates/driver_pytorch.py at 0e785b9fd36fb354019e0924b94ac2b0ec6f235a (CONST_ENV_NODE_RANK, ...).
    with pytest.raises(CloudDDPError, match=f"environment {name}: OCI Data Science sets this on each node"):
        render(tmp_path, environment={name: "0"})


def test_a_master_port_the_nodes_could_not_meet_on_is_refused_before_submit(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError, match=r"environment MASTER_PORT='abc' is not an integer"):
        render(tmp_path, environment={"MASTER_PORT": "abc"})
    with pytest.raises(CloudDDPError, match=r"environment MASTER_PORT='70000' is not a TCP port"):
        render(tmp_path, environment={"MASTER_PORT": "70000"})
    parts = render(tmp_path, environment={"MASTER_PORT": "29500"}).parts
    (group,) = parts.create_job.job_node_configuration_details.job_node_group_configuration_details_list
    assert group.job_configuration_details.environment_variables["MASTER_PORT"] == "29500"
