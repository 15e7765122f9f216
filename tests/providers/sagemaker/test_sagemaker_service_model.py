"""service_model.py: CreateTrainingJob's limits read from botocore's model, its Java patterns read as Java reads them."""

from __future__ import annotations

import pytest

from cloudddp.providers.sagemaker import service_model
from cloudddp.providers.sagemaker.service_model import check_shape, java_dots


def test_paths_reach_members_map_keys_list_members_and_named_shapes() -> None:
    assert service_model.shape("Environment.key").name == "TrainingEnvironmentKey"
    assert service_model.shape("VpcConfig.Subnets.member").name == "SubnetId"
    assert service_model.shape("InputDataConfig.member.ChannelName").name == "ChannelName"
    assert service_model.shape("S3Uri").name == "S3Uri"


@pytest.mark.parametrize("separator", ["\n", "\r", "\x85", "\u2028", "\u2029"])
def test_a_dot_matches_no_java_line_terminator(separator: str) -> None:
    """HyperParameterKey's `.*`: Java's "." leaves out every line terminator, Python's only "\\n"."""
    assert check_shape("HyperParameters.key", "lr") is None
    assert check_shape("HyperParameters.key", f"l{separator}r") is not None


def test_dots_in_a_class_or_escaped_stay_literal_and_digits_are_ascii() -> None:
    assert java_dots(r"[A-Za-z0-9\.\-_]+") == r"[A-Za-z0-9\.\-_]+" and java_dots("a[.]b") == "a[.]b"
    assert check_shape("RoleArn", "arn:aws:iam::123456789012:role/r") is None
    fullwidth = "".join(chr(0xFF10 + int(d)) for d in "123456789012")  # digits to Python's \\d, not to Java's
    assert check_shape("RoleArn", f"arn:aws:iam::{fullwidth}:role/r") is not None


def test_lengths_counts_and_patterns_are_said_in_words() -> None:
    assert check_shape("TrainingJobName", "a" * 64) == "is 64 characters; SageMaker allows 1-63"
    assert (
        check_shape("TrainingJobName", "a_b") == "does not match SageMaker's pattern [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
    )
    assert check_shape("Tags", list(range(51))) == "is 51 entries; SageMaker allows at most 50"
    assert service_model.pattern("TagKey") is None  # \p{L}: checked by validation.is_tag_text instead
