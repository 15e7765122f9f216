# ruff: noqa: F811  (fixtures imported from sagemaker_fixtures are redefined as arguments)
"""Metric definitions reach SageMaker as AlgorithmSpecification.MetricDefinitions, as the SDK v2 sends them
(the drop-in's equality with a recorded v2 request: test_sagemaker_dropin_requests.py, case metric_definitions),
within the model's limits; the drop-in takes v2's `metric_definitions` list."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.sagemaker_fixtures import FakeAWS, aws, aws_env, project, refused, spec_for  # noqa: F401  (fixtures)

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker.arguments import check_metric_definitions


def test_the_specs_metrics_are_sent_in_order_and_none_without(aws: FakeAWS, project: Path) -> None:
    metrics = {"train:loss": r"loss=([0-9.]+)", "val:acc": r"val_acc=([0-9.]+)"}
    sent = aws.provider.render(spec_for(project, metrics=metrics)).request["AlgorithmSpecification"]
    assert sent["MetricDefinitions"] == [{"Name": "train:loss", "Regex": r"loss=([0-9.]+)"},
                                         {"Name": "val:acc", "Regex": r"val_acc=([0-9.]+)"}]  # fmt: skip
    assert "MetricDefinitions" not in aws.provider.render(spec_for(project)).request["AlgorithmSpecification"]


def test_more_definitions_than_sagemaker_takes_are_refused_before_any_upload(aws: FakeAWS, project: Path) -> None:
    many = {f"m{i}": rf"m{i}=([0-9.]+)" for i in range(41)}  # the model's maximum: 40
    said = refused(aws, spec_for(project, metrics=many))
    assert said == "metrics: 41 metric definitions; SageMaker takes at most 40."


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ([{"Name": "loss"}], "must be a list of {'Name': ..., 'Regex': ...} dicts"),
        ({"Name": "loss", "Regex": "x"}, "must be a list"),
        ([{"Name": "a", "Regex": "a=([0-9]+)"}, {"Name": "a", "Regex": "b=([0-9]+)"}], "names a metric twice"),
        ([{"Name": "a", "Regex": "a=[0-9]+"}], "has no group"),
    ],
)
def test_the_drop_in_refuses_definitions_sagemaker_could_not_use(given: object, said: str) -> None:
    with pytest.raises(CloudDDPError, match="PyTorch\\(metric_definitions=") as refused_error:
        check_metric_definitions(given)
    assert said in str(refused_error.value)


def test_the_drop_in_keeps_v2s_order() -> None:
    given = [{"Name": "z", "Regex": "z=([0-9]+)"}, {"Name": "a", "Regex": "a=([0-9]+)"}]
    assert list(check_metric_definitions(given)) == ["z", "a"]
