"""Which framework versions SDK v2 takes for each distribution, and its checks (no SDK needed).

Copied from aws/sagemaker-python-sdk, tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0),
src/sagemaker/fw_utils.py: TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS,
TRAINIUM_SUPPORTED_TORCH_DISTRIBUTED_FRAMEWORK_VERSIONS, SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"],
and the checks of `validate_torch_distributed_distribution` and `_validate_smdataparallel_args` (pytorchddp is
rewritten to smdistributed dataparallel first: src/sagemaker/pytorch/estimator.py `PyTorch.__init__`). Versions
are compared as given, as v2 compares them: "2.5" is not "2.5.1".
"""

from __future__ import annotations

import re

TORCH_DISTRIBUTED_GPU_VERSIONS = (
    "1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0", "2.3.0", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1",
    "2.8.0",
)  # fmt: skip
TORCH_DISTRIBUTED_TRAINIUM_VERSIONS = ("1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0")
PYTORCHDDP_VERSIONS = (  # SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"]
    "1.6", "1.6.0", "1.7", "1.7.1", "1.8", "1.8.0", "1.8.1", "1.9", "1.9.0", "1.9.1", "1.10", "1.10.0", "1.10.2",
    "1.11", "1.11.0", "1.12", "1.12.0", "1.12.1", "1.13.1", "2.0.0", "2.0.1", "2.1.0", "2.1.2", "2.2.0",
)  # fmt: skip
INSTANCE_FAMILY = re.compile(r"^ml[\._]([a-z\d\-]+)\.?\w*$")  # fw_utils._is_gpu_instance / _is_trainium_instance


def is_gpu_instance(instance_type: str) -> bool:
    match = INSTANCE_FAMILY.match(instance_type)
    return bool(match and match[1].startswith(("p", "g"))) or instance_type == "local_gpu"


def is_trainium_instance(instance_type: str) -> bool:
    match = INSTANCE_FAMILY.match(instance_type)
    return bool(match and match[1].startswith("trn"))


def distribution_problems(
    distribution: str, instance_type: str, framework_version: str | None, py_version: str | None,
    image_uri: str | None, entry_point: str | None,
) -> list[str]:  # fmt: skip
    """What SDK v2 refuses for an enabled `distribution` ("torch_distributed" or "pytorchddp") on one instance type;
    its messages. framework_version and py_version are ignored where image_uri is given, as v2 ignores them. Where
    one is None (cloudddp's local mode takes none), its check is skipped: v2 would have asked for it before."""
    check = {"torch_distributed": torch_distributed_problems, "pytorchddp": pytorchddp_problems}.get(distribution)
    return check(instance_type, framework_version, py_version, image_uri, entry_point) if check else []


def torch_distributed_problems(
    instance_type: str, framework_version: str | None, py_version: str | None, image_uri: str | None,
    entry_point: str | None,
) -> list[str]:  # fmt: skip
    problems: list[str] = []
    if not image_uri:
        if py_version is not None and "py3" not in py_version:
            problems.append(f"Provided py_version {py_version} is not supported by torch_distributed. "
                            f"Please specify py_version>=py3")  # fmt: skip
        if is_gpu_instance(instance_type) or is_trainium_instance(instance_type):
            gpu = is_gpu_instance(instance_type)
            table = TORCH_DISTRIBUTED_GPU_VERSIONS if gpu else TORCH_DISTRIBUTED_TRAINIUM_VERSIONS
            if framework_version is not None and framework_version not in table:
                problems.append(
                    f"Provided framework_version {framework_version} is not supported by torch_distributed for "
                    f"instance {instance_type}. Please specify one of the supported framework versions: "
                    f"{list(table)}"
                )
        elif framework_version is not None:
            problems.append("Currently torch_distributed is supported only for GPU and Trainium instances.")
    if entry_point is not None and not entry_point.endswith(".py"):
        problems.append("Unsupported entry point type for the distribution torch_distributed. "
                        "Only python programs (*.py) are supported.")  # fmt: skip
    return problems


def pytorchddp_problems(
    instance_type: str, framework_version: str | None, py_version: str | None, image_uri: str | None,
    entry_point: str | None,
) -> list[str]:  # fmt: skip
    problems: list[str] = []
    if not instance_type:
        problems.append("Please specify an instance_type for smdataparallel.")
    if not image_uri:
        if framework_version is not None and framework_version not in PYTORCHDDP_VERSIONS:
            problems.append(
                f"Provided framework_version {framework_version} is not supported by smdataparallel. Please "
                f"specify one of the supported framework versions: {list(PYTORCHDDP_VERSIONS)}"
            )
        if py_version is not None and "py3" not in py_version:
            problems.append(f"Provided py_version {py_version} is not supported by smdataparallel. "
                            f"Please specify py_version>=py3")  # fmt: skip
    return problems
