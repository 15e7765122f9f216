"""PyTorch Deep Learning Container image URIs for SageMaker training.

`--image` always wins. Otherwise the URI comes from the SageMaker SDK's own table
(`sagemaker.core.image_uris.retrieve`) when the optional `sagemaker` package is
installed, and from the small built-in table below when it is not (the SDK costs
seconds of import time, so it is only imported here, and only without --image).
"""

from __future__ import annotations

import re

from cloudddp.errors import CloudDDPError

# ECR account hosting the DLCs, by region (763104351884 unless listed).
DEFAULT_ACCOUNT = "763104351884"
REGION_ACCOUNTS = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-east-2": "975050140332",
    "ap-northeast-3": "364406365360",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-6": "633930458069",
    "ap-southeast-7": "590183813437",
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-2": "380420809688",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "il-central-1": "780543022126",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "mx-central-1": "637423239942",
    "us-gov-east-1": "446045086412",
    "us-gov-west-1": "442386744353",
}
# framework version alias -> (full version, Python versions with images), as in the SDK's
# image_uri_config/pytorch.json. The tag uses the version as given ("2.5" or "2.5.1"), like the SDK.
VERSIONS = {
    "2.1": ("2.1.0", ("py310",)),
    "2.2": ("2.2.0", ("py310",)),
    "2.3": ("2.3.0", ("py311",)),
    "2.4": ("2.4.0", ("py311",)),
    "2.5": ("2.5.1", ("py311",)),
    "2.6": ("2.6.0", ("py312",)),
    "2.7": ("2.7.1", ("py312",)),
    "2.8": ("2.8.0", ("py312",)),
}
GPU_FAMILIES = re.compile(r"^ml\.(p\d|g\d)")
DLC_REPOSITORIES = ("pytorch-training", "pytorch-trcomp-training", "huggingface-pytorch-training")


def processor(instance_type: str) -> str:
    if instance_type.startswith(("ml.trn", "ml.inf")):
        raise CloudDDPError(
            f"{instance_type} needs a Neuron image: pass --image with a pytorch-training-neuronx image URI."
        )
    return "gpu" if GPU_FAMILIES.match(instance_type) else "cpu"


def is_dlc(image: str) -> bool:
    """True for AWS's PyTorch training containers, which run SageMaker's training toolkit."""
    repository = image.split("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    return repository in DLC_REPOSITORIES


def builtin_uri(region: str, framework_version: str, py_version: str, instance_type: str) -> str:
    version = VERSIONS.get(framework_version) or next((v for v in VERSIONS.values() if v[0] == framework_version), None)
    if version is None:
        raise CloudDDPError(
            f"no built-in PyTorch training image for framework_version {framework_version!r} (known: "
            f"{', '.join(VERSIONS)}). Pass --image URI, or `pip install 'cloudddp[sagemaker-sdk]'` so the "
            f"SageMaker SDK's image table is used."
        )
    full, pythons = version
    if py_version not in pythons:
        raise CloudDDPError(
            f"PyTorch {full} training images exist for {', '.join(pythons)}, not py_version {py_version!r}. "
            f"Pass --py-version {pythons[0]} or --image URI."
        )
    account = REGION_ACCOUNTS.get(region, DEFAULT_ACCOUNT)
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{domain}/pytorch-training:{framework_version}-{processor(instance_type)}-{py_version}"


def sdk_uri(region: str, framework_version: str, py_version: str, instance_type: str) -> str | None:
    """The SDK's answer, or None when the SDK is not installed."""
    try:
        from sagemaker.core import image_uris  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return str(
            image_uris.retrieve(
                framework="pytorch", region=region, version=framework_version, py_version=py_version,
                instance_type=instance_type, image_scope="training",
            )
        )  # fmt: skip
    except ValueError as exc:
        raise CloudDDPError(
            f"the SageMaker SDK has no PyTorch training image for framework_version={framework_version!r}, "
            f"py_version={py_version!r}, {instance_type} in {region}: {exc}. Pass --image URI."
        ) from None


def training_image(
    image: str | None, region: str, framework_version: str, py_version: str, instance_type: str, use_sdk: bool = True
) -> str:
    if image:
        return image
    found = sdk_uri(region, framework_version, py_version, instance_type) if use_sdk else None
    return found or builtin_uri(region, framework_version, py_version, instance_type)
