"""PyTorch Deep Learning Container image URIs for SageMaker training.

`--image` always wins. Otherwise the URI comes from the one image table that the SageMaker SDK v2
drop-in uses too (`cloudddp/providers/sagemaker/image_table.py`, generated from the SDK v2's
`image_uri_config/pytorch.json`; resolved by `cloudddp.providers.sagemaker.image_uris.training_image_uri`), so
`cloudddp launch --framework-version 1.9 --py-version py38` and `PyTorch(framework_version="1.9",
py_version="py38")` pick the same image, and every version the SDK v2 knows is known here.
"""

from __future__ import annotations

from cloudddp.providers.sagemaker.image_uris import newest_python, training_image_uri

DLC_REPOSITORIES = ("pytorch-training", "pytorch-trcomp-training", "huggingface-pytorch-training")


def is_dlc(image: str) -> bool:
    """True for AWS's PyTorch training containers, which run SageMaker's training toolkit."""
    repository = image.split("/", 1)[-1].split(":", 1)[0].split("@", 1)[0]
    return repository in DLC_REPOSITORIES


def training_image(
    image: str | None, region: str, framework_version: str, py_version: str | None, instance_type: str
) -> str:
    """`image`, else the image table's URI (cloudddp.providers.sagemaker.image_uris: the drop-in's resolver). Without
    a py_version, the newest Python the table has images of for that framework version."""
    if image:
        return image
    python = py_version or newest_python(framework_version)
    return training_image_uri(framework_version, python, instance_type, region, image_option="--image URI")
