"""README, Secrets: error messages show `***` for the user-info of any URL. CloudDDPError hides it in the URI
itself (cloudddp.redact.redact_text), but the bucket or claim part, quoted after it, still held `user:password`."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SOURCES, cli

from cloudddp.errors import CloudDDPError
from cloudddp.staging.location import parse_location

IMAGE = "registry.example.com/train:1"
PASSWORD = "SuperSecretValue1"
TOKEN = "ghp_TokenAsUser42"


@pytest.mark.parametrize(
    "flags",
    [["-i", f"train=s3://AKIAXXX:{PASSWORD}@bucket/p"], ["-i", f"train=pvc://user:{PASSWORD}@claim/p"],
     ["-i", f"train=s3://{TOKEN}@bucket/p"], ["-i", f"train=pvc://{TOKEN}@claim/p"],
     ["-i", "train=pvc://datasets/demo", "--output", f"pvc://user:{PASSWORD}@claim/out"],
     ["-i", "train=pvc://datasets/demo", "--checkpoint", f"pvc://{TOKEN}@claim/ckpt"]],
)  # fmt: skip
@pytest.mark.parametrize("api", ["v1", "trainer-v2"])
def test_a_uri_with_credentials_is_refused_without_echoing_them(flags: list[str], api: str, tmp_path: Path) -> None:
    result = cli("launch", "-p", "kubernetes", "--dry-run", "--image", IMAGE, "--nodes", "2", "--kubeflow-api",
                     api, *flags, str(SOURCES / "train_ddp.py"), env={"KUBECONFIG": str(tmp_path / "none")})  # fmt: skip
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert "the URI holds credentials" in result.stderr, result.stderr
    assert PASSWORD not in result.stderr and TOKEN not in result.stderr, result.stderr


@pytest.mark.parametrize("uri", [f"s3://AKIAXXX:{PASSWORD}@bucket/p", f"s3://{TOKEN}@bucket/p"])
def test_cloudddp_stage_does_not_echo_them_either(uri: str) -> None:
    """cloudddp/staging/location.py parse_location quoted the bucket part the same way (`cloudddp stage`)."""
    with pytest.raises(CloudDDPError) as refused:
        parse_location(uri)
    message = str(refused.value)
    assert "holds credentials" in message and PASSWORD not in message and TOKEN not in message, message
