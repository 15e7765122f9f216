"""Amazon SageMaker training jobs, submitted with boto3 (see provider.py)."""

from cloudddp.providers.sagemaker.provider import SageMakerProvider, create

__all__ = ["SageMakerProvider", "create"]
