"""The job-side launcher's plan, command line and errors (fast: nothing is started)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import PYTHON, REPO, SOURCES, clean_env, run_cli, run_launcher

from cloudddp.cluster.plan import ClusterPlan
from cloudddp.errors import CloudDDPError
from cloudddp.launcher.command import Target, job_environment, resolve_nproc, torchrun_argv, visible_gpu_count
from cloudddp.launcher.network import parse_host_map, wait_for_host

SCRIPT = str(SOURCES / "allreduce_check.py")
SM_ENV = {
    "SM_HOSTS": '["algo-1","algo-2"]',
    "SM_CURRENT_HOST": "algo-2",
    "SM_NUM_GPUS": "4",
    "SM_INPUT_CONFIG_DIR": "/nonexistent",
}


def dry_run(*args: str, env: dict[str, str] | None = None) -> dict:
    result = run_launcher("--dry-run", *args, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.process
def test_dry_run_prints_the_documented_keys_and_the_exact_torchrun_command() -> None:
    plan = dry_run(SCRIPT, "--epochs", "2", env=SM_ENV)
    for key in (
        "provider",
        "node_rank",
        "nnodes",
        "nproc_per_node",
        "master_addr",
        "master_port",
        "rdzv_backend",
        "argv",
    ):
        assert key in plan
    assert (plan["provider"], plan["node_rank"], plan["nnodes"], plan["nproc_per_node"]) == ("sagemaker", 1, 2, 4)
    assert plan["master_addr"] == "algo-1" and plan["master_port"] == 7777
    assert plan["argv"][1:3] == ["-m", "torch.distributed.run"]
    assert "--node_rank=1" in plan["argv"] and "--master_addr=algo-1" in plan["argv"]
    assert plan["argv"][-3:] == [SCRIPT, "--epochs", "2"]
    assert plan["sources"]["node_rank"].startswith("SM_HOSTS")


@pytest.mark.process
def test_command_line_options_override_detected_values_and_say_so() -> None:
    plan = dry_run("--nproc-per-node", "2", "--master-port", "4000", "--master-addr", "10.0.0.5", SCRIPT, env=SM_ENV)
    assert plan["nproc_per_node"] == 2 and plan["sources"]["nproc_per_node"] == "--nproc-per-node"
    assert plan["master_port"] == 4000 and plan["master_addr"] == "10.0.0.5"


@pytest.mark.process
def test_provider_flag_beats_detection() -> None:
    env = {
        **SM_ENV,
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NODELIST": "n[1-2]",
        "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_NNODES": "2",
        "SLURM_NODEID": "1",
    }
    plan = dry_run("--provider", "slurm", "--host-map", "n1=127.0.0.1", SCRIPT, env=env)
    assert plan["provider"] == "slurm" and plan["master_addr"] == "127.0.0.1"
    assert plan["sources"]["master_addr"].startswith("host map")


@pytest.mark.process
def test_module_target_and_torchrun_passthrough_arguments() -> None:
    plan = dry_run("--torchrun-arg=--monitor-interval=1", "-m", "json.tool", "--help")
    argv = plan["argv"]
    assert "--monitor-interval=1" in argv
    assert argv[argv.index("--module") + 1 :] == ["--", "json.tool", "--help"]


@pytest.mark.process
def test_dynamic_rendezvous_uses_the_endpoint_and_the_right_timeout_key() -> None:
    plan = dry_run(
        "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1234", "--rdzv-timeout", "60", "--nnodes", "1:4", SCRIPT
    )
    assert "--rdzv_endpoint=h:1234" in plan["argv"] and "--rdzv_conf=join_timeout=60" in plan["argv"]
    assert "--nnodes=1:4" in plan["argv"] and not any(a.startswith("--node_rank") for a in plan["argv"])
    static = dry_run("--rdzv-timeout", "60", SCRIPT)
    assert "--rdzv_conf=timeout=60" in static["argv"]


@pytest.mark.process
def test_under_torchrun_the_script_runs_directly_instead_of_nesting() -> None:
    plan = dry_run(SCRIPT, "--x", env={"TORCHELASTIC_RUN_ID": "abc"})
    assert plan["argv"] == [PYTHON, SCRIPT, "--x"]


@pytest.mark.process
def test_heterogeneous_host_outside_the_chosen_groups_sits_out(tmp_path: Path) -> None:
    (tmp_path / "resourceconfig.json").write_text(json.dumps({
        "current_host": "algo-3", "hosts": ["algo-1", "algo-2", "algo-3"], "current_group_name": "cpu",
        "instance_groups": [{"instance_group_name": "gpu", "hosts": ["algo-1", "algo-2"]},
                            {"instance_group_name": "cpu", "hosts": ["algo-3"]}],
    }))  # fmt: skip
    result = run_launcher("--instance-groups", "gpu", SCRIPT, env={"SM_INPUT_CONFIG_DIR": str(tmp_path)})
    assert result.returncode == 0
    assert "sits this job out" in result.stdout


@pytest.mark.process
@pytest.mark.parametrize(
    ("env", "args", "names"),
    [
        (
            {"SM_HOSTS": "[algo-1", "SM_CURRENT_HOST": "algo-1", "SM_INPUT_CONFIG_DIR": "/nonexistent"},
            [],
            ["SM_HOSTS", "[algo-1"],
        ),
        (
            {"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-9", "SM_INPUT_CONFIG_DIR": "/nonexistent"},
            [],
            ["algo-9"],
        ),
        (
            {"SLURM_JOB_ID": "5", "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_NUM_NODES": "2", "SLURM_NODEID": "2"},
            [],
            ["SLURM_NODEID", "2"],
        ),
        ({"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2", "SLURM_NNODES": "2", "SLURM_NODEID": "0"}, [], ["n[1-2"]),
        (
            {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n1", "SLURM_NNODES": "x", "SLURM_NODEID": "0"},
            [],
            ["SLURM_NNODES", "x"],
        ),
        (
            {
                "SM_HOSTS": '["a"]',
                "SM_CURRENT_HOST": "a",
                "SLURM_JOB_ID": "5",
                "SLURM_JOB_NODELIST": "n1",
                "SM_INPUT_CONFIG_DIR": "/nonexistent",
            },
            [],
            ["sagemaker", "slurm", "--provider"],
        ),
        ({}, ["--node-rank", "3", "--nnodes", "2"], ["node rank 3", "nnodes=2"]),
        ({}, ["--provider", "nimbus"], ["nimbus"]),
    ],
    ids=[
        "malformed-SM_HOSTS",
        "host-missing",
        "rank-out-of-range",
        "bad-hostlist",
        "non-integer",
        "two-providers",
        "override-out-of-range",
        "unknown-provider",
    ],
)
def test_bad_environment_gets_one_clear_message_and_exit_code_2(env: dict, args: list, names: list) -> None:
    result = run_launcher(*args, SCRIPT, env=env)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    for name in names:
        assert name in result.stderr


@pytest.mark.process
def test_missing_script_is_named_and_nothing_starts() -> None:
    result = run_launcher("no_such_script.py")
    assert result.returncode == 2 and "no_such_script.py" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.process
def test_sagemaker_failure_reason_is_written_where_sagemaker_reads_it(tmp_path: Path) -> None:
    env = {"SM_HOSTS": "oops", "SM_CURRENT_HOST": "algo-1", "SM_OUTPUT_DIR": str(tmp_path), "SM_INPUT_CONFIG_DIR": "/x"}
    result = run_launcher(SCRIPT, env=env)
    assert result.returncode == 2
    assert "SM_HOSTS" in (tmp_path / "failure").read_text()


@pytest.mark.process
def test_hyperparameters_json_becomes_script_arguments(tmp_path: Path) -> None:
    (tmp_path / "hyperparameters.json").write_text(json.dumps({"epochs": "3", "lr": '"0.1"', "sagemaker_program": "x"}))
    env = {"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1", "SM_INPUT_CONFIG_DIR": str(tmp_path)}
    plan = dry_run("--hyperparameters-as-args", SCRIPT, "--a", "b", env=env)
    assert plan["argv"][-7:] == [SCRIPT, "--a", "b", "--epochs", "3", "--lr", "0.1"]


def test_torchrun_argv_passes_local_addr_for_oci_style_plans() -> None:
    plan = ClusterPlan(provider="oci", nnodes=2, node_rank=1, master_addr="10.0.0.1", local_addr="10.0.0.2")
    argv = torchrun_argv(plan, Target("t.py", ["--x"]), python="py")
    assert "--local_addr=10.0.0.2" in argv and argv[-2:] == ["t.py", "--x"]


def test_default_processes_per_node_are_visible_gpus_else_one(tmp_path: Path) -> None:
    assert resolve_nproc("gpus-or-1", {"CUDA_VISIBLE_DEVICES": "0,1,2"}) == 3
    assert resolve_nproc("gpus-or-1", {"CUDA_VISIBLE_DEVICES": ""}) == 1
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        (tmp_path / name).touch()
    assert visible_gpu_count({}, dev_dir=str(tmp_path)) == 2
    assert resolve_nproc("auto", {}) == "auto"


def test_worker_environment_shares_cores_and_keeps_what_the_user_set() -> None:
    plan = ClusterPlan(provider="sagemaker", network_interface="eth0")
    env = job_environment(plan, {"NCCL_SOCKET_IFNAME": "ens5"}, local_procs=1)
    assert int(env["OMP_NUM_THREADS"]) >= 1
    assert env["NCCL_SOCKET_IFNAME"] == "ens5" and env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert job_environment(plan, {"OMP_NUM_THREADS": "7"}, 1)["OMP_NUM_THREADS"] == "7"


def test_master_that_never_resolves_is_named_after_a_bounded_wait() -> None:
    clock = iter(range(100))

    def fail(host: str) -> None:
        raise socket.gaierror("Name or service not known")

    with pytest.raises(CloudDDPError, match="'algo-1' did not resolve within 5 s"):
        wait_for_host("algo-1", 5, resolve=fail, clock=lambda: float(next(clock)), sleep=lambda s: None)


def test_host_map_parsing_rejects_malformed_entries() -> None:
    assert parse_host_map("a=1.2.3.4, b=5.6.7.8") == {"a": "1.2.3.4", "b": "5.6.7.8"}
    with pytest.raises(CloudDDPError, match="NAME=ADDRESS"):
        parse_host_map("a1.2.3.4")


@pytest.mark.process
def test_importing_the_launcher_loads_no_cloud_sdk_and_no_client_library() -> None:
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", "import cloudddp.launcher"],
                            capture_output=True, text=True, env=clean_env(), cwd=REPO)  # fmt: skip
    modules = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    forbidden = {"boto3", "botocore", "sagemaker", "oci", "kubernetes", "torch", "pydantic", "yaml", "typer", "rich"}
    assert "cloudddp" in modules
    assert not modules & forbidden


def test_bring_your_own_sagemaker_images_get_the_framework_variables(tmp_path: Path) -> None:
    from cloudddp.cluster.sagemaker import framework_environment

    config = tmp_path / "opt/ml/input/config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-2", "hosts": ["algo-1", "algo-2"]}))
    (config / "inputdataconfig.json").write_text(json.dumps({"train": {}, "val": {}}))
    (config / "hyperparameters.json").write_text(json.dumps({"epochs": '"3"', "sagemaker_program": '"x.py"'}))
    env = framework_environment({"SM_INPUT_CONFIG_DIR": str(config), "SM_MODEL_DIR": "/custom"})
    assert env["SM_CHANNEL_TRAIN"] == str(tmp_path / "opt/ml/input/data/train")
    assert json.loads(env["SM_CHANNELS"]) == ["train", "val"]
    assert env["SM_CURRENT_HOST"] == "algo-2" and env["SM_HP_EPOCHS"] == "3"
    assert json.loads(env["SM_HPS"]) == {"epochs": "3"}
    assert "SM_MODEL_DIR" not in env  # already set: left alone


def test_the_torchrun_log_folder_is_left_to_users_who_chose_it_or_asked_for_log_files() -> None:
    from cloudddp.launcher.cli import keeps_log_files

    for chosen in (
        ["--log-dir=/logs"],
        ["--log_dir", "/logs"],
        ["--redirects=3"],
        ["-r", "3"],
        ["--tee", "3"],
        ["-t3"],
    ):
        assert keeps_log_files(chosen, {}), chosen
    for name in ("PET_LOG_DIR", "PET_REDIRECTS", "PET_TEE"):
        assert keeps_log_files([], {name: "3"}), name
    assert not keeps_log_files(["--rdzv-conf=timeout=60", "--log-line-prefix-template=x"], {"PET_NNODES": "2"})


@pytest.mark.process
@pytest.mark.parametrize(
    "plan",
    [ClusterPlan(provider="oci", nnodes=2, node_rank=1, master_addr="10.0.0.1", local_addr="10.0.0.2"),
     ClusterPlan(provider="kubeflow", nnodes="1:3", rdzv_backend="c10d", rdzv_endpoint="h:29400", max_restarts=2)],
)  # fmt: skip
def test_torchrun_gets_the_underscore_spelling_every_torchrun_takes(plan: ClusterPlan) -> None:
    # torch 2.x lists both spellings (--nproc-per-node, --nproc_per_node); a torchrun older than 2.0 knows only the
    # underscore one (pytorch-image-models#1742: "unrecognized arguments: --nproc-per-node=1"). Checked against the
    # installed torchrun's own parser.
    from torch.distributed.run import get_args_parser

    argv = torchrun_argv(plan, Target("t.py", ["--x"]), inherited_conf="read_timeout=60", python="py")
    parser = get_args_parser()
    parsed = parser.parse_args(argv[3:])
    assert parsed.training_script == "t.py" and parsed.training_script_args == ["--x"]
    spellings = {s: a.option_strings for a in parser._actions for s in a.option_strings}
    options = [arg.split("=", 1)[0] for arg in argv[3 : argv.index("--")]]
    for option in options:
        underscored = [s for s in spellings[option] if "_" in s]
        assert not underscored or option in underscored, (option, spellings[option])
    assert {"--nnodes", "--nproc_per_node", "--rdzv_backend", "--rdzv_id", "--rdzv_conf"} <= set(options)


@pytest.mark.process
@pytest.mark.parametrize(
    ("program", "args"),
    [("t.py", ["--log", "x"]), ("t.py", ["--monitor", "5"]), ("t.py", ["--d", "off"]), ("t.py", ["--", "--nnodes"]),
     ("-t.py", ["--x"]), ("t.py", [])],
)  # fmt: skip
def test_torchrun_hands_the_script_every_argument_even_one_abbreviating_its_own(program: str, args: list[str]) -> None:
    # argparse's prefix matching reached past the script into its arguments: `t.py --log x` was torchrun's
    # "ambiguous option: --log could match --log-dir, ...", and every node of the job failed with exit 2.
    from torch.distributed.run import get_args_parser

    plan = ClusterPlan(provider="oci", nnodes=2, node_rank=1, master_addr="10.0.0.1")
    parsed = get_args_parser().parse_args(torchrun_argv(plan, Target(program, args), python="py")[3:])
    assert (parsed.training_script, parsed.training_script_args) == (program, args)


@pytest.mark.process
def test_a_script_option_torchrun_could_mistake_for_its_own_reaches_the_script(tmp_path: Path) -> None:
    script = tmp_path / "show.py"
    script.write_text("import sys\nprint('ARGS', sys.argv[1:], flush=True)\n")
    result = run_cli("launch", "--emulate", "none", "--runs-dir", str(tmp_path / "runs"), str(script), "--",
                     "--log", "x", timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "ARGS ['--log', 'x']" in result.stdout


@pytest.mark.parametrize(
    ("code", "said"),
    [("143", "node 1 was stopped (exit code 143, SIGTERM)"), ("130", "node 1 was stopped (exit code 130, SIGINT)"),
     ("7", "node 1 failed (exit code 7)"), ("137", "node 1 failed (exit code 137)")],
)  # fmt: skip
def test_another_nodes_end_reads_as_a_stop_or_a_failure_by_its_code(code: str, said: str) -> None:
    from cloudddp.launcher.peers import ended

    assert ended("node 1", code) == said
