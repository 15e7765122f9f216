"""The training image the SageMaker SDK v2's `PyTorch` would pick, without the SDK.

Same rules as v2's `sagemaker.image_uris.retrieve(framework="pytorch", image_scope="training")`
(src/sagemaker/image_uris.py at tag v2.257.6): a version alias ("1.9") resolves to its full
version for the lookup but the tag keeps the version as given ("1.9-gpu-py38"); ml.g*/ml.p*
instances get the `gpu` image, the rest `cpu`; the region picks the ECR account.
"""

from __future__ import annotations

import re

from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker.image_table import PROCESSORS, REGISTRIES, VERSION_ALIASES, VERSIONS

FAMILY = re.compile(r"^ml[._]([a-z0-9-]+?)(?:\.|$)")


def processor_for(instance_type: str, image_option: str = "image_uri=") -> str:
    """`gpu` or `cpu` from the instance family, as image_uris._processor does for these images."""
    if instance_type.startswith("local"):
        return "gpu" if instance_type == "local_gpu" else "cpu"
    match = FAMILY.match(instance_type)
    family = match.group(1) if match else ""
    if family.startswith(("trn", "inf")):
        raise CloudDDPError(
            f"instance_type={instance_type!r} needs a Neuron image, which the SDK v2 does not pick for PyTorch "
            f"training either: pass {image_option} with a pytorch-training-neuronx image."
        )
    return "gpu" if family[:1] in ("g", "p") else "cpu"


def newest_python(framework_version: str) -> str:
    """The last Python the table lists for the version ("py311" for 2.5); "" for a version it does not have
    (training_image_uri then names the versions)."""
    config = VERSIONS.get(VERSION_ALIASES.get(framework_version, framework_version))
    return config["py_versions"][-1] if config else ""


def training_image_uri(
    framework_version: str, py_version: str, instance_type: str, region: str, image_option: str = "image_uri="
) -> str:
    """The one image table's answer, for the drop-in and for `cloudddp launch -p sagemaker` alike
    (cloudddp.providers.sagemaker.images); `image_option` names the way to pass an image instead."""
    full = VERSION_ALIASES.get(framework_version, framework_version)
    config = VERSIONS.get(full)
    if config is None:
        known = ", ".join(sorted(VERSION_ALIASES, key=lambda v: [int(p) for p in v.split(".")]))
        raise CloudDDPError(
            f"framework_version={framework_version!r} has no PyTorch training image in the SageMaker SDK v2's "
            f"table (versions: {known}, or a full version such as 2.5.1). Pass {image_option} to use another image."
        )
    if py_version not in config["py_versions"]:
        raise CloudDDPError(
            f"py_version={py_version!r}: PyTorch {framework_version} training images exist for "
            f"{', '.join(config['py_versions'])}."
        )
    processor = processor_for(instance_type, image_option)
    if processor not in PROCESSORS:
        raise CloudDDPError(f"no {processor} image for PyTorch {framework_version}.")
    registry = REGISTRIES[config["registries"]].get(region)
    if registry is None:
        raise CloudDDPError(f"the SageMaker SDK v2 knows no PyTorch {framework_version} training image in {region}.")
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    tag = f"{framework_version}-{processor}-{py_version}"
    return f"{registry}.dkr.ecr.{region}.{domain}/{config['repository']}:{tag}"
