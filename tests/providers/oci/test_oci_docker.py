"""infra/docker: what can be checked without a Docker engine (none runs here).

The Dockerfile is parsed (base image and build args, entry point, that every file it
copies exists and that they are the whole job side), the copied tree is run as the image
would run it (standard library only, no site-packages), and entrypoint.sh is exercised.
Building and running the image itself is not tested here.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, clean_env

from cloudddp.staging.archive import JOB_SIDE

DOCKER = REPO / "infra" / "docker"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with comments dropped and continuation lines joined."""
    result: list[tuple[str, str]] = []
    pending = ""
    for raw in (DOCKER / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        word, _, rest = line.partition(" ")
        result.append((word.upper(), rest.strip()))
    return result


def copied() -> list[tuple[list[str], str]]:
    return [(shlex.split(args)[:-1], shlex.split(args)[-1]) for word, args in instructions() if word == "COPY"]


def test_dockerfile_builds_from_a_pytorch_base_chosen_by_build_args() -> None:
    steps = instructions()
    before_from = {args.split("=")[0]: args.split("=", 1)[1] for word, args in steps[: [w for w, _ in steps].index("FROM")]
                   if word == "ARG"}  # fmt: skip
    assert {"TORCH_VERSION", "CUDA_VERSION", "CUDNN_VERSION", "BASE_IMAGE"} <= set(before_from)
    assert before_from["BASE_IMAGE"].startswith("pytorch/pytorch:${TORCH_VERSION}-cuda${CUDA_VERSION}")
    assert ("FROM", "${BASE_IMAGE}") in steps


def test_dockerfile_entrypoint_is_the_launcher_script_it_copies() -> None:
    steps = dict(reversed(instructions()))  # first occurrence of each
    entrypoint = json.loads(steps["ENTRYPOINT"])
    assert entrypoint == ["/usr/local/bin/cloudddp-entrypoint"]
    assert (["infra/docker/entrypoint.sh"], "/usr/local/bin/cloudddp-entrypoint") in copied()
    assert "CMD" not in steps  # with no arguments the entry point falls back to OCI__ENTRY_SCRIPT (ADS)


def test_every_file_the_dockerfile_copies_exists_and_they_are_the_whole_job_side() -> None:
    sources = [source for group, _ in copied() for source in group]
    for source in sources:
        assert (REPO / source).exists(), source
    job_side = {s.removeprefix("cloudddp/") for s in sources if s.startswith("cloudddp/")}
    assert job_side == set(JOB_SIDE)


def image_tree(tmp_path: Path) -> Path:
    """/opt/cloudddp as the COPY instructions lay it out."""
    root = tmp_path / "opt" / "cloudddp"
    for group, destination in copied():
        if not destination.startswith("/opt/cloudddp"):
            continue
        target = root / destination.removeprefix("/opt/cloudddp/").rstrip("/")
        for source in group:
            path = REPO / source
            if path.is_dir():
                shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                (target if destination.endswith("/") else target.parent).mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target / path.name if destination.endswith("/") else target)
    return root


@pytest.mark.process
def test_the_copied_job_side_runs_with_the_standard_library_only(tmp_path: Path) -> None:
    root = image_tree(tmp_path)
    (tmp_path / "train.py").write_text("print('hi')\n")
    env = clean_env({"PYTHONPATH": str(root), "OCI__MODE": "MAIN", "OCI__WORKER_COUNT": "1"})
    # -S: no site-packages, so neither the installed cloudddp nor any third-party package can help.
    result = subprocess.run([sys.executable, "-S", "-m", "cloudddp.launcher", "--dry-run", "train.py"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert (plan["provider"], plan["nnodes"], plan["node_rank"], plan["master_port"]) == ("oci", 2, 0, 29400)


def entrypoint(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    echo = tmp_path / "python-echo"
    echo.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    echo.chmod(0o755)
    return subprocess.run(["sh", str(DOCKER / "entrypoint.sh"), *args], env=clean_env({"PYTHON": str(echo), **env}),
                          capture_output=True, text=True, timeout=30)  # fmt: skip


@pytest.mark.process
def test_entrypoint_runs_the_launcher_with_the_containers_arguments(tmp_path: Path) -> None:
    result = entrypoint(tmp_path, "train.py", "--data-dir", "/data dir")
    assert result.stdout.splitlines() == ["-m", "cloudddp.launcher", "train.py", "--data-dir", "/data dir"]


@pytest.mark.process
def test_entrypoint_without_arguments_runs_the_ads_entry_script(tmp_path: Path) -> None:
    result = entrypoint(tmp_path, OCI__ENTRY_SCRIPT="train.py", OCI__ENTRY_SCRIPT_ARGS="--timeout 5 --output-dir /out")
    assert result.stdout.splitlines() == [
        "-m",
        "cloudddp.launcher",
        "train.py",
        "--timeout",
        "5",
        "--output-dir",
        "/out",
    ]


@pytest.mark.process
def test_entrypoint_without_anything_to_run_says_so(tmp_path: Path) -> None:
    result = entrypoint(tmp_path)
    assert result.returncode == 2 and "give a training script" in result.stderr


@pytest.mark.process
@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX sh")
def test_entrypoint_script_is_valid_posix_sh_and_executable() -> None:
    subprocess.run(["sh", "-n", str(DOCKER / "entrypoint.sh")], check=True)
    assert os.access(DOCKER / "entrypoint.sh", os.X_OK)
