# ruff: noqa: F811  (the fixtures imported from helpers are redefined as arguments)
"""A staging prefix that normalises to nothing ("/" or ""): the output path drops it as the code and input keys do.

`cloudddp launch -p sagemaker --prefix / --dry-run` used to show `S3OutputPath: s3://bucket//` beside code and
input keys with no leading slash.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers.sagemaker_fixtures import (  # noqa: F401  (fixtures)
    BUCKET,
    FakeAWS,
    aws,
    aws_env,
    data_dir,
    project,
    spec_for,
)

from cloudddp.providers.sagemaker.model_trainer import trainer_options


@pytest.mark.parametrize("prefix", ["/", "", "//"])
def test_an_empty_prefix_gives_one_slash_after_the_bucket_everywhere(
    prefix: str, aws: FakeAWS, project: Path, data_dir: Path
) -> None:
    spec = spec_for(project, inputs={"train": str(data_dir)}, sagemaker={"prefix": prefix})
    aws.provider.submit(aws.provider.render(spec))
    (sent,) = aws.created
    assert sent["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/"
    submit_dir = sent["HyperParameters"]["sagemaker_submit_directory"].strip('"')
    assert submit_dir.startswith(f"s3://{BUCKET}/t-") and "//" not in submit_dir.removeprefix("s3://")
    (channel,) = sent["InputDataConfig"]
    uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
    assert uri.startswith(f"s3://{BUCKET}/inputs/data-"), uri
    assert all(not key.startswith("/") and "//" not in key for key in aws.object_keys())


@pytest.mark.parametrize(("prefix", "output"), [("/", "s3://b/"), ("", "s3://b/"), ("/team/", "s3://b/team/")])
def test_the_model_trainer_output_path_normalises_the_prefix_too(project: Path, prefix: str, output: str) -> None:
    configs = SimpleNamespace(OutputDataConfig=lambda **kw: kw)
    spec = spec_for(project, sagemaker={"bucket": "b", "prefix": prefix})
    options: dict[str, Any] = trainer_options(spec, "b", configs)
    assert options["output_data_config"]["s3_output_path"] == output
