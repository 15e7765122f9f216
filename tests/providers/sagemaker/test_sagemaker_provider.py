# ruff: noqa: F811  (pytest fixtures imported from sagemaker_fixtures are redefined as arguments)
"""The SageMaker provider in-process against moto: requests, staging, archive, errors.

Assertions are on the captured CreateTrainingJob request (moto drops fields such as
Environment) and on the objects moto's S3 holds.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from helpers.sagemaker_fixtures import (  # noqa: F401  (fixtures)
    ACCOUNT,
    BUCKET,
    BYO_IMAGE,
    REGION,
    ROLE,
    FakeAWS,
    archive_members,
    aws,
    aws_env,
    data_dir,
    project,
    spec_for,
)

from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker import request as request_module
from cloudddp.providers.sagemaker import service_model, validation
from cloudddp.providers.sagemaker.request import CODE_CHANNEL, ENTRYPOINT, TOOLKIT
from cloudddp.session import run_job


def launch(fake: FakeAWS, spec: Any) -> tuple[dict[str, Any], Any]:
    """Submit through the provider; return the captured request and the handle."""
    handle = fake.provider.submit(fake.provider.render(spec))
    assert len(fake.created) == 1
    return fake.created[0], handle


def hyperparameters(request: dict[str, Any]) -> dict[str, Any]:
    return {k: json.loads(v) for k, v in request["HyperParameters"].items()}


# -- the request --------------------------------------------------------------------------


def test_dlc_request_runs_the_bootstrap_through_the_training_toolkit(aws: FakeAWS, project: Path) -> None:
    spec = spec_for(project, hyperparameters={"epochs": 3, "lr": 0.1, "arch": "resnet"}, args=["--seed", "1"])
    sent, handle = launch(aws, spec)
    assert handle.job_id == sent["TrainingJobName"]
    assert sent["TrainingJobName"].startswith("t-")
    assert sent["RoleArn"] == ROLE
    assert sent["AlgorithmSpecification"] == {
        "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-cpu-py311",
        "TrainingInputMode": "File",
    }
    assert sent["ResourceConfig"] == {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30}
    assert sent["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400}
    assert sent["OutputDataConfig"] == {"S3OutputPath": f"s3://{BUCKET}/cloudddp/"}
    # Values are JSON-encoded strings, as the SDK sends them; the toolkit decodes them.
    assert all(isinstance(v, str) for v in sent["HyperParameters"].values())
    code_uri = f"s3://{BUCKET}/cloudddp/{handle.job_id}/source/sourcedir.tar.gz"
    assert hyperparameters(sent) == {
        "epochs": 3, "lr": 0.1, "arch": "resnet", "sagemaker_program": "cloudddp_bootstrap.py",
        "sagemaker_submit_directory": code_uri, "sagemaker_region": REGION, "sagemaker_container_log_level": 20,
        "sagemaker_job_name": handle.job_id,
    }  # fmt: skip
    assert "InputDataConfig" not in sent and "ContainerEntrypoint" not in sent["AlgorithmSpecification"]
    members = archive_members(aws.read(code_uri))
    job = json.loads(members["cloudddp_job.json"])
    assert job == {"entry_point": "train.py", "module": False, "args": ["--seed", "1"], "launcher_args": [],
                   "provider": "sagemaker", "mode": TOOLKIT}  # fmt: skip


def test_bring_your_own_image_uses_container_entrypoint_and_a_code_channel(aws: FakeAWS, project: Path) -> None:
    spec = spec_for(project, hyperparameters={"epochs": 2}, nproc_per_node=4, sagemaker={"image": BYO_IMAGE})
    sent, handle = launch(aws, spec)
    algorithm = sent["AlgorithmSpecification"]
    assert algorithm["TrainingImage"] == BYO_IMAGE
    assert algorithm["ContainerEntrypoint"] == ["/bin/sh", "-c"]
    (command,) = algorithm["ContainerArguments"]
    assert len(command) <= 256 and "cloudddp_bootstrap.py" in command and CODE_CHANNEL in command
    code_uri = f"s3://{BUCKET}/cloudddp/{handle.job_id}/source/sourcedir.tar.gz"
    assert sent["InputDataConfig"] == [
        {"ChannelName": CODE_CHANNEL, "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": code_uri, "S3DataDistributionType": "FullyReplicated"}}}
    ]  # fmt: skip
    assert not any(k.startswith("sagemaker_") for k in sent["HyperParameters"])
    assert sent["HyperParameters"] == {"epochs": "2"}
    # No SM_HP_* in Environment: the launcher derives them from hyperparameters.json, as the toolkit formats them.
    assert "Environment" not in sent
    job = json.loads(archive_members(aws.read(code_uri))["cloudddp_job.json"])
    assert job["launcher_args"] == ["--nproc-per-node=4", "--hyperparameters-as-args"]
    assert job["mode"] == ENTRYPOINT


@pytest.mark.parametrize("image", [None, BYO_IMAGE])
@pytest.mark.parametrize(
    "overrides",
    [
        {"hyperparameters": {"prompt": "a" * 600}},  # HyperParameterValue: at most 2500 (a variable: 512)
        {"hyperparameters": {"learning.rate": 0.1, "my key": 1, "my-key": 2, "my_key": 3}},  # HyperParameterKey: .*
        {"hyperparameters": {f"h{i}": 1 for i in range(60)}, "environment": {f"E{i}": "1" for i in range(41)}},
    ],
)
def test_hyperparameters_sagemaker_takes_are_taken_with_any_image(
    aws: FakeAWS, project: Path, image: str | None, overrides: dict[str, Any]
) -> None:
    # A bring-your-own image copied each one into Environment as SM_HP_<KEY>, where the variables' limits (512
    # characters, names of letters/digits/_, 100 in all) refused them with an error about an --env never passed.
    spec = spec_for(project, sagemaker={"image": image} if image else {}, **overrides)
    sent = aws.provider.render(spec).request
    given = overrides["hyperparameters"]
    assert {k: json.loads(sent["HyperParameters"][k]) for k in given} == given
    assert sent.get("Environment", {}) == overrides.get("environment", {})


def test_a_too_long_hyperparameter_of_a_bring_your_own_job_is_named_as_one(aws: FakeAWS, project: Path) -> None:
    message = error_of(aws, spec_for(project, hyperparameters={"prompt": "a" * 2600}, sagemaker={"image": BYO_IMAGE}))
    assert message.startswith("hyperparameter 'prompt' is 2602 characters once encoded; SageMaker allows at most 2500")


def test_every_option_reaches_the_request(aws: FakeAWS, project: Path, data_dir: Path) -> None:
    spec = spec_for(
        project,
        nodes=3,
        max_runtime=3600,
        environment={"NCCL_DEBUG": "INFO"},
        inputs={"train": str(data_dir), "val": "s3://somewhere/val/"},
        sagemaker={
            "instance_type": "ml.c5.2xlarge", "spot": True, "max_wait": 7200, "checkpoint_s3": "s3://ckpts/run1",
            "subnets": ["subnet-1a", "subnet-2b"], "security_groups": ["sg-1"], "kms_key": "alias/mine",
            "network_isolation": True, "inter_container_encryption": True, "tags": {"team": "vision"},
            "bucket": "my-bucket", "prefix": "jobs/x", "volume_size_gb": 100,
        },
    )  # fmt: skip
    aws.client("s3").create_bucket(Bucket="my-bucket")
    sent, handle = launch(aws, spec)
    assert sent["ResourceConfig"] == {
        "InstanceType": "ml.c5.2xlarge", "InstanceCount": 3, "VolumeSizeInGB": 100, "VolumeKmsKeyId": "alias/mine",
    }  # fmt: skip
    assert sent["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert sent["EnableManagedSpotTraining"] is True
    assert sent["CheckpointConfig"] == {"S3Uri": "s3://ckpts/run1", "LocalPath": "/opt/ml/checkpoints"}
    assert sent["VpcConfig"] == {"SecurityGroupIds": ["sg-1"], "Subnets": ["subnet-1a", "subnet-2b"]}
    assert sent["OutputDataConfig"] == {"S3OutputPath": "s3://my-bucket/jobs/x/", "KmsKeyId": "alias/mine"}
    assert sent["EnableNetworkIsolation"] is True and sent["EnableInterContainerTrafficEncryption"] is True
    assert sent["Tags"] == [{"Key": "team", "Value": "vision"}]
    assert sent["Environment"] == {"NCCL_DEBUG": "INFO"}
    channels = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in sent["InputDataConfig"]}
    assert channels["val"] == "s3://somewhere/val/"
    assert channels["train"].startswith("s3://my-bucket/jobs/x/inputs/data-") and channels["train"].endswith("/")
    # Network isolation: the container cannot reach S3, so the code comes as a channel.
    assert channels[CODE_CHANNEL] == f"s3://my-bucket/jobs/x/{handle.job_id}/source/sourcedir.tar.gz"
    submit_dir = json.loads(sent["HyperParameters"]["sagemaker_submit_directory"])
    assert submit_dir == f"/opt/ml/input/data/{CODE_CHANNEL}/sourcedir.tar.gz"
    # Staged objects are encrypted with the key.
    s3 = aws.client("s3")
    for key in aws.object_keys("my-bucket"):
        head = s3.head_object(Bucket="my-bucket", Key=key)
        assert head["ServerSideEncryption"] == "aws:kms", key
        assert head["SSEKMSKeyId"].endswith("alias/mine") or head["SSEKMSKeyId"] == "alias/mine"


def test_kms_volume_key_is_left_out_for_instances_with_instance_storage(aws: FakeAWS, project: Path) -> None:
    spec = spec_for(project, sagemaker={"instance_type": "ml.g5.12xlarge", "kms_key": "alias/k"})
    request = aws.provider.render(spec)
    assert "VolumeKmsKeyId" not in request.request["ResourceConfig"]
    assert request.request["OutputDataConfig"]["KmsKeyId"] == "alias/k"
    assert "instance storage" in request.before_submit.warnings[0]
    assert request.request["AlgorithmSpecification"]["TrainingImage"].endswith("pytorch-training:2.5-gpu-py311")


def test_captured_request_is_what_render_built(aws: FakeAWS, project: Path) -> None:
    spec = spec_for(project, environment={"A": "1"})
    rendered = aws.provider.render(spec)
    aws.provider.submit(rendered)
    assert aws.created == [rendered.request]


def test_dry_run_prints_the_request_as_yaml_redacted_and_uploads_nothing(
    aws: FakeAWS, project: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_for(project, inputs={"train": str(data_dir)},
                    environment={"WANDB_API_KEY": "sk-live-1", "DB_PASSWORD": "hunter2", "PLAIN": "ok"})  # fmt: skip
    assert run_job("sagemaker", spec, dry_run=True) == 0
    out = capsys.readouterr().out
    assert "TrainingJobName: t-" in out and "sagemaker_program" in out and "before_submit:" in out
    assert "sk-live-1" not in out and "hunter2" not in out and "PLAIN: ok" in out
    assert aws.buckets() == [] and aws.created == []


# -- staging ------------------------------------------------------------------------------


def test_staged_objects_are_byte_identical_versioned_and_nothing_is_deleted(
    aws: FakeAWS, project: Path, data_dir: Path
) -> None:
    spec = spec_for(project, inputs={"train": str(data_dir)})
    sent, handle = launch(aws, spec)
    assert handle.details["request"].request == sent  # the handle keeps what was sent, not the dry run's
    (channel,) = [c for c in sent["InputDataConfig"] if c["ChannelName"] == "train"]
    first = channel["DataSource"]["S3DataSource"]["S3Uri"]
    # The channel reads the published version (cloudddp.staging.engine), not the staging prefix itself.
    assert re.fullmatch(r"s3://[^/]+/cloudddp/inputs/data-[0-9a-f]{10}/v-[0-9a-f]{16}/", first), first
    local = {p.relative_to(data_dir).as_posix(): p.read_bytes() for p in data_dir.rglob("*") if p.is_file()}
    assert len(local) == 3
    for name, content in local.items():
        assert aws.read(first + name) == content, name
    assert any("3 files, 3 objects uploaded" in line for line in aws.said), aws.said
    # Launch again with one file changed and one removed: a new version holding exactly the local files; the
    # first version stays whole (a running job may read it): no delete by default.
    (data_dir / "labels.csv").write_text("x,y\n3,4\n")
    (data_dir / "train" / "a" / "2.bin").unlink()
    aws.said.clear()
    aws.provider.submit(aws.provider.render(spec))
    assert any("1 object uploaded" in line and "1 copied from the previous version" in line for line in aws.said), (
        aws.said
    )
    second = aws.created[-1]["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"]
    assert second != first and second.rsplit("/v-", 1)[0] == first.rsplit("/v-", 1)[0]
    assert aws.read(second + "labels.csv") == b"x,y\n3,4\n"
    keys = aws.object_keys()
    in_second = sorted(k.split("/v-", 1)[1].split("/", 1)[1] for k in keys if second.split("/", 3)[3] in k)
    assert in_second == ["labels.csv", "train/a/1.bin"], in_second
    assert aws.read(first + "train/a/2.bin") == local["train/a/2.bin"]  # the first version is untouched


def test_default_bucket_is_created_private(aws: FakeAWS, project: Path) -> None:
    launch(aws, spec_for(project))
    assert aws.buckets() == [BUCKET]
    block = aws.client("s3").get_public_access_block(Bucket=BUCKET)["PublicAccessBlockConfiguration"]
    assert all(block.values())
    assert any("created the staging bucket" in line for line in aws.said)


def test_archive_holds_the_launcher_and_the_users_files_and_nothing_ignored(aws: FakeAWS, project: Path) -> None:
    _, handle = launch(aws, spec_for(project))
    members = archive_members(aws.read(f"s3://{BUCKET}/cloudddp/{handle.job_id}/source/sourcedir.tar.gz"))
    user = sorted(n for n in members if not n.startswith("cloudddp/") and not n.startswith("cloudddp_"))
    assert user == [".cloudddpignore", "pkg/__init__.py", "pkg/model.py", "train.py"]
    assert members["train.py"] == (project / "train.py").read_bytes()
    for needed in ("cloudddp_bootstrap.py", "cloudddp_job.json", "cloudddp/launcher/cli.py",
                   "cloudddp/cluster/sagemaker.py", "cloudddp/errors.py"):  # fmt: skip
        assert needed in members, needed
    # The job side is standard library only: no client-side modules travel.
    assert not any(n.startswith(("cloudddp/providers", "cloudddp/staging", "cloudddp/cli.py")) for n in members)


# -- validation: clear errors, nothing uploaded --------------------------------------------


def error_of(fake: FakeAWS, spec_or_call: Any) -> str:
    with pytest.raises(CloudDDPError) as info:
        if callable(spec_or_call):
            spec_or_call()
        else:
            fake.provider.submit(fake.provider.render(spec_or_call))
    assert fake.buckets() == [] or fake.object_keys() == [], "something was uploaded"
    assert fake.created == []
    return str(info.value)


def test_no_role_is_an_error_naming_the_ways_to_give_one(aws: FakeAWS, project: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("CLOUDDDP_SAGEMAKER_ROLE")
    message = error_of(aws, spec_for(project))
    assert "--role" in message and "CLOUDDDP_SAGEMAKER_ROLE" in message


def test_a_role_that_is_not_an_arn_is_rejected(aws: FakeAWS, project: Path) -> None:
    assert "not an IAM role ARN" in error_of(aws, spec_for(project, sagemaker={"role": "MyRole"}))


def test_no_credentials_says_how_to_configure_them(aws: FakeAWS, project: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setattr(type(aws.provider), "session", lambda self, region: boto3.Session(region_name=region))
    with pytest.raises(CloudDDPError) as info:
        aws.provider.submit(aws.provider.render(spec_for(project)))
    message = str(info.value)
    assert "no AWS credentials" in message and "aws configure" in message and "AWS_ACCESS_KEY_ID" in message
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    assert aws.buckets() == [] and aws.created == []


def test_unknown_region_is_rejected(aws: FakeAWS, project: Path) -> None:
    message = error_of(aws, spec_for(project, sagemaker={"region": "us-middle-9"}))
    assert "unknown AWS region 'us-middle-9'" in message and "us-east-1" in message


def test_bucket_of_another_account_is_rejected(aws: FakeAWS, project: Path) -> None:
    credentials = aws.client("sts").assume_role(RoleArn="arn:aws:iam::111111111111:role/x", RoleSessionName="other")
    c = credentials["Credentials"]
    other = boto3.client(
        "s3", region_name=REGION, aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"],
        aws_session_token=c["SessionToken"],
    )  # fmt: skip
    other.create_bucket(Bucket="theirs")
    with pytest.raises(CloudDDPError, match="belongs to another account"):
        aws.provider.submit(aws.provider.render(spec_for(project, sagemaker={"bucket": "theirs"})))
    assert other.list_objects_v2(Bucket="theirs").get("KeyCount", 0) == 0
    assert aws.created == []


def test_default_bucket_name_taken_by_another_account_is_rejected(aws: FakeAWS, project: Path) -> None:
    c = aws.client("sts").assume_role(RoleArn="arn:aws:iam::111111111111:role/x", RoleSessionName="other")
    creds = c["Credentials"]
    boto3.client(
        "s3", region_name=REGION, aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"],
    ).create_bucket(Bucket=BUCKET)  # fmt: skip
    with pytest.raises(CloudDDPError, match="another account"):
        aws.provider.submit(aws.provider.render(spec_for(project)))
    assert aws.created == []


def test_bucket_that_is_not_writable_is_a_clear_error(aws: FakeAWS, project: Path) -> None:
    aws.client("s3").create_bucket(Bucket="read-only")

    def deny(params: dict[str, Any], **_: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "PutObject")

    aws.session.events.register("before-call.s3.PutObject", deny)
    with pytest.raises(CloudDDPError, match=r"s3://read-only/.*access denied.*grant s3:PutObject"):
        aws.provider.submit(aws.provider.render(spec_for(project, sagemaker={"bucket": "read-only"})))
    assert aws.created == []


def test_missing_user_bucket_is_not_created(aws: FakeAWS, project: Path) -> None:
    message = error_of(aws, spec_for(project, sagemaker={"bucket": "no-such-bucket"}))
    assert "does not exist" in message


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ({"sagemaker": {"spot": True}}, ["--spot", "--max-wait"]),
        ({"sagemaker": {"spot": True, "max_wait": 10}, "max_runtime": 20}, ["--max-wait 10", "--max-runtime 20"]),
        ({"sagemaker": {"instance_type": "g5.xlarge"}}, ["--instance-type 'g5.xlarge'"]),
        ({"inputs": {"train": "/nowhere/data"}}, ["--input train='/nowhere/data'", "does not exist"]),
        ({"inputs": {"train": "gs://bucket/x"}}, ["s3:// URIs or local folders"]),
        ({"inputs": {CODE_CHANNEL: "s3://b/x"}}, ["cloudddp's"]),
        ({"name": "x" * 50}, ["at most 63", "shorten `name` to at most 43"]),
        ({"sagemaker": {"subnets": ["subnet-1"]}}, ["--security-group"]),
        ({"environment": {"1BAD": "x"}}, ["--env '1BAD'"]),
        ({"environment": {f"V{i}": "x" for i in range(101)}}, ["101 environment variables", "at most 100"]),
        ({"hyperparameters": {f"h{i}": i for i in range(99)}}, ["hyperparameters", "at most 100"]),
        ({"hyperparameters": {"big": "x" * 3000}}, ["'big'", "at most 2500"]),
        ({"sagemaker": {"tags": {"aws:x": "1"}}}, ["--tag 'aws:x'"]),
        ({"sagemaker": {"bucket": "s3://b"}}, ["--bucket"]),
        ({"entry_point": "missing.py"}, ["entry_point 'missing.py'", "does not exist"]),
        # 1.0 is in the one image table (test_sagemaker_one_image_table.py); 3.0 is in no table
        ({"sagemaker": {"framework_version": "3.0"}}, ["framework_version='3.0'", "--image"]),
        ({"sagemaker": {"py_version": "py39"}}, ["py_version='py39'"]),
        # issue 9: what the service would refuse
        # ml.g5 has 12xlarge and 16xlarge but no 13xlarge: botocore's TrainingInstanceType enum says so.
        ({"sagemaker": {"instance_type": "ml.g5.13xlarge"}}, ["'ml.g5.13xlarge'", "TrainingInstanceType", "ml.g5."]),
        ({"sagemaker": {"instance_type": "ml.p4.24xlarge"}}, ["'ml.p4.24xlarge'", "Did you mean ml.p4d.24xlarge"]),
        ({"max_runtime": 28 * 86400 + 1}, ["--max-runtime 2419201", "28 days"]),
        (
            {"sagemaker": {"spot": True, "max_wait": 3599}, "max_runtime": 3600},
            ["--max-wait 3599", "--max-runtime 3600"],
        ),
        (
            {"checkpoint": "./ckpt", "sagemaker": {"checkpoint_s3": "s3://my-ckpts/c"}},
            ["both say where checkpoints go"],
        ),
        ({"checkpoint": "gs://b/c"}, ["checkpoint 'gs://b/c'", "s3:// URI or a local folder"]),
        ({"hyperparameters": {"lr": float("nan")}}, ["not a finite number", "NaN"]),
        ({"hyperparameters": {"clip": float("inf")}}, ["not a finite number"]),
    ],
)
def test_invalid_jobs_fail_before_anything_is_uploaded(
    aws: FakeAWS, project: Path, overrides: dict[str, Any], fragments: list[str]
) -> None:
    message = error_of(aws, spec_for(project, **overrides))
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_instance_count_below_one_is_rejected_by_the_job_spec(aws: FakeAWS, project: Path) -> None:
    """The node count is checked once, in the job spec (`nodes`), before the SageMaker request is built."""
    with pytest.raises(CloudDDPError, match=r"nodes: Input should be greater than or equal to 1 \(got 0\)"):
        spec_for(project, nodes=0)


def test_oversized_source_is_refused_and_large_source_warned(aws: FakeAWS, project: Path, monkeypatch: Any) -> None:
    (project / "blob.bin").write_bytes(b"\1" * 4096)
    monkeypatch.setattr(validation, "SOURCE_MAX_BYTES", 2048)
    message = error_of(aws, spec_for(project))
    assert "CLOUDDDP_MAX_SOURCE_MB" in message and ".cloudddpignore" in message
    monkeypatch.setattr(validation, "SOURCE_MAX_BYTES", 10**9)
    monkeypatch.setattr(validation, "SOURCE_WARN_BYTES", 2048)
    request = aws.provider.render(spec_for(project))
    assert "every host downloads it" in request.before_submit.warnings[0]


def test_generated_job_names_follow_sagemakers_rule() -> None:
    spec = spec_for(Path("."), name="a" * 43, entry_point="x.py")
    name = request_module.job_name_for(spec, now=1_700_000_000.123)
    assert name == "a" * 43 + "-20231114-221320-123" and len(name) == 63
    assert service_model.check_shape("TrainingJobName", name) is None
    for bad in ("-x", "x-", "x_y", "x" * 64, ""):
        with pytest.raises(CloudDDPError):
            validation.check_job_name(bad)


def test_limits_are_read_from_the_installed_botocores_service_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """A botocore whose model states another limit changes what is refused, with no copy in cloudddp to update."""
    environment = {f"V{i}": "x" for i in range(3)}
    validation.check_environment(environment)
    shape = service_model.shape("Environment")
    monkeypatch.setitem(shape.metadata, "max", 2)  # as a newer model might say
    with pytest.raises(CloudDDPError, match=r"3 environment variables .*at most 2"):
        validation.check_environment(environment)


@pytest.mark.process
def test_cli_and_launcher_do_not_import_boto3() -> None:
    code = "import sys, cloudddp.cli, cloudddp.launcher.cli; assert 'boto3' not in sys.modules, 'boto3 imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# -- issue 9: what the service would refuse, refused before anything is uploaded ----------


def test_training_instance_types_and_runtime_cap_come_from_botocores_model() -> None:
    import botocore.session

    # botocore is untyped: its shapes' CachedProperty attributes read as the descriptor to a type checker
    model: Any = botocore.session.get_session().get_service_model("sagemaker")
    assert validation.training_instance_types() == frozenset(model.shape_for("TrainingInstanceType").enum)
    stopping = model.operation_model("CreateTrainingJob").input_shape.members["StoppingCondition"].members
    assert "The maximum value is 28 days." in stopping["MaxRuntimeInSeconds"].documentation
    assert validation.MAX_RUNTIME_SECONDS == 28 * 86400
    assert "equal to or greater than <code>MaxRuntimeInSeconds</code>" in stopping["MaxWaitTimeInSeconds"].documentation
    validation.check_stopping(28 * 86400, spot=True, max_wait=28 * 86400)  # the limits themselves pass
    validation.check_instance("ml.p4d.24xlarge")


def refuse_create(fake: FakeAWS, code: str, message: str) -> None:
    """CreateTrainingJob answers as SageMaker does for a limit that only the account knows (HTTP 400, JSON)."""

    def answer(**_: Any) -> Any:
        body = json.dumps({"__type": code, "message": message}).encode()
        response = SimpleNamespace(status_code=400, headers={"x-amzn-requestid": "r1"}, content=body)
        return response, {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}}

    fake.session.events.register("before-call.sagemaker.CreateTrainingJob", answer)


def test_a_refused_create_training_job_removes_this_launchs_archive_and_checkpoint_copy(
    aws: FakeAWS, project: Path, data_dir: Path, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "last.pt").write_bytes(b"weights")
    refuse_create(aws, "ResourceLimitExceeded",
                  "The account-level service limit 'ml.m5.xlarge for training job usage' is 1 Instances")  # fmt: skip
    spec = spec_for(project, inputs={"train": str(data_dir)}, checkpoint=str(checkpoint))
    with pytest.raises(CloudDDPError) as info:
        aws.provider.submit(aws.provider.render(spec))
    message = str(info.value)
    assert "ResourceLimitExceeded" in message and "service limit" in message
    assert "sourcedir.tar.gz" in message and "last.pt" in message and "inputs stay" in message
    keys = aws.object_keys()
    assert not any(k.endswith("sourcedir.tar.gz") for k in keys), keys
    assert not any("/checkpoints/" in k for k in keys), keys
    # kept: the next launch reuses them (3 files of the version + its manifest)
    assert sum("/inputs/" in k for k in keys) == 4


# -- issue 9: checkpoints are never dropped -----------------------------------------------


def test_a_spot_job_without_a_checkpoint_gets_one_in_the_staging_bucket(aws: FakeAWS, project: Path) -> None:
    spec = spec_for(project, sagemaker={"spot": True, "max_wait": 7200}, max_runtime=3600)
    sent, handle = launch(aws, spec)
    assert sent["CheckpointConfig"] == {
        "S3Uri": f"s3://{BUCKET}/cloudddp/{handle.job_id}/checkpoints/", "LocalPath": "/opt/ml/checkpoints",
    }  # fmt: skip
    assert any("spot job without a checkpoint location" in line for line in aws.said), aws.said


def test_a_local_checkpoint_folder_is_uploaded_and_the_job_resumes_from_it(
    aws: FakeAWS, project: Path, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "ckpt"
    (checkpoint / "epoch-3").mkdir(parents=True)
    (checkpoint / "epoch-3" / "model.pt").write_bytes(b"\x00weights\x01")
    (checkpoint / "latest").write_text("epoch-3\n")
    # The README's own example: spot with `checkpoint: ./ckpt`.
    spec = spec_for(project, checkpoint=str(checkpoint), sagemaker={"spot": True, "max_wait": 86400})
    sent, handle = launch(aws, spec)
    uri = sent["CheckpointConfig"]["S3Uri"]
    assert uri == f"s3://{BUCKET}/cloudddp/{handle.job_id}/checkpoints/"
    assert sent["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    assert aws.read(uri + "epoch-3/model.pt") == b"\x00weights\x01"
    assert aws.read(uri + "latest") == b"epoch-3\n"
    assert any("staged checkpoint: 2 uploaded" in line for line in aws.said), aws.said
    assert any("uploaded to" in line and "not back to" in line for line in aws.said), aws.said


def test_a_missing_local_checkpoint_folder_is_a_warning_not_a_silent_drop(
    aws: FakeAWS, project: Path, tmp_path: Path
) -> None:
    sent, handle = launch(aws, spec_for(project, checkpoint=str(tmp_path / "not-yet")))
    assert sent["CheckpointConfig"]["S3Uri"] == f"s3://{BUCKET}/cloudddp/{handle.job_id}/checkpoints/"
    assert any("does not exist, so there is nothing to resume from" in line for line in aws.said), aws.said


def test_an_s3_checkpoint_is_used_as_given(aws: FakeAWS, project: Path) -> None:
    sent, _ = launch(aws, spec_for(project, checkpoint="s3://my-ckpts/run-1"))
    assert sent["CheckpointConfig"] == {"S3Uri": "s3://my-ckpts/run-1", "LocalPath": "/opt/ml/checkpoints"}


# -- issue 9: hyperparameters keep the value the user typed -------------------------------


def test_cli_hyperparameters_reach_the_script_exactly_as_typed(aws: FakeAWS, project: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cloudddp.cli import app
    from cloudddp.cluster.sagemaker import hyperparameter_args

    typed = {"version": "1.10", "run_id": "007", "steps": "1_000", "flag": "true", "lr": "1e-3", "nan": "nan"}
    args = ["launch", "-p", "sagemaker", "--dry-run", "--region", REGION, str(project / "train.py")]
    for key, value in typed.items():
        args += ["-H", f"{key}={value}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    import yaml

    sent = yaml.safe_load(result.output)["request"]["HyperParameters"]
    assert {k: json.loads(sent[k]) for k in typed} == typed
    # On the instance, the toolkit / cloudddp's launcher decodes hyperparameters.json back into arguments.
    (tmp_path / "hyperparameters.json").write_text(json.dumps(sent))
    got = hyperparameter_args({"SM_INPUT_CONFIG_DIR": str(tmp_path)})
    for key, value in typed.items():
        assert got[got.index(f"--{key}") + 1] == value


def test_yaml_typed_hyperparameters_are_encoded_as_the_sdk_v2_does(aws: FakeAWS, project: Path) -> None:
    # aws/sagemaker-python-sdk v2.257.6 (fc582aaa46faf7b7e16ab1e13840869712174cd0), src/sagemaker/estimator.py:
    # Framework.hyperparameters() -> EstimatorBase._json_encode_hyperparameters: json.dumps(v) for every value.
    values: dict[str, Any] = {"epochs": 5, "lr": 0.001, "aug": True, "arch": "resnet18", "version": "1.10"}
    sent, _ = launch(aws, spec_for(project, hyperparameters=values))
    for key, value in values.items():
        assert sent["HyperParameters"][key] == json.dumps(value)
    for text in sent["HyperParameters"].values():
        assert "NaN" not in text and "Infinity" not in text


# -- issue 9 point 16: secrets ------------------------------------------------------------


def test_dry_run_hides_url_passwords_and_warns_about_secrets_in_the_job_environment(
    aws: FakeAWS, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = spec_for(project, environment={"DB_URL": "postgres://user:s3cr3t@db.internal/app", "EPOCHS": "3",
                                          "DATA": "https://ghp_tok3n@github.com/org/data.git"})  # fmt: skip
    assert run_job("sagemaker", spec, dry_run=True) == 0
    out = capsys.readouterr().out
    assert "s3cr3t" not in out and "ghp_tok3n" not in out
    assert "postgres://user:***@db.internal/app" in out and "https://***@github.com/org/data.git" in out
    # In HyperParameters, which DescribeTrainingJob shows in clear, the same URL is refused (secrets_policy.py).
    given = spec_for(project, hyperparameters={"data": "https://ghp_tok3n@github.com/org/data.git"})
    with pytest.raises(CloudDDPError) as refused:
        run_job("sagemaker", given, dry_run=True)
    assert "hyperparameters.data='https://***@github.com/org/data.git' holds a password" in str(refused.value)
    assert "ghp_tok3n" not in str(refused.value) + capsys.readouterr().out
    document = yaml.safe_load(out)
    (warning,) = [w for w in document["before_submit"]["warnings"] if "DB_URL" in w]
    assert "anyone who can describe the job" in warning and "AWS Secrets Manager" in warning
    # What is sent stays what the user gave: the job needs the real value.
    assert aws.provider.render(spec).request["Environment"]["DB_URL"] == "postgres://user:s3cr3t@db.internal/app"


def test_the_secret_warning_is_printed_when_the_job_is_submitted(aws: FakeAWS, project: Path) -> None:
    launch(aws, spec_for(project, environment={"HF_TOKEN": "hf_live"}))
    assert any("warning: HF_TOKEN looks like a secret" in line for line in aws.said), aws.said
    assert not any("hf_live" in line for line in aws.said)
