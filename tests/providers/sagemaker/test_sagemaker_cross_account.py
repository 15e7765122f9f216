# ruff: noqa: F811  (pytest fixtures imported from sagemaker_fixtures are redefined as arguments)
"""The one case where SageMaker's submit cannot send the dry run as printed: a role in another account than the
credentials (the dry run names the role's account's bucket; the caller can only stage in its own). Said aloud."""

from __future__ import annotations

from pathlib import Path

from helpers.sagemaker_fixtures import ACCOUNT, REGION, FakeAWS, aws, aws_env, project, spec_for  # noqa: F401  (fixtures)

OTHER_ROLE = "arn:aws:iam::111122223333:role/team-training"


def test_a_role_of_another_account_stages_in_the_callers_bucket_and_says_so(aws: FakeAWS, project: Path) -> None:
    spec = spec_for(project, sagemaker={"role": OTHER_ROLE})
    dry_run = aws.provider.render(spec)
    assert dry_run.before_submit.bucket == f"cloudddp-111122223333-{REGION}"
    aws.provider.submit(dry_run)
    ours = f"cloudddp-{ACCOUNT}-{REGION}"
    assert any(
        f"your credentials are for account {ACCOUNT}, not the role's: staging in s3://{ours} instead of "
        f"s3://cloudddp-111122223333-{REGION} (the dry run's)" in line
        for line in aws.said
    ), aws.said
    (created,) = aws.created
    assert created["OutputDataConfig"]["S3OutputPath"].startswith(f"s3://{ours}/")
    assert created["RoleArn"] == OTHER_ROLE
