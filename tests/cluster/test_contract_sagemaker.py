"""SageMaker's job side against the toolkit's and the SDK's own code (fixtures/sagemaker_upstream.py)."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from fixtures.sagemaker_upstream import (
    HETERO_HYPERPARAMETERS,
    ROUND_TRIP_ARGS,
    ROUND_TRIP_HYPERPARAMETERS,
    ROUND_TRIP_VARIABLES,
    TO_CMD_ARGS,
    TO_ENV_VALUES,
    hetero_resource_config,
)
from helpers import REPO, launcher

from cloudddp.cluster import DetectOptions, sagemaker
from cloudddp.cluster.environment import EmulatedCluster
from cloudddp.errors import CloudDDPError

SCRIPT = str(REPO / "sources" / "allreduce_check.py")


def write_config(
    root: Path, resource: dict[str, Any] | None, hyperparameters: dict[str, str] | None = None
) -> dict[str, str]:
    config = root / "input" / "config"
    config.mkdir(parents=True)
    if resource is not None:
        (config / "resourceconfig.json").write_text(json.dumps(resource))
    if hyperparameters is not None:
        (config / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    return {"SM_INPUT_CONFIG_DIR": str(config)}


@pytest.mark.parametrize(("hyperparameters", "expected"), TO_CMD_ARGS)
def test_script_arguments_follow_the_toolkits_mapping_table(
    hyperparameters: dict[str, Any], expected: list[str]
) -> None:
    assert sagemaker.to_cmd_args(hyperparameters) == expected


@pytest.mark.parametrize(("value", "expected"), TO_ENV_VALUES)
def test_variable_values_follow_the_toolkits_mapping_table(value: Any, expected: str) -> None:
    assert sagemaker.to_env_value(value) == expected


def test_bring_your_own_launcher_passes_hyperparameters_as_the_toolkit_does(tmp_path: Path) -> None:
    sdk_file = {k: json.dumps(v) for k, v in ROUND_TRIP_HYPERPARAMETERS.items()}  # as the SDK writes it
    env = write_config(tmp_path, {"current_host": "algo-1", "hosts": ["algo-1"]}, sdk_file)
    result = launcher("--dry-run", "--hyperparameters-as-args", SCRIPT, env=env)
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout)["argv"]
    assert " ".join(argv[argv.index(SCRIPT) + 1 :]) == ROUND_TRIP_ARGS
    exported = sagemaker.framework_environment(env)
    assert {k: exported[k] for k in ROUND_TRIP_VARIABLES} == ROUND_TRIP_VARIABLES
    assert json.loads(exported["SM_USER_ARGS"]) == ROUND_TRIP_ARGS.split()


def test_a_tuning_jobs_objective_metric_never_reaches_the_script(tmp_path: Path) -> None:
    """Hyperparameter tuning adds _tuning_objective_metric to each training job's hyperparameters; the toolkit keeps
    it and default_user_module_name from the script (params.SAGEMAKER_HYPERPARAMETERS, split off in environment.py
    with mapping.split_by_criteria; aws/sagemaker-training-toolkit commit 33839372faf8017edb7dafc6290c1ef63557b404).
    Passed on, an argparse script failed with "unrecognized arguments"."""
    sdk_file = {"epochs": "2", "_tuning_objective_metric": '"validation:accuracy"', "default_user_module_name": '"m"'}
    env = write_config(tmp_path, {"current_host": "algo-1", "hosts": ["algo-1"]}, sdk_file)
    result = launcher("--dry-run", "--hyperparameters-as-args", SCRIPT, env=env)
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout)["argv"]
    assert argv[argv.index(SCRIPT) + 1 :] == ["--epochs", "2"]
    exported = sagemaker.framework_environment(env)
    assert json.loads(exported["SM_HPS"]) == {"epochs": 2} and json.loads(exported["SM_USER_ARGS"]) == ["--epochs", "2"]
    assert not [name for name in exported if name.startswith("SM_HP_") and ("TUNING" in name or "MODULE_NAME" in name)]
    # Nor anywhere else: SM_MODULE_NAME is the toolkit's sagemaker_program (none here: str(None)), not this key.
    training = json.loads(exported["SM_TRAINING_ENV"])
    assert training["hyperparameters"] == {"epochs": 2} and training["additional_framework_parameters"] == {}
    assert exported["SM_MODULE_NAME"] == "None"


def test_one_letter_keys_are_single_dash_and_keys_are_sorted(tmp_path: Path) -> None:
    env = write_config(tmp_path, {"current_host": "algo-1", "hosts": ["algo-1"]}, {"z": '"1"', "b": "2", "lr": "0.1"})
    assert sagemaker.hyperparameter_args(env) == ["-b", "2", "--lr", "0.1", "-z", "1"]


def test_sdk_distribution_groups_keep_data_hosts_out_without_a_flag(tmp_path: Path) -> None:
    plans = {}
    for host in ("algo-1", "algo-2", "algo-3"):
        env = write_config(tmp_path / host, hetero_resource_config(host), HETERO_HYPERPARAMETERS)
        plans[host] = sagemaker.plan(env, DetectOptions())
    assert not plans["algo-1"].participates
    assert "sagemaker_distribution_instance_groups" in plans["algo-1"].skip_reason
    assert [(p.node_rank, p.nnodes, p.master_addr) for p in (plans["algo-2"], plans["algo-3"])] == [
        (0, 2, "algo-2"),
        (1, 2, "algo-2"),
    ]
    assert "sagemaker_distribution_instance_groups" in plans["algo-2"].sources["hosts"]


def test_the_instance_groups_flag_still_wins_over_the_hyperparameter(tmp_path: Path) -> None:
    env = write_config(tmp_path, hetero_resource_config("algo-1"), HETERO_HYPERPARAMETERS)
    plan = sagemaker.plan(env, DetectOptions(instance_groups=["data", "train"]))
    assert (plan.participates, plan.nnodes, plan.node_rank) == (True, 3, 0)


def test_a_malformed_distribution_groups_hyperparameter_is_named(tmp_path: Path) -> None:
    bad = {**HETERO_HYPERPARAMETERS, "sagemaker_distribution_instance_groups": '"train"'}
    env = write_config(tmp_path, hetero_resource_config("algo-2"), bad)
    with pytest.raises(CloudDDPError, match="sagemaker_distribution_instance_groups='train'"):
        sagemaker.plan(env, DetectOptions())


def fake_neuron_ls(folder: Path, output: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "neuron-ls"
    tool.write_text(f"#!/bin/sh\n[ \"$1\" = -j ] || exit 9\ncat <<'JSON'\n{output}\nJSON\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return str(folder)


@pytest.mark.process
def test_trainium_bring_your_own_images_get_one_process_per_neuron_core(tmp_path: Path) -> None:
    resource = {"current_host": "algo-1", "hosts": ["algo-1"], "current_instance_type": "ml.trn1.32xlarge"}
    env = write_config(tmp_path, resource)
    # neuron-ls -j lists devices with their core counts (environment.num_neurons sums nc_count).
    env["PATH"] = fake_neuron_ls(tmp_path / "bin", json.dumps([{"nc_count": 2}] * 16))
    plan = sagemaker.plan(env, DetectOptions())
    assert plan.nproc_per_node == 32
    assert "Neuron" in plan.sources["nproc_per_node"]


def test_trn2_48xlarge_has_64_cores_without_asking_neuron_ls(tmp_path: Path) -> None:
    resource = {"current_host": "algo-1", "hosts": ["algo-1"], "current_instance_type": "ml.trn2.48xlarge"}
    env = {**write_config(tmp_path, resource), "PATH": str(tmp_path / "empty")}
    assert sagemaker.plan(env, DetectOptions()).nproc_per_node == 64


@pytest.mark.process
def test_a_broken_neuron_ls_means_no_neuron_cores(tmp_path: Path) -> None:
    resource = {"current_host": "algo-1", "hosts": ["algo-1"], "current_instance_type": "ml.trn1.2xlarge"}
    env = write_config(tmp_path, resource)
    env["PATH"] = fake_neuron_ls(tmp_path / "bin", "not json")
    assert sagemaker.plan(env, DetectOptions()).nproc_per_node == "gpus-or-1"


def test_emulation_writes_what_the_toolkit_would_export(tmp_path: Path) -> None:
    cluster = EmulatedCluster(
        nodes=2, job_name="job", run_dir=tmp_path, channels=("train",), hyperparameters=ROUND_TRIP_HYPERPARAMETERS
    )
    node = sagemaker.emulate(cluster)[1]
    node.write_files()
    assert {k: node.env[k] for k in ROUND_TRIP_VARIABLES} == ROUND_TRIP_VARIABLES
    assert "SM_HP_SAGEMAKER_PROGRAM" not in node.env
    # The reader derives the very same variables from the files the emulation wrote.
    derived = sagemaker.framework_environment({"SM_INPUT_CONFIG_DIR": node.env["SM_INPUT_CONFIG_DIR"]})
    for name in (
        *ROUND_TRIP_VARIABLES,
        "SM_HOSTS",
        "SM_CURRENT_HOST",
        "SM_CHANNELS",
        "SM_CHANNEL_TRAIN",
        "SM_USER_ARGS",
    ):
        assert derived[name] == node.env[name], name


def test_the_local_emulation_passes_hyperparameters_as_the_toolkit_does(tmp_path: Path) -> None:
    cluster = EmulatedCluster(
        nodes=1, job_name="job", run_dir=tmp_path, hyperparameters={"lr": 0.1, "b": 32, "aug": True}
    )
    node = sagemaker.emulate(cluster)[0]
    node.write_files()
    assert "--hyperparameters-as-args" in node.launcher_args
    assert sagemaker.hyperparameter_args(node.env) == ["--aug", "True", "-b", "32", "--lr", "0.1"]


def test_distribution_hosts_follow_the_toolkits_order_not_the_host_list(tmp_path: Path) -> None:
    """environment.py get_distribution_hosts (aws/sagemaker-training-toolkit commit
    33839372faf8017edb7dafc6290c1ef63557b404): each chosen group's hosts as its instance_groups entry lists them,
    the groups in resourceconfig.json's order; the first is the master. Filtering `hosts` gave another master
    and other ranks than the toolkit, whose framework containers may run on the same job."""
    groups = [{"instance_group_name": "g1", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-3", "algo-4"]},
              {"instance_group_name": "g2", "instance_type": "ml.p4d.24xlarge", "hosts": ["algo-2", "algo-1"]}]  # fmt: skip
    plans = {}
    for host in ("algo-1", "algo-2", "algo-3", "algo-4"):
        resource = {"current_host": host, "hosts": ["algo-1", "algo-2", "algo-3", "algo-4"], "instance_groups": groups,
                    "current_group_name": "g1" if host in ("algo-3", "algo-4") else "g2"}  # fmt: skip
        env = write_config(tmp_path / host, resource)
        plans[host] = sagemaker.plan(env, DetectOptions(instance_groups=["g2", "g1"]))
    assert {p.master_addr for p in plans.values()} == {"algo-3"}
    assert {h: p.node_rank for h, p in plans.items()} == {"algo-3": 0, "algo-4": 1, "algo-2": 2, "algo-1": 3}
