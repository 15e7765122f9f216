# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""The v2 constructor and fit(): what is taken, what is refused by name, and nothing half-done on refusal.

Argument semantics from aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0):
src/sagemaker/estimator.py, src/sagemaker/pytorch/estimator.py, src/sagemaker/fw_utils.py.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from sdk2_moto import MotoServer, moto, source  # noqa: F401  (moto and source are fixtures)

from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker.image_uris import training_image_uri
from cloudddp.sagemaker import InstanceGroup, PyTorch, Session
from cloudddp.sagemaker.arguments import NOT_SUPPORTED

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
BASE: dict[str, Any] = {
    "entry_point": "train.py", "role": ROLE, "framework_version": "2.5", "py_version": "py311",
    "instance_count": 2, "instance_type": "ml.g5.xlarge",
}  # fmt: skip


@pytest.fixture(autouse=True)
def region(monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimator makes its Session at construction (as the SDK v2 does): it needs a region, no call."""
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def estimator(source: Path, **overrides: Any) -> PyTorch:
    return PyTorch(**{**BASE, "source_dir": str(source), **overrides})


@pytest.mark.parametrize("name", sorted(NOT_SUPPORTED))
def test_every_unsupported_v2_argument_is_refused_by_name(name: str, source: Path) -> None:
    with pytest.raises(CloudDDPError) as error:
        estimator(source, **{name: "something"})
    assert f"PyTorch({name}='something')" in str(error.value)
    assert error.value.exit_code == 2


def test_unsupported_arguments_at_their_off_value_are_accepted(source: Path) -> None:
    estimator(source, git_config=None, rules=[], enable_remote_debug=False, debugger_hook_config=False)


def test_an_unknown_argument_is_an_error_not_ignored(source: Path) -> None:
    with pytest.raises(CloudDDPError, match=r"unexpected keyword argument.*instance_cnt"):
        estimator(source, instance_cnt=2)


@pytest.mark.parametrize(
    ("distribution", "message"),
    [
        ({"smdistributed": {"dataparallel": {"enabled": True}}}, "smdistributed is not supported"),
        ({"mpi": {"enabled": True}}, "mpi is not supported"),
        ({"parameter_server": {"enabled": True}}, "parameter_server is not supported"),
        ({"pytorchxla": {"enabled": True}}, "pytorchxla is not supported"),
        ({"torch_distributed": {"enabled": True}, "pytorchddp": {"enabled": True}}, "not both"),
        ({"torch_distributed": {"enabled": True, "processes_per_host": 4}}, "takes only"),
        ("torch_distributed", "must be a dict"),
    ],
)
def test_distributions_other_than_torchrun_are_refused(distribution: Any, message: str, source: Path) -> None:
    with pytest.raises(CloudDDPError, match=message):
        estimator(source, distribution=distribution)


@pytest.mark.parametrize("name", ["torch_distributed", "pytorchddp"])
def test_torchrun_distributions_are_taken(name: str, source: Path) -> None:
    # SDK v2 takes both with 2.2.0 (fw_utils.py version tables: test_sagemaker_dropin_distribution_versions.py)
    est = estimator(source, framework_version="2.2.0", py_version="py310", distribution={name: {"enabled": True}})
    assert est.args.distribution == name


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hyperparameters": {"layers": {1, 2}}}, r"hyperparameters=\{'layers': <set>\}\): the value is not JSON"),
        ({"debugger_hook_config": object()}, "debugger_hook_config"),
        ({"checkpoint_local_path": "ckpt"}, "checkpoint_local_path='ckpt'\\): must be an absolute path"),
        ({"checkpoint_local_path": "/tmp/ckpt", "instance_type": "local"}, "must be under /opt/ml/"),
        ({"debugger_hook_config": True}, "debugger_hook_config=True"),
        ({"disable_profiler": "yes"}, "disable_profiler='yes'"),
        ({"framework_version": None}, r"framework_version=None"),
        ({"instance_count": 0}, "instance_count=0"),
        ({"input_mode": "Pipe"}, "input_mode='Pipe'"),  # FastFile is taken (test_sagemaker_dropin_input_mode.py)
        ({"container_log_level": 10}, "container_log_level=10"),
        ({"tags": ["team"]}, "tags="),
        ({"volume_kms_key": "key-a", "output_kms_key": "key-b"}, "one KMS key"),
        ({"source_dir": "s3://bucket/code.tar.gz"}, "must be a local folder"),
        ({"entry_point": None}, "entry_point"),
        ({"output_path": "file:///tmp/out"}, "file:// works with instance_type='local'"),
    ],
)
def test_bad_values_are_one_clear_error(overrides: dict[str, Any], message: str, source: Path) -> None:
    with pytest.raises(CloudDDPError, match=message):
        estimator(source, **overrides)


def test_hyperparameters_come_back_json_encoded_like_v2(source: Path) -> None:
    est = estimator(source, hyperparameters={"epochs": 3, "model": "resnet18", "lr": 0.1})
    est.set_hyperparameters(pretrained=True)
    assert est.hyperparameters() == {"epochs": "3", "model": '"resnet18"', "lr": "0.1", "pretrained": "true"}


def test_methods_beyond_training_say_so(source: Path) -> None:
    with pytest.raises(CloudDDPError, match=r"PyTorch.deploy is not supported"):
        estimator(source).deploy(initial_instance_count=1, instance_type="ml.m5.large")


def test_attach_on_the_class_is_refused_by_name_too() -> None:
    """v2's attach is a classmethod (src/sagemaker/estimator.py `EstimatorBase.attach`, v2.257.6 fc582aaa)."""
    with pytest.raises(CloudDDPError, match=r"PyTorch.attach is not supported") as error:
        PyTorch.attach("pytorch-training-2025-01-01-00-00-00-000")
    assert error.value.exit_code == 2
    assert not hasattr(PyTorch, "no_such_method")  # other names: an AttributeError, as usual


@pytest.mark.parametrize(
    ("overrides", "message"),
    [  # v2.257.6 (fc582aaa) sends these as given (job.py _prepare_stop_condition, _prepare_resource_config;
        # session.py `if use_spot_instances:`); botocore refuses MaxRuntimeInSeconds < 1 and non-boolean flags.
        ({"max_run": 0}, r"PyTorch\(max_run=0\): must be a whole number of seconds, at least 1"),
        ({"max_run": -60}, r"PyTorch\(max_run=-60\)"),
        ({"max_run": "3600"}, r"PyTorch\(max_run='3600'\)"),
        ({"volume_size": 0}, r"PyTorch\(volume_size=0\): must be a whole number of GB, at least 1"),
        ({"use_spot_instances": "False"}, r"PyTorch\(use_spot_instances='False'\): must be True or False"),
        ({"enable_network_isolation": "true"}, r"PyTorch\(enable_network_isolation='true'\)"),
        ({"encrypt_inter_container_traffic": 1}, r"PyTorch\(encrypt_inter_container_traffic=1\)"),
    ],
)
def test_values_are_never_silently_replaced_but_refused_by_name(
    overrides: dict[str, Any], message: str, source: Path, moto: MotoServer
) -> None:
    with pytest.raises(CloudDDPError, match=message) as error:
        estimator(source, sagemaker_session=Session(), **overrides).fit("s3://data/all", wait=False)
    assert error.value.exit_code == 2
    assert moto.created() == []


def test_absent_values_take_v2_defaults_and_given_ones_are_sent_as_given(source: Path, moto: MotoServer) -> None:
    absent = {"max_run": None, "volume_size": None, "use_spot_instances": None}
    estimator(source, sagemaker_session=Session(), **absent).fit("s3://data/all", wait=False)
    given = {"max_run": 1, "volume_size": 1, "use_spot_instances": True, "max_wait": 7200}
    estimator(source, sagemaker_session=Session(), **given).fit("s3://data/all", wait=False)
    defaults, sent = moto.created()
    assert defaults["StoppingCondition"] == {"MaxRuntimeInSeconds": 86400}  # v2's max_run default, 24 h
    assert (defaults["ResourceConfig"]["VolumeSizeInGB"], defaults["EnableManagedSpotTraining"]) == (30, False)
    assert sent["StoppingCondition"] == {"MaxRuntimeInSeconds": 1, "MaxWaitTimeInSeconds": 7200}
    assert (sent["ResourceConfig"]["VolumeSizeInGB"], sent["EnableManagedSpotTraining"]) == (1, True)


def test_image_follows_the_sdk_v2_table() -> None:
    # Tags keep the version as given (v2's _format_tag); the alias only picks the table entry.
    assert training_image_uri("1.9", "py38", "ml.p3.2xlarge", "us-east-1").endswith("pytorch-training:1.9-gpu-py38")
    assert training_image_uri("2.5.1", "py311", "ml.c5.xlarge", "eu-west-1") == (
        "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.5.1-cpu-py311"
    )
    assert training_image_uri("2.5", "py311", "ml.g5.xlarge", "cn-north-1").startswith(
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/"
    )
    with pytest.raises(CloudDDPError, match="py_version='py39'"):
        training_image_uri("2.5", "py39", "ml.g5.xlarge", "us-east-1")
    with pytest.raises(CloudDDPError, match=r"framework_version='3\.0'"):
        training_image_uri("3.0", "py311", "ml.g5.xlarge", "us-east-1")
    with pytest.raises(CloudDDPError, match="Neuron"):
        training_image_uri("2.5", "py311", "ml.trn1.32xlarge", "us-east-1")


def test_an_image_whose_python_cannot_run_the_launcher_is_refused_before_upload(source: Path, moto: MotoServer) -> None:
    est = estimator(source, framework_version="1.4", py_version="py36", sagemaker_session=Session())
    with pytest.raises(CloudDDPError, match=r"Python 3.6; cloudddp's launcher needs Python 3.8"):
        est.fit({"train": "s3://data/train"})
    assert [name for name, _ in moto.calls if name in ("PutObject", "CreateTrainingJob", "CreateBucket")] == []


def test_fit_with_a_string_is_the_training_channel_and_dependencies_sit_beside_the_script(
    source: Path, moto: MotoServer, tmp_path: Path
) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "utils.py").write_text("X = 1\n")
    est = estimator(
        source, dependencies=[str(tmp_path / "common")], tags={"team": "vision"}, sagemaker_session=Session()
    )
    est.fit("s3://data/all", wait=False)
    (request,) = moto.created()
    assert [c["ChannelName"] for c in request["InputDataConfig"]] == ["training"]
    assert request["Tags"] == [{"Key": "team", "Value": "vision"}]
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    with tarfile.open(fileobj=io.BytesIO(moto.read(submit))) as tar:
        assert {"train.py", "common/utils.py"} <= set(tar.getnames())
    assert est.latest_training_job is not None
    assert est.latest_training_job.describe()["TrainingJobName"] == request["TrainingJobName"]


@pytest.mark.parametrize("inputs", [{"train": 3}, 42])
def test_inputs_other_than_uris_are_refused(inputs: Any, source: Path, moto: MotoServer) -> None:
    with pytest.raises(CloudDDPError, match="not supported"):
        estimator(source, sagemaker_session=Session()).fit(inputs)
    assert moto.created() == []


def test_no_region_fails_at_construction(source: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(CloudDDPError, match="no AWS region"):
        estimator(source)


def test_model_data_and_logs_need_a_job_first(source: Path) -> None:
    with pytest.raises(CloudDDPError, match="call fit"):
        _ = estimator(source).model_data
    with pytest.raises(CloudDDPError, match="call fit"):
        estimator(source).logs()


def test_logs_prints_each_hosts_cloudwatch_lines(
    source: Path, moto: MotoServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cloudddp.providers.sagemaker.provider import SageMakerProvider

    monkeypatch.setattr(SageMakerProvider, "final_grace", 0.0)
    est = estimator(source, sagemaker_session=Session())
    est.fit("s3://data/all", wait=False)
    job = est.latest_training_job.name  # type: ignore[union-attr]
    logs = moto.client("logs")
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs")
    for host, line in (("algo-1", "epoch=1/1 loss=0.5"), ("algo-2", "rank 1 done")):
        stream = f"{job}/{host}-{int(time.time())}"
        logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
        logs.put_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream,
                            logEvents=[{"timestamp": int(time.time() * 1000), "message": line}])  # fmt: skip
    capsys.readouterr()
    est.logs()
    printed = capsys.readouterr().out
    assert "[algo-1] epoch=1/1 loss=0.5" in printed and "[algo-2] rank 1 done" in printed


GROUPS = [InstanceGroup("data", "ml.c5.2xlarge", 1), InstanceGroup("train", "ml.g5.12xlarge", 2)]
NO_COUNT = {"instance_count": None, "instance_type": None}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [  # fw_utils.validate_distribution and job.py _prepare_resource_config (v2.257.6)
        ({"instance_groups": GROUPS, "instance_type": None}, r"PyTorch\(instance_count=2\): cannot be set when"),
        ({"instance_groups": GROUPS, "instance_count": None}, r"instance_type='ml.g5.xlarge'\): cannot be set"),
        ({"distribution": {"torch_distributed": {"enabled": True}, "instance_groups": GROUPS[:1]}},
         "names instance_groups, but the estimator has none"),
        ({**NO_COUNT, "instance_groups": GROUPS, "distribution": {"torch_distributed": {"enabled": True}}},
         "must name exactly one of the instance groups"),
        ({**NO_COUNT, "instance_groups": GROUPS[:1],
          "distribution": {"torch_distributed": {"enabled": True}, "instance_groups": GROUPS}},
         "more instance groups than the estimator has"),
        ({**NO_COUNT, "instance_groups": GROUPS,
          "distribution": {"torch_distributed": {"enabled": True}, "instance_groups": [InstanceGroup("gpu", "x", 1)]}},
         "instance group 'gpu' is not one of instance_groups"),
        ({**NO_COUNT, "instance_groups": [object()]}, r"each entry is an InstanceGroup"),
        ({**NO_COUNT, "instance_groups": [InstanceGroup("a", "local", 2)]}, "run on SageMaker only"),
    ],
)  # fmt: skip
def test_instance_groups_are_checked_as_the_sdk_v2_checks_them(
    overrides: dict[str, Any], message: str, source: Path
) -> None:
    with pytest.raises(CloudDDPError, match=message) as error:
        estimator(source, **overrides)
    assert error.value.exit_code == 2


def test_attributes_beside_instance_groups_read_as_passed_like_v2(source: Path) -> None:
    """SDK v2 (src/sagemaker/estimator.py at v2.257.6, fc582aaa) stores instance_count, instance_type and
    instance_groups as passed: beside groups the first two read None, not the groups' total of instances."""
    grouped = estimator(source, **NO_COUNT, instance_groups=GROUPS)
    assert (grouped.instance_count, grouped.instance_type, grouped.instance_groups) == (None, None, GROUPS)
    plain = estimator(source, instance_count=3, instance_type="ml.g5.12xlarge")
    assert (plain.instance_count, plain.instance_type, plain.instance_groups) == (3, "ml.g5.12xlarge", [])


@pytest.mark.parametrize(
    ("groups", "message"),
    [  # botocore's service model: InstanceGroupName 1-64, InstanceType the TrainingInstanceType enum, count >= 0,
        # at most 5 InstanceGroups
        ([InstanceGroup("x" * 65, "ml.c5.2xlarge", 1), GROUPS[1]], "is 65 characters; SageMaker takes 1-64"),
        (
            [InstanceGroup("data", "ml.c5.3xlarge", 1), GROUPS[1]],
            "instance_type 'ml.c5.3xlarge' is not a SageMaker training",
        ),
        ([InstanceGroup("data", "ml.c5.2xlarge", -1), GROUPS[1]], "count is -1"),
        ([InstanceGroup("train", "ml.c5.2xlarge", 1), GROUPS[1]], "names the group 'train' twice"),
        ([InstanceGroup(f"g{i}", "ml.c5.2xlarge", 1) for i in range(6)], "6 groups; SageMaker takes at most 5"),
    ],
)
def test_instance_groups_the_service_would_refuse_fail_before_upload(
    groups: list[InstanceGroup], message: str, source: Path, moto: MotoServer
) -> None:
    est = estimator(source, **NO_COUNT, instance_groups=groups, sagemaker_session=Session())
    with pytest.raises(CloudDDPError, match=message):
        est.fit({"train": "s3://data/train"})
    assert [name for name, _ in moto.calls if name in ("PutObject", "CreateTrainingJob", "CreateBucket")] == []


def test_the_distribution_group_reaches_the_launcher_in_the_archive(source: Path, moto: MotoServer) -> None:
    """SDK v2 sends no sagemaker_distribution_instance_groups with torch_distributed (sdk2_requests/
    instance_groups.json): cloudddp's launcher learns the group from cloudddp_job.json instead."""
    distribution = {"torch_distributed": {"enabled": True}, "instance_groups": [GROUPS[1]]}
    est = estimator(source, **NO_COUNT, instance_groups=GROUPS, distribution=distribution, sagemaker_session=Session(),
                    framework_version="2.5.1")  # fmt: skip
    est.fit("s3://data/all", wait=False)
    (request,) = moto.created()
    assert "sagemaker_distribution_instance_groups" not in request["HyperParameters"]
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    with tarfile.open(fileobj=io.BytesIO(moto.read(submit))) as tar:
        job = json.loads(tar.extractfile("cloudddp_job.json").read())  # type: ignore[union-attr]
    assert "--instance-groups=train" in job["launcher_args"]
    assert request["AlgorithmSpecification"]["TrainingImage"].endswith("-gpu-py311")  # the GPU group's image
