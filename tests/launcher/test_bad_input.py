"""Bad platform input is one clear paragraph and exit code 2, never a traceback (issue #8, points 7 and 8)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import SOURCES, launcher, run_launcher

from cloudddp.launcher.peers import PeerWatch

SCRIPT = str(SOURCES / "allreduce_check.py")


def config_env(tmp: Path, resource: Any = None, raw: bytes | None = None, as_dir: bool = False) -> dict[str, str]:
    config = tmp / "input" / "config"
    config.mkdir(parents=True)
    path = config / "resourceconfig.json"
    if as_dir:
        path.mkdir()
    elif raw is not None:
        path.write_bytes(raw)
    else:
        path.write_text(json.dumps(resource))
    return {"SM_INPUT_CONFIG_DIR": str(config)}


def expect_exit_2(*args: str, env: dict[str, str], names: list[str]) -> str:
    result = run_launcher("--dry-run", *args, SCRIPT, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    for name in names:
        assert name in result.stderr, (name, result.stderr)
    return result.stderr


SM = {"SM_HOSTS": '["algo-1","algo-2"]', "SM_CURRENT_HOST": "algo-1", "SM_INPUT_CONFIG_DIR": "/nonexistent/config"}


@pytest.mark.process
@pytest.mark.parametrize(
    ("extra", "names"),
    [
        ({"SM_INSTANCE_GROUPS_DICT": "{not json"}, ["SM_INSTANCE_GROUPS_DICT", "not valid JSON"]),
        ({"SM_INSTANCE_GROUPS_DICT": '["a"]'}, ["SM_INSTANCE_GROUPS_DICT", "JSON object"]),
        ({"SM_INSTANCE_GROUPS_DICT": '{"g": {"instance_group_name": "g", "hosts": "algo-1"}}'}, ["SM_INSTANCE_GROUPS_DICT", "'hosts'"]),
        ({"SM_HOSTS": "[1, 2]"}, ["SM_HOSTS", "[1, 2]"]),
    ],
    ids=["groups-not-json", "groups-not-object", "group-hosts-not-list", "hosts-not-strings"],
)  # fmt: skip
def test_malformed_sagemaker_variables(extra: dict[str, str], names: list[str]) -> None:
    expect_exit_2(env={**SM, **extra}, names=names)


@pytest.mark.process
@pytest.mark.parametrize(
    ("resource", "names"),
    [
        ({"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": "train"}, ["instance_groups", "list"]),
        ({"current_host": "algo-1", "hosts": ["algo-1", 2]}, ["'hosts'", "[\"algo-1\", 2]".replace('"', "'")]),
        ({"current_host": "algo-1", "hosts": ["algo-1"], "instance_groups": [{"hosts": ["algo-1"]}]}, ["instance_group_name"]),
    ],
    ids=["groups-not-list", "host-not-string", "group-without-name"],
)  # fmt: skip
def test_malformed_resource_config(tmp_path: Path, resource: dict[str, Any], names: list[str]) -> None:
    expect_exit_2(env=config_env(tmp_path, resource), names=["resourceconfig.json", *names])


@pytest.mark.process
def test_resource_config_that_is_a_directory_or_not_utf8(tmp_path: Path) -> None:
    expect_exit_2(env=config_env(tmp_path / "a", as_dir=True), names=["resourceconfig.json", "is a directory"])
    latin = '{"current_host": "h\xe9", "hosts": ["h\xe9"]}'.encode("latin-1")
    expect_exit_2(env=config_env(tmp_path / "b", raw=latin), names=["resourceconfig.json", "not UTF-8"])


@pytest.mark.process
def test_hyperparameters_that_are_not_utf8(tmp_path: Path) -> None:
    env = config_env(tmp_path, {"current_host": "algo-1", "hosts": ["algo-1"]})
    (Path(env["SM_INPUT_CONFIG_DIR"]) / "hyperparameters.json").write_bytes('{"x": "\xe9"}'.encode("latin-1"))
    expect_exit_2("--hyperparameters-as-args", env=env, names=["hyperparameters.json", "not UTF-8"])


SLURM = {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "n[1-2]",
         "SLURM_STEP_NUM_NODES": "2", "SLURM_NODEID": "0"}  # fmt: skip


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "env", "names"),
    [
        (["--master-port", "0"], SLURM, ["--master-port='0'", "between 1 and 65535"]),
        (["--master-port", "65536"], SLURM, ["--master-port='65536'"]),
        ([], {**SLURM, "MASTER_PORT": "70000"}, ["MASTER_PORT='70000'"]),
        ([], {"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m", "PET_MASTER_PORT": "-1"}, ["PET_MASTER_PORT='-1'"]),
        (["--rdzv-backend", "c10d", "--rdzv-endpoint", "host:99999"], SLURM, ["host:99999", "--rdzv-endpoint"]),
        (["--control-port", "70000"], SLURM, ["--control-port='70000'"]),
        (["--master-port", "65535"], SLURM, ["master port + 1", "65535", "--control-port"]),
    ],
    ids=["flag-zero", "flag-too-big", "MASTER_PORT", "PET_MASTER_PORT", "rdzv-endpoint", "control-port", "control-overflow"],
)  # fmt: skip
def test_every_port_is_checked_and_named(args: list[str], env: dict[str, str], names: list[str]) -> None:
    expect_exit_2(*args, env=env, names=names)


def test_master_port_65535_is_fine_with_the_fail_fast_channel_on_another_port() -> None:
    result = launcher("--dry-run", "--master-port", "65535", "--control-port", "29999", SCRIPT, env=SLURM)
    assert result.returncode == 0, result.stderr


@pytest.mark.network
def test_no_exception_escapes_the_fail_fast_threads(capsys: pytest.CaptureFixture[str]) -> None:
    escaped: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: escaped.append(args.exc_value)  # type: ignore[assignment]
    try:
        # A port no socket accepts (a caller that skipped validation): bind() raises OverflowError.
        watch = PeerWatch(0, 2, "127.0.0.1", 70000, "job", lambda reason, code: None)
        watch.start()
        deadline = time.monotonic() + 5
        while "fail-fast channel" not in capsys.readouterr().err:
            assert time.monotonic() < deadline, "the thread neither reported nor ended"
            time.sleep(0.05)
        watch.report_exit(0)
    finally:
        threading.excepthook = previous
    assert escaped == []


def platform_envs(tmp: Path) -> dict[str, dict[str, str]]:
    nodefile = tmp / "nodefile"
    nodefile.write_text("h1\nh2\n")
    return {
        "awsbatch": {
            "AWS_BATCH_JOB_NODE_INDEX": "0",
            "AWS_BATCH_JOB_NUM_NODES": "2",
            "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
        },
        "skypilot": {"SKYPILOT_NODE_RANK": "0", "SKYPILOT_NODE_IPS": "10.0.0.1\n10.0.0.2", "SKYPILOT_NUM_NODES": "2"},
        "pbs": {"PBS_JOBID": "7.server", "PBS_NODEFILE": str(nodefile), "PMI_RANK": "0"},
        "slurm": SLURM,
        "oci-legacy": {"OCI__MODE": "MAIN", "OCI__WORKER_COUNT": "1"},
    }


@pytest.mark.process
@pytest.mark.parametrize("platform", ["awsbatch", "skypilot", "pbs", "slurm", "oci-legacy"])
def test_master_port_variable_outside_the_tcp_range_on_every_platform(platform: str, tmp_path: Path) -> None:
    env = {**platform_envs(tmp_path)[platform], "MASTER_PORT": "65536"}
    expect_exit_2(env=env, names=["MASTER_PORT='65536'", "between 1 and 65535"])


@pytest.mark.process
def test_a_node_range_on_the_static_backend_names_how_many_nodes_static_would_wait_for() -> None:
    err = expect_exit_2("--nnodes", "1:3", "--rdzv-backend", "static", env={}, names=["--rdzv-backend"])
    assert "nnodes='1:3' (from --nnodes) is an elastic range" in err and "waits for all 3 nodes" in err, err
