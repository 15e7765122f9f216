"""Argument sets given to both the real SageMaker SDK v2 `PyTorch` and `cloudddp.sagemaker.PyTorch`.

Pure data (standard library only): `record_sdk2_requests.py` runs it inside `.venv-sdk2`
with the real SDK, the tests run it with cloudddp. Each case is the constructor's keyword
arguments plus `fit()`'s `inputs`; `source_dir` is filled in by whoever runs the case.
"""

from __future__ import annotations

from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageMakerRole"
DATA = "s3://cloudddp-sdk2-data/hymenoptera_data"
ENTRY_POINT = "train.py"
BUCKETS = ("cloudddp-sdk2-data", "cloudddp-sdk2-out")  # exist before any case runs

CASES: dict[str, dict[str, Any]] = {
    # The seed guide's estimator cell (../shared/seeds/003_*.txt), entry point = the training script.
    "seed": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "1.9", "py_version": "py38",
            "disable_profiler": True, "debugger_hook_config": False,
            "hyperparameters": {"epochs": 25}, "instance_count": 2, "instance_type": "ml.p3.2xlarge",
        },
        "inputs": {"train": f"{DATA}/train", "val": f"{DATA}/val"},
    },
    "torch_distributed": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5.1", "py_version": "py311",
            "instance_count": 2, "instance_type": "ml.g5.12xlarge",
            "distribution": {"torch_distributed": {"enabled": True}},
            "disable_profiler": True, "debugger_hook_config": False,
            "hyperparameters": {"epochs": 3, "lr": 0.01, "model-name": "resnet18", "pretrained": True},
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    "spot_checkpoints_output": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.2", "py_version": "py310",
            "instance_count": 1, "instance_type": "ml.g5.xlarge", "disable_profiler": True,
            "debugger_hook_config": False, "use_spot_instances": True, "max_run": 7200, "max_wait": 10800,
            "checkpoint_s3_uri": "s3://cloudddp-sdk2-out/checkpoints/run-1", "output_path": "s3://cloudddp-sdk2-out/models",
            "volume_size": 100, "environment": {"WANDB_MODE": "offline", "NCCL_DEBUG": "INFO"},
            "tags": [{"Key": "team", "Value": "vision"}, {"Key": "cost-center", "Value": "42"}],
            "base_job_name": "resnet-spot",
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # Spot without checkpoint_s3_uri: cloudddp adds a CheckpointConfig in the staging bucket (an intended difference).
    "spot_without_checkpoints": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_count": 2, "instance_type": "ml.g5.2xlarge", "disable_profiler": True,
            "debugger_hook_config": False, "use_spot_instances": True, "max_wait": 90000,
        },
        "inputs": {"val": f"{DATA}/val", "train": f"{DATA}/train"},
    },
    "vpc_and_kms": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.1", "py_version": "py310",
            "instance_count": 2, "instance_type": "ml.m5.xlarge", "disable_profiler": True,
            "debugger_hook_config": False, "subnets": ["subnet-0a1b2c3d"], "security_group_ids": ["sg-0a1b2c3d"],
            "volume_kms_key": "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    "image_uri": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE,
            "image_uri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker",
            "instance_count": 2, "instance_type": "ml.g5.2xlarge", "disable_profiler": True,
            "debugger_hook_config": False, "hyperparameters": {"batch-size": 64, "b": 1.5},
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # The SDK's defaults: profiler and debugger left as they come.
    "defaults": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_count": 1, "instance_type": "ml.m5.xlarge",
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # A heterogeneous cluster (SDK v2 `InstanceGroup`s, written here as their constructor arguments): the
    # "train" group runs torch_distributed, the "data" group sits the distributed job out.
    "instance_groups": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5.1", "py_version": "py311",
            "instance_groups": [
                {"instance_group_name": "data", "instance_type": "ml.c5.2xlarge", "instance_count": 1},
                {"instance_group_name": "train", "instance_type": "ml.g5.12xlarge", "instance_count": 2},
            ],
            "distribution": {"torch_distributed": {"enabled": True}, "instance_groups": ["train"]},
            "disable_profiler": True, "debugger_hook_config": False, "hyperparameters": {"epochs": 2},
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # pytorchddp (v2 rewrites it to smdistributed dataparallel) with a group: v2 sends the group as a hyperparameter.
    "instance_groups_pytorchddp": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.0.1", "py_version": "py310",
            "instance_groups": [
                {"instance_group_name": "data", "instance_type": "ml.c5.2xlarge", "instance_count": 1},
                {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
            ],
            "distribution": {"pytorchddp": {"enabled": True}, "instance_groups": ["train"]},
            "disable_profiler": True, "debugger_hook_config": False,
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # Instance groups without a distribution; the profiler and debugger at the SDK's defaults.
    "instance_groups_defaults": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_groups": [
                {"instance_group_name": "gpus", "instance_type": "ml.g5.2xlarge", "instance_count": 2},
            ],
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # checkpoint_local_path other than the default; debugger at its default (v2 turns it off: checkpoints set).
    "checkpoint_local_path": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_count": 2, "instance_type": "ml.m5.xlarge",
            "checkpoint_s3_uri": "s3://cloudddp-sdk2-out/checkpoints/run-2", "checkpoint_local_path": "/opt/ml/ckpt",
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # The debugger and profiler at the SDK's defaults with checkpoint_s3_uri alone (no local path).
    "checkpoint_s3_only": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_count": 1, "instance_type": "ml.m5.xlarge",
            "checkpoint_s3_uri": "s3://cloudddp-sdk2-out/checkpoints/run-3",
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # Metric definitions: sent as AlgorithmSpecification.MetricDefinitions, in the order given.
    "metric_definitions": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_count": 2, "instance_type": "ml.g5.2xlarge", "disable_profiler": True,
            "debugger_hook_config": False,
            "metric_definitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"},
                                   {"Name": "val:acc", "Regex": "val_acc=([0-9.]+)"}],
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # TensorBoard output: sent as TensorBoardOutputConfig (S3OutputPath, LocalPath); built by `with_tensorboard`.
    "tensorboard_output_config": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_count": 2, "instance_type": "ml.g5.2xlarge", "disable_profiler": True,
            "debugger_hook_config": False,
            "metric_definitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
            "tensorboard_output_config": {"s3_output_path": "s3://cloudddp-sdk2-out/tensorboard",
                                          "container_local_output_path": "/opt/ml/output/tensorboard"},
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    "tensorboard_output_config_default_local_path": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_count": 1, "instance_type": "ml.g5.2xlarge",
            "tensorboard_output_config": {"s3_output_path": "s3://cloudddp-sdk2-out/tb"},
        },
        "inputs": {"train": f"{DATA}/train"},
    },
    # input_mode="FastFile": sent as AlgorithmSpecification.TrainingInputMode (channels streamed from S3 on demand).
    "fastfile": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5.1", "py_version": "py311",
            "instance_count": 2, "instance_type": "ml.g5.2xlarge", "disable_profiler": True,
            "debugger_hook_config": False, "input_mode": "FastFile",
        },
        "inputs": {"train": f"{DATA}/train", "val": f"{DATA}/val"},
    },
}  # fmt: skip

# Local mode: what the SDK v2 hands its LocalSagemakerClient (the request its containers' config files are
# written from), with `local_code` on: the source is used from its folder, as cloudddp's local mode does.
LOCAL_CASES: dict[str, dict[str, Any]] = {
    "local": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_count": 2, "instance_type": "local", "hyperparameters": {"epochs": 2, "lr": 0.5},
        },
        "inputs": {"train": "file://<data>"},
    },
    "local_gpu_torch_distributed": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5.1", "py_version": "py311",
            "instance_count": 1, "instance_type": "local_gpu", "hyperparameters": {"model-name": "resnet18"},
            "distribution": {"torch_distributed": {"enabled": True}},
        },
        "inputs": {"train": "file://<data>"},
    },
    # FastFile in local mode: v2 hands it to its LocalSagemakerClient as TrainingInputMode; its containers read
    # every channel as File (local/image.py `write_config_files`).
    "local_fastfile": {
        "estimator": {
            "entry_point": ENTRY_POINT, "role": ROLE, "framework_version": "2.5", "py_version": "py311",
            "instance_count": 1, "instance_type": "local", "hyperparameters": {"epochs": 1},
            "input_mode": "FastFile",
        },
        "inputs": {"train": "file://<data>"},
    },
}  # fmt: skip


def with_instance_groups(estimator: dict[str, Any], instance_group: Any) -> dict[str, Any]:
    """The case's keyword arguments with its instance groups built by `instance_group` (the SDK's class or
    cloudddp's): the estimator's list, and the distribution's groups as the same objects, as v2 takes them."""
    if "instance_groups" not in estimator:
        return dict(estimator)
    groups = [instance_group(**g) for g in estimator["instance_groups"]]
    kwargs = {**estimator, "instance_groups": groups}
    distribution = estimator.get("distribution")
    if distribution and "instance_groups" in distribution:
        chosen = [g for g in groups if g.instance_group_name in distribution["instance_groups"]]
        kwargs["distribution"] = {**distribution, "instance_groups": chosen}
    return kwargs


def with_tensorboard(estimator: dict[str, Any], config_class: Any) -> dict[str, Any]:
    """The case's keyword arguments with its tensorboard_output_config built by `config_class` (the SDK's
    sagemaker.debugger.TensorBoardOutputConfig or cloudddp's)."""
    if "tensorboard_output_config" not in estimator:
        return dict(estimator)
    return {**estimator, "tensorboard_output_config": config_class(**estimator["tensorboard_output_config"])}


def job_name(case: str) -> str:
    """The name both sides give `fit(job_name=...)`, so the requests can be compared."""
    return f"sdk2-{case.replace('_', '-')}"
