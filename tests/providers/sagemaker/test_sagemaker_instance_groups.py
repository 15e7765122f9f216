# ruff: noqa: F811  (pytest fixtures imported from sagemaker_fixtures are redefined as arguments)
"""Heterogeneous clusters and CheckpointConfig.LocalPath in the SageMaker provider (`cloudddp launch -p sagemaker`).

The rules are botocore's SageMaker service model (API 2017-07-24: ResourceConfig.InstanceGroups, InstanceGroup,
CheckpointConfig.LocalPath; a test below reads the limits there) and the SDK v2's
`job.py: _Job._prepare_resource_config` (aws/sagemaker-python-sdk v2.257.6): InstanceGroups or
InstanceType/InstanceCount, never both. The SDK v2 drop-in's requests with instance groups are compared with
recorded SDK v2 requests in tests/providers/sagemaker_sdk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import cli
from helpers.sagemaker_fixtures import (  # noqa: F401  (fixtures)
    REGION,
    FakeAWS,
    archive_members,
    aws,
    aws_env,
    project,
    refused,
)

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import JobSpec, build_spec
from cloudddp.providers.local.layout import node_layouts
from cloudddp.providers.sagemaker.provider import SageMakerProvider
from cloudddp.sagemaker.debugger import debugger_request

GROUPS = [
    {"name": "data", "instance_type": "ml.c5.2xlarge", "count": 1},
    {"name": "train", "instance_type": "ml.g5.12xlarge", "count": 2},
]


def hetero_spec(project: Path, **sagemaker: Any) -> JobSpec:
    data: dict[str, Any] = {"name": "t", "entry_point": "train.py", "source_dir": str(project)}
    data["sagemaker"] = {"region": REGION, "instance_groups": GROUPS, "distribution_groups": ["train"], **sagemaker}
    return build_spec(data)


def test_instance_groups_become_resource_config_instance_groups_and_the_launchers_groups(
    aws: FakeAWS, project: Path
) -> None:
    handle = aws.provider.submit(aws.provider.render(hetero_spec(project, kms_key="alias/train")))
    (sent,) = aws.created
    assert sent["ResourceConfig"] == {
        "InstanceGroups": [
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.2xlarge", "InstanceCount": 1},
            {"InstanceGroupName": "train", "InstanceType": "ml.g5.12xlarge", "InstanceCount": 2},
        ],
        "VolumeSizeInGB": 30,  # no VolumeKmsKeyId: ml.g5 has instance storage, which SageMaker encrypts itself
    }
    # The image is chosen for the GPU group, as the SDK v2 does (EstimatorBase._get_instance_type).
    assert sent["AlgorithmSpecification"]["TrainingImage"].endswith(":2.5-gpu-py311")
    submit = json.loads(sent["HyperParameters"]["sagemaker_submit_directory"])
    job = json.loads(archive_members(aws.read(submit))["cloudddp_job.json"])
    assert "--instance-groups=train" in job["launcher_args"]  # hosts of "data" sit the job out
    assert handle.job_id == sent["TrainingJobName"]


@pytest.mark.parametrize(
    ("extra", "sagemaker", "message"),
    [
        ({"nodes": 3}, {}, "so --nodes must not be"),
        ({}, {"instance_type": "ml.m5.xlarge"}, "so --instance-type must not be"),
        ({}, {"distribution_groups": ["gpus"]}, "names 'gpus', which is not among sagemaker.instance_groups"),
        ({}, {"instance_groups": [{**GROUPS[0], "instance_type": "ml.c5.3xlarge"}]}, "'ml.c5.3xlarge' is not a"),
        ({}, {"instance_groups": [GROUPS[1], GROUPS[1]]}, "names the group 'train' twice"),
        # The launcher splits --instance-groups on ",": such a group would be two unknown groups on every host.
        ({}, {"instance_groups": [GROUPS[0], {**GROUPS[1], "name": "gpu,train"}], "distribution_groups": ["gpu,train"]},
         "the group name 'gpu,train' holds a comma"),
        ({}, {"instance_groups": [{**GROUPS[0], "name": "a,b"}, GROUPS[1]]}, "the group name 'a,b' holds a comma"),
        # No host would run the script: the job would fail after the other groups' instances were billed.
        ({}, {"instance_groups": [GROUPS[0], {**GROUPS[1], "count": 0}]}, "['train'] names only groups with count 0"),
        ({}, {"instance_groups": [{**GROUPS[1], "name": ""}]}, "is 0 characters; SageMaker takes 1-64"),
        ({}, {"instance_groups": [{**GROUPS[1], "count": -1}]}, "count is -1"),
        ({}, {"instance_groups": [{**GROUPS[1], "count": 0}]}, "no instance at all"),
        ({}, {"instance_groups": [{**GROUPS[1], "name": f"g{i}"} for i in range(6)]}, "at most 5"),
        ({}, {"instance_groups": [], "distribution_groups": ["train"]}, "sagemaker.instance_groups is empty"),
        ({}, {"checkpoint_s3": "s3://bucket-x/ck", "checkpoint_local_path": "/" + "c" * 4096}, "takes 1-4096"),
    ],
)  # fmt: skip
def test_what_sagemaker_refuses_about_instance_groups_fails_before_any_upload(
    extra: dict[str, Any], sagemaker: dict[str, Any], message: str, aws: FakeAWS, project: Path
) -> None:
    data: dict[str, Any] = {"name": "t", "entry_point": "train.py", "source_dir": str(project), **extra}
    data["sagemaker"] = {"region": REGION, "instance_groups": GROUPS, "distribution_groups": ["train"], **sagemaker}
    assert message in refused(aws, build_spec(data))


def test_distribution_groups_need_one_group_with_instances_not_all(aws: FakeAWS, project: Path) -> None:
    groups = [{**GROUPS[0], "count": 0}, GROUPS[1], {**GROUPS[1], "name": "spare", "count": 0}]
    aws.provider.render(hetero_spec(project, instance_groups=groups, distribution_groups=["train", "spare"]))
    aws.provider.render(hetero_spec(project, instance_groups=groups, distribution_groups=None))


def test_the_dry_run_refuses_a_group_name_with_a_comma(aws_env: None, project: Path, tmp_path: Path) -> None:
    spec = tmp_path / "hg2.yaml"
    spec.write_text(json.dumps({
        "name": "hg2", "entry_point": "train.py", "source_dir": str(project),
        "sagemaker": {"region": REGION, "role": "arn:aws:iam::123456789012:role/SM", "distribution_groups": ["gpu,train"],
                      "instance_groups": [GROUPS[0], {**GROUPS[1], "name": "gpu,train"}]},
    }))  # fmt: skip
    result = cli("launch", "-p", "sagemaker", "-f", str(spec), "--dry-run", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "'gpu,train' holds a comma" in " ".join(result.stderr.split()), result.stderr


def test_status_of_a_heterogeneous_job_lists_every_groups_hosts() -> None:
    # ResourceConfig of an InstanceGroups job has no InstanceCount: the hosts are algo-1..N over all groups.
    described = {
        "TrainingJobStatus": "InProgress", "SecondaryStatus": "Training",
        "ResourceConfig": {"InstanceGroups": [
            {"InstanceGroupName": "data", "InstanceType": "ml.c5.2xlarge", "InstanceCount": 1},
            {"InstanceGroupName": "train", "InstanceType": "ml.g5.12xlarge", "InstanceCount": 2}], "VolumeSizeInGB": 30},
    }  # fmt: skip
    status = SageMakerProvider.to_status("j", described)
    assert status.nodes == {"algo-1": "Training", "algo-2": "Training", "algo-3": "Training"}
    homogeneous = {**described, "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 3}}
    assert SageMakerProvider.to_status("j", homogeneous).nodes == status.nodes
    assert SageMakerProvider.to_status("j", {"TrainingJobStatus": "InProgress"}).nodes == {}


def test_the_instance_type_of_a_group_is_botocores_training_instance_type() -> None:
    import botocore.session

    # botocore is untyped: its shapes' CachedProperty attributes read as the descriptor to a type checker
    model: Any = botocore.session.get_session().get_service_model("sagemaker")
    resource = model.operation_model("CreateTrainingJob").input_shape.members["ResourceConfig"].members
    assert resource["InstanceGroups"].member.members["InstanceType"].name == "TrainingInstanceType"


def test_checkpoint_local_path_is_the_checkpoint_configs_local_path(aws: FakeAWS, project: Path) -> None:
    spec = build_spec({
        "name": "t", "entry_point": "train.py", "source_dir": str(project), "nodes": 2,
        "sagemaker": {"region": REGION, "checkpoint_s3": "s3://bucket-x/ck/", "checkpoint_local_path": "/opt/ml/ckpt"},
    })  # fmt: skip
    rendered = aws.provider.render(spec)
    assert rendered.request["CheckpointConfig"] == {"S3Uri": "s3://bucket-x/ck/", "LocalPath": "/opt/ml/ckpt"}
    assert rendered.request["ResourceConfig"]["InstanceCount"] == 2


def test_local_emulation_puts_the_checkpoint_folder_under_each_hosts_opt_ml(tmp_path: Path, project: Path) -> None:
    def layout(local_path: str) -> Any:
        spec = build_spec({"name": "t", "entry_point": "train.py", "source_dir": str(project), "nodes": 2,
                           "sagemaker": {"checkpoint_local_path": local_path}})  # fmt: skip
        return node_layouts(spec, tmp_path / "run", "t-1")

    nodes = layout("/opt/ml/ckpt/run")
    assert [n.checkpoint_dir for n in nodes] == [
        tmp_path / "run" / "nodes" / h / "ckpt" / "run" for h in ("algo-1", "algo-2")
    ]
    config = nodes[1].files[tmp_path / "run" / "nodes" / "algo-2" / "input" / "config" / "checkpointconfig.json"]
    assert config == {"LocalPath": str(nodes[1].checkpoint_dir)}
    for outside in ("/tmp/ckpt", "/opt/ml/../etc", "/opt/ml/"):
        with pytest.raises(CloudDDPError, match="is not a folder under /opt/ml/"):
            layout(outside)


@pytest.mark.parametrize(
    ("region", "instance_type", "disable", "expected"),
    [  # fw_utils PROFILER_/DEBUGGER_UNSUPPORTED_REGIONS and _instance_type_supports_profiler (v2.257.6)
        ("us-east-1", "ml.g5.xlarge", False, {"ProfilerConfig": {"S3OutputPath": "s3://o/", "DisableProfiler": False},
                                              "DebugHookConfig": {"S3OutputPath": "s3://o/", "CollectionConfigurations": []}}),
        ("us-east-1", "ml.g5.xlarge", True, {"ProfilerConfig": {"DisableProfiler": True},
                                             "DebugHookConfig": {"S3OutputPath": "s3://o/", "CollectionConfigurations": []}}),
        ("us-east-1", "ml.trn1.32xlarge", False, {"ProfilerConfig": {"DisableProfiler": True},
                                                  "DebugHookConfig": {"S3OutputPath": "s3://o/", "CollectionConfigurations": []}}),
        ("me-central-1", "ml.g5.xlarge", False, {"ProfilerConfig": {"DisableProfiler": True}}),
    ],
)  # fmt: skip
def test_profiler_and_debugger_follow_the_sdk_v2s_region_and_instance_rules(
    region: str, instance_type: str, disable: bool, expected: dict[str, Any]
) -> None:
    fields = debugger_request(
        output_path="s3://o/", region=region, instance_type=instance_type, disable_profiler=disable,
        debugger_hook=True, checkpoint_s3_uri=None, checkpoint_local_path=None,
    )  # fmt: skip
    assert fields == expected
