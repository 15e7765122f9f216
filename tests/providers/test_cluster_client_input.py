"""Cluster providers' client side with input found mishandled by exploratory testing."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import cli, run_cli

from cloudddp.errors import CloudDDPError
from cloudddp.providers.kubernetes.provider import parse_job_id


@pytest.fixture
def script(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print(1)\n")
    return tmp_path / "train.py"


@pytest.mark.parametrize("provider", ["slurm", "pbs"])
@pytest.mark.parametrize(
    ("flag", "value", "field"),
    [("--checkpoint", "s3://bucket/ck", "checkpoint"), ("--output", "s3://bucket/out", "output"),
     ("--checkpoint", "https://u:topsecretpw@h/ck", "checkpoint")],
)  # fmt: skip
def test_an_object_storage_uri_is_no_shared_folder(
    script: Path, provider: str, flag: str, value: str, field: str
) -> None:
    # It used to become a folder named `s3:` (`https:/u:topsecretpw@h/ck`, password included) in the script.
    result = cli("render", "-p", provider, flag, value, str(script), cwd=script.parent)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout[-500:]
    assert f"{field}=" in result.stderr and "writes to folders on the cluster's shared filesystem" in result.stderr
    assert "topsecretpw" not in result.stdout + result.stderr


@pytest.mark.parametrize("job_id", ["pytorchjobs/team/", "team/", "trainjobs//x", "/x", ""])
def test_a_kubernetes_job_id_with_an_empty_part_is_refused(job_id: str) -> None:
    # `DELETE .../namespaces/team/pytorchjobs/` is a deletecollection for the API server: every job in the namespace
    # (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go NewRequestInfo at
    # 01bb682e31036fd3ec8e7a158455aa3da9f51a41: splitPath trims the '/', and a DELETE with no name becomes
    # "deletecollection").
    with pytest.raises(CloudDDPError, match="is not a Kubernetes job id"):
        parse_job_id(job_id, "default")


def test_a_kubernetes_job_id_with_every_part_is_taken() -> None:
    assert parse_job_id("trainjobs/team/x", "default") == ("trainjobs", "team", "x")
    assert parse_job_id("team/x", "default") == ("pytorchjobs", "team", "x")
    assert parse_job_id("x", "default") == ("pytorchjobs", "default", "x")


def test_a_job_name_kubernetes_does_not_take_is_exit_2(script: Path) -> None:
    result = cli("render", "-p", "kubernetes", "--image", "reg/train:1", "--name", "trail-", str(script),
                     cwd=script.parent)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "name='trail-'" in result.stderr and "must be a DNS-1035 label" in result.stderr


@pytest.mark.process
@pytest.mark.parametrize(("command", "doing"), [("status", "read"), ("logs", "read the logs of"), ("cancel", "stop")])
def test_an_unreachable_kubernetes_api_server_is_one_paragraph(tmp_path: Path, command: str, doing: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n"
        "users:\n- name: u\n  user: {token: abc}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
        "current-context: x\n"
    )  # port 1: nothing listens, the connection is refused at once
    result = run_cli(command, "-p", "kubernetes", "pytorchjobs/team/x", env={"KUBECONFIG": str(kubeconfig)}, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-1500:]
    assert f"https://127.0.0.1:1 could not be reached to {doing} pytorchjobs/team/x" in result.stderr
