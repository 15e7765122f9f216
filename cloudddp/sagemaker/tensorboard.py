"""The SDK v2's `TensorBoardOutputConfig` (aws/sagemaker-python-sdk v2.257.7, src/sagemaker/debugger/debugger.py):
where the training script writes TensorBoard logs in the container (`container_local_output_path`, SageMaker's
default /opt/ml/output/tensorboard) and where SageMaker uploads them (`s3_output_path`).

The estimator takes v2's own class or this one; both become CreateTrainingJob's `TensorBoardOutputConfig` as v2's
`_to_request_dict` builds it (v2 session.py `_get_train_request`: `train_request["TensorBoardOutputConfig"]`).
"""

from __future__ import annotations

from typing import Any

from cloudddp.errors import CloudDDPError

DEFAULT_LOCAL_PATH = "/opt/ml/output/tensorboard"  # the service's default LocalPath (CreateTrainingJob's docs)


class TensorBoardOutputConfig:
    """v2's class: `TensorBoardOutputConfig(s3_output_path, container_local_output_path=None)`."""

    def __init__(self, s3_output_path: str, container_local_output_path: str | None = None) -> None:
        self.s3_output_path = s3_output_path
        self.container_local_output_path = container_local_output_path

    def _to_request_dict(self) -> dict[str, str]:
        request = {"S3OutputPath": self.s3_output_path}
        if self.container_local_output_path is not None:
            request["LocalPath"] = self.container_local_output_path
        return request


def tensorboard_request(config: Any) -> dict[str, str] | None:
    """The request's TensorBoardOutputConfig for the estimator's `tensorboard_output_config` (v2's class or ours,
    read by its two attributes), None for none; anything else is refused naming the argument."""
    if config is None:
        return None
    path = getattr(config, "s3_output_path", None)
    local = getattr(config, "container_local_output_path", None)
    if not isinstance(path, str) or not path.startswith("s3://") or not isinstance(local, (str, type(None))):
        raise CloudDDPError(
            f"PyTorch(tensorboard_output_config={config!r}): must be a TensorBoardOutputConfig(s3_output_path="
            f"'s3://...', container_local_output_path=None or a path in the container)."
        )
    return TensorBoardOutputConfig(path, local)._to_request_dict()
