"""A drop-in for the SageMaker Python SDK v2's PyTorch estimator, on cloudddp (boto3 only, no Docker).

from cloudddp.sagemaker import PyTorch    # was: from sagemaker.pytorch import PyTorch
"""

from __future__ import annotations

from cloudddp.sagemaker.estimator import CapacityError, PyTorch, TrainingJob, UnexpectedStatusException
from cloudddp.sagemaker.instance_group import InstanceGroup
from cloudddp.sagemaker.session import Session, get_execution_role
from cloudddp.sagemaker.tensorboard import TensorBoardOutputConfig

__all__ = [
    "CapacityError",
    "InstanceGroup",
    "PyTorch",
    "Session",
    "TensorBoardOutputConfig",
    "TrainingJob",
    "UnexpectedStatusException",
    "get_execution_role",
]
