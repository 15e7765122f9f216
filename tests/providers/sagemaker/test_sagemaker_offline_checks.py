# ruff: noqa: F811  (pytest fixtures imported from sagemaker_fixtures are redefined as arguments)
"""What CreateTrainingJob would refuse, refused offline (the dry run too) before anything is uploaded.

Patterns are botocore 1.44.8's SageMaker model (data/sagemaker/2017-07-24/service-2.json), which the service
matches against the whole value; lengths are its S3Uri max (1024). An empty local input folder is refused
before the source upload, and a failed staging step never claims that inputs were staged.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from helpers import cli
from helpers.sagemaker_fixtures import (  # noqa: F401  (fixtures)
    ACCOUNT,
    BYO_IMAGE,
    REGION,
    ROLE,
    FakeAWS,
    aws,
    aws_env,
    data_dir,
    project,
    refused,
    spec_for,
)

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.sagemaker import validation
from cloudddp.staging.engine import VERSION_FOLDER

SENT_VERSION = "v-" + "0" * 16 + "/"  # the length of the version folder a staged channel's URI ends in, as sent


# -- patterns: the whole value, as the service matches them ------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        # "$" matched before a final newline, so each of these passed the dry run and failed at CreateTrainingJob.
        ({"sagemaker": {"role": f"arn:aws:iam::{ACCOUNT}:role/SM\n"}}, "is not an IAM role ARN"),
        ({"sagemaker": {"role": "arn:aws:iam::١٢٣٤٥٦٧٨٩٠١٢:role/SM"}}, "is not an IAM role ARN"),  # \d took these
        ({"sagemaker": {"subnets": ["subnet-1\n"], "security_groups": ["sg-1"]}}, "'subnet-1\\n' is not a subnet"),
        ({"sagemaker": {"subnets": ["subnet-1"], "security_groups": ["sg-1\n"]}}, "'sg-1\\n' is not a subnet"),
        ({"sagemaker": {"kms_key": "alias/k\n"}}, "--kms-key 'alias/k\\n' is not a KMS key"),
        ({"environment": {"FOO\n": "1"}}, "--env 'FOO\\n'"),
        ({"sagemaker": {"bucket": "my-bucket\n"}}, "--bucket 'my-bucket\\n'"),
        ({"inputs": {"train": "s3://bucket-x/data\n"}}, "--input train 's3://bucket-x/data\\n'"),
        ({"sagemaker": {"checkpoint_s3": "s3://bucket-x/ck\r"}}, "--checkpoint-s3 's3://bucket-x/ck\\r'"),
        ({"output": "s3://bucket-x/out\u2028x"}, "output 's3://bucket-x/out\\u2028x'"),
        # TagValue/TagKey: [\p{L}\p{Z}\p{N}_.:/=+\-@]*; \s took tab and newline, which are not \p{Z}.
        ({"sagemaker": {"tags": {"team": "a\tb"}}}, "--tag team='a\\tb': tag values"),
        ({"sagemaker": {"tags": {"team": "ml\n"}}}, "--tag team='ml\\n': tag values"),
        ({"sagemaker": {"tags": {"te\nam": "ml"}}}, "--tag 'te\\nam': tag keys"),
        ({"sagemaker": {"tags": {"team": "a#b"}}}, "--tag team='a#b'"),
        ({"hyperparameters": {"a\nb": 1}}, "hyperparameter name 'a\\nb' holds a line break"),
    ],
)  # fmt: skip
def test_values_the_services_patterns_refuse_are_refused_offline(
    aws: FakeAWS, project: Path, overrides: dict[str, Any], fragment: str
) -> None:
    assert fragment in refused(aws, spec_for(project, **overrides))


def test_tags_take_any_letters_numbers_and_separators_as_the_model_says(aws: FakeAWS, project: Path) -> None:
    tags = {"équipe": "données ml", "k": "a\u3000b", "n": "٣", "e": "", "p": "_.:/=+-@"}
    request = aws.provider.render(spec_for(project, sagemaker={"tags": tags})).request
    assert request["Tags"] == [{"Key": k, "Value": v} for k, v in tags.items()]


def test_the_job_name_and_instance_group_names_are_matched_whole(aws: FakeAWS, project: Path) -> None:
    with pytest.raises(CloudDDPError, match="is invalid"):
        validation.check_job_name("train-1\n")
    groups = [{"name": "train\n", "instance_type": "ml.g5.12xlarge", "count": 1}]
    spec = build_spec({"name": "t", "entry_point": "train.py", "source_dir": str(project),
                       "sagemaker": {"region": REGION, "instance_groups": groups}})  # fmt: skip
    assert "the group name 'train\\n' holds a line break" in refused(aws, spec)


def test_the_patterns_followed_are_botocores() -> None:
    """The model's patterns that validation.py follows (its comment cites them); a botocore that changes one fails
    here, to be followed."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    expected = {
        "RoleArn": "arn:aws[a-z\\-]*:iam::\\d{12}:role/?[a-zA-Z_0-9+=,.@\\-_/]+",
        "TrainingJobName": "[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
        "ChannelName": "[A-Za-z0-9\\.\\-_]+",
        "TrainingEnvironmentKey": "[a-zA-Z_][a-zA-Z0-9_]*",
        "SubnetId": "[-0-9a-zA-Z]+",
        "SecurityGroupId": "[-0-9a-zA-Z]+",
        "KmsKeyId": "[a-zA-Z0-9:/_-]*",
        "TagKey": "([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)",
        "TagValue": "([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)",
        "HyperParameterKey": ".*",
        "InstanceGroupName": ".+",
        "S3Uri": "(https|s3)://([^/]+)/?(.*)",
    }
    assert {shape: model.shape_for(shape).metadata["pattern"] for shape in expected} == expected


# -- S3 URIs built from --prefix: at most 1024 characters ---------------------------------------------------------


def test_the_sent_version_folder_has_the_length_staging_gives_it() -> None:
    from cloudddp.providers.sagemaker import request

    assert request.SENT_VERSION == SENT_VERSION and VERSION_FOLDER.fullmatch(SENT_VERSION.replace("0", "a"))


@pytest.mark.parametrize(
    ("prefix", "image", "what"),
    [
        # The input channel's URI ends in the version folder staging publishes: its length counts, not the dry
        # run's longer placeholder.
        ("p" * 975, BYO_IMAGE, "the input channel 'train' (InputDataConfig S3Uri)"),
        ("p" * 975, None, "the input channel 'train' (InputDataConfig S3Uri)"),
        ("p" * 990, BYO_IMAGE, "the source archive"),
        ("p" * 990, None, "the source archive"),
    ],
)
def test_a_prefix_that_makes_a_uri_too_long_is_named_before_any_upload(
    aws: FakeAWS, project: Path, data_dir: Path, prefix: str, image: str | None, what: str
) -> None:
    sagemaker = {"prefix": prefix, "spot": True, "max_wait": 90000, **({"image": image} if image else {})}
    inputs = {"train": str(data_dir)} if "input" in what else {}
    message = refused(aws, spec_for(project, inputs=inputs, sagemaker=sagemaker))
    assert message.startswith("--prefix (sagemaker.prefix) 'pppp") and f"is {len(prefix)} characters" in message
    assert what in message and "SageMaker's S3Uri takes at most 1024" in message


def test_every_uri_of_the_longest_accepted_prefix_fits(aws: FakeAWS, project: Path, data_dir: Path) -> None:
    sagemaker = {"prefix": "p" * 900, "spot": True, "max_wait": 90000, "image": BYO_IMAGE}
    rendered = aws.provider.render(spec_for(project, inputs={"train": str(data_dir)}, sagemaker=sagemaker))
    request = rendered.request
    uris = [c["DataSource"]["S3DataSource"]["S3Uri"] for c in request["InputDataConfig"]]
    uris += [request["OutputDataConfig"]["S3OutputPath"], request["CheckpointConfig"]["S3Uri"]]
    staged = rendered.before_submit.inputs[0].target + SENT_VERSION
    assert all(len(uri) <= 1024 for uri in [*uris, staged]) and len(uris) == 4


@pytest.mark.parametrize("field", ["checkpoint_s3", "output"])
def test_a_users_own_uri_that_is_too_long_is_called_too_long(aws: FakeAWS, project: Path, field: str) -> None:
    uri = "s3://bucket-x/" + "k" * 1020
    overrides: dict[str, Any] = {"sagemaker": {"checkpoint_s3": uri}} if field == "checkpoint_s3" else {"output": uri}
    message = refused(aws, spec_for(project, **overrides))
    assert "is 1034 characters; SageMaker's S3 URIs take at most 1024" in message


# -- an empty local input folder -----------------------------------------------------------------------------------


def test_an_empty_input_folder_is_refused_before_the_source_upload(aws: FakeAWS, project: Path, tmp_path: Path) -> None:
    empty = tmp_path / "emptydir"
    (empty / "sub" / "deeper").mkdir(parents=True)
    os.symlink(empty / "sub", empty / "sub" / "deeper" / "loop")  # a loop of folders: still no file
    message = refused(aws, spec_for(project, inputs={"train": str(empty)}))
    assert message == (
        f"--input train={str(empty)!r}: the local folder {empty} holds no files, so there is nothing to stage for "
        f"the channel 'train'. Put the data there, or drop the input."
    )


def test_a_folder_holding_a_file_through_a_link_is_not_empty(aws: FakeAWS, project: Path, data_dir: Path) -> None:
    linked = data_dir.parent / "linked"
    linked.mkdir()
    os.symlink(data_dir, linked / "data")
    aws.provider.render(spec_for(project, inputs={"train": str(linked)}))


def test_the_dry_run_refuses_an_empty_folder_and_a_too_long_prefix(
    aws_env: None, project: Path, tmp_path: Path
) -> None:
    (tmp_path / "emptydir").mkdir()
    script, role = str(project / "train.py"), {"CLOUDDDP_SAGEMAKER_ROLE": ROLE}
    empty = cli("launch", "-p", "sagemaker", "-i", "train=./emptydir", "--dry-run", script, cwd=tmp_path, env=role)
    assert empty.returncode == 2 and "holds no files" in empty.stderr and "channel 'train'" in empty.stderr
    long = cli("launch", "-p", "sagemaker", "--prefix", "p" * 1000, "--dry-run", script, cwd=tmp_path, env=role)
    assert long.returncode == 2 and "--prefix (sagemaker.prefix)" in long.stderr, long.stderr


def test_a_failed_staging_step_names_only_the_inputs_staged_in_full(
    aws: FakeAWS, project: Path, data_dir: Path, tmp_path: Path
) -> None:
    # A broken link: the folder holds something, so it passes the offline check; staging then refuses it, after the
    # source upload. The error said "The staged inputs stay (...)" for inputs never staged.
    broken = tmp_path / "broken"
    broken.mkdir()
    os.symlink(tmp_path / "nowhere", broken / "gone.bin")
    with pytest.raises(CloudDDPError) as info:
        aws.provider.submit(aws.provider.render(spec_for(project, inputs={"train": str(broken)})))
    message = str(info.value)
    assert "is a broken symlink" in message and "sourcedir.tar.gz" in message
    assert "staged inputs stay" not in message
    with pytest.raises(CloudDDPError) as info:
        spec = spec_for(project, inputs={"a": str(data_dir), "b": str(broken)})
        aws.provider.submit(aws.provider.render(spec))
    message = str(info.value)
    assert "The staged inputs stay (s3://" in message and "/inputs/data-" in message
    assert "/inputs/broken-" not in message
