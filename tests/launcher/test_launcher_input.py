"""The launcher's own options and the script's arguments: node ranges, the rendezvous endpoint and timeout,
"--" for the script, Ctrl-C while waiting, and the failure reason SageMaker shows (fast: nothing trains)."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import PYTHON, REPO, SOURCES, clean_env, launcher, run_launcher

from cloudddp.cluster import DetectOptions, kubeflow
from cloudddp.cluster.plan import NPROC_WORDS, ClusterPlan
from cloudddp.launcher.command import Target, torchrun_argv

SCRIPT = str(SOURCES / "allreduce_check.py")
UNRESOLVABLE = "algo-3.invalid"  # RFC 6761: .invalid never resolves
# Python's own SIGINT handler first: a background job of a non-interactive shell starts with SIGINT ignored
# (see helpers.CLI_FOR_CTRL_C), and the launcher would then never see the test's Ctrl-C.
LAUNCHER_FOR_CTRL_C = ["-c", "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                       "from cloudddp.launcher.cli import main; sys.exit(main())"]  # fmt: skip


def dry_run(*args: str, env: dict[str, str] | None = None) -> dict:
    result = run_launcher("--dry-run", *args, env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def expect_exit_2(*args: str, env: dict[str, str] | None = None, names: tuple[str, ...] = ()) -> str:
    result = run_launcher(*args, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    for name in names:
        assert name in result.stderr, (name, result.stderr)
    return result.stderr


# -- 1. --nnodes MIN:MAX


@pytest.mark.process
@pytest.mark.parametrize("value", ["foo:bar", "3:1", "0:2", "1:2:3", "1:"])
def test_a_node_range_that_is_no_range_is_named(value: str) -> None:
    expect_exit_2("--dry-run", "--nnodes", value, SCRIPT, names=(f"--nnodes={value!r}", "min:max", "range"))


@pytest.mark.process
def test_a_node_range_on_the_default_backend_gets_the_c10d_rendezvous_on_the_master_port() -> None:
    # torchrun's static rendezvous takes MAX as the world size: one node of a 1:2 job waited forever.
    plan = dry_run("--nnodes", "1:2", SCRIPT)
    assert plan["nnodes"] == "1:2" and plan["rdzv_backend"] == "c10d"
    assert "range" in plan["sources"]["rdzv_backend"]
    assert "--rdzv_backend=c10d" in plan["argv"] and "--rdzv_endpoint=127.0.0.1:29500" in plan["argv"]
    assert not any(arg.startswith(("--master_addr", "--node_rank")) for arg in plan["argv"])


@pytest.mark.process
def test_a_node_range_with_a_static_backend_named_is_refused() -> None:
    expect_exit_2("--dry-run", "--nnodes", "1:2", "--rdzv-backend", "static", SCRIPT,
                  names=("'1:2'", "--rdzv-backend", "static", "c10d"))  # fmt: skip


@pytest.mark.process
def test_a_fixed_range_keeps_the_static_rendezvous() -> None:
    assert dry_run("--nnodes", "2:2", SCRIPT)["rdzv_backend"] == "static"


# -- 2. --rdzv-endpoint


@pytest.mark.process
@pytest.mark.parametrize("backend", [[], ["--rdzv-backend", "static"]], ids=["default", "named"])
def test_an_endpoint_with_the_static_rendezvous_is_refused_not_ignored(backend: list[str]) -> None:
    # It was printed as the rendezvous (rdzv=static@10.0.0.9:29400) while torchrun met at 127.0.0.1:29500.
    args = ["--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "10.0.0.9:29400", *backend, SCRIPT]
    for mode in (["--dry-run"], ["--check", "--check-window", "1"], ["--dns-timeout", "1"]):
        expect_exit_2(*mode, *args, names=("'10.0.0.9:29400'", "--rdzv-endpoint", "static",
                                           "--master-addr 10.0.0.9 --master-port 29400", "--rdzv-backend c10d"))  # fmt: skip


@pytest.mark.process
def test_an_endpoint_with_a_dynamic_rendezvous_is_the_summary_and_the_argv() -> None:
    plan = dry_run("--nnodes", "1:2", "--rdzv-endpoint", "10.0.0.9:29400", SCRIPT)
    assert plan["rdzv_backend"] == "c10d" and "--rdzv_endpoint=10.0.0.9:29400" in plan["argv"]


# -- 3. --rdzv-timeout


@pytest.mark.process
@pytest.mark.parametrize("value", ["nan", "inf", "-5", "0", "ten"])
def test_a_rendezvous_timeout_that_is_not_positive_and_finite_is_named(value: str) -> None:
    expect_exit_2("--dry-run", "--rdzv-timeout", value, SCRIPT,
                  names=(f"--rdzv-timeout={value!r}", "positive", "rounded up"))  # fmt: skip


@pytest.mark.process
@pytest.mark.parametrize(
    ("value", "backend", "item"), [("0.5", [], "timeout=1"), ("2.5", ["--nnodes", "1:2"], "join_timeout=3")]
)
def test_a_fractional_rendezvous_timeout_is_rounded_up_to_whole_seconds(
    value: str, backend: list[str], item: str
) -> None:
    # torch reads whole seconds; 0.5 used to become 0, a rendezvous that times out at once.
    assert f"--rdzv_conf={item}" in dry_run("--rdzv-timeout", value, *backend, SCRIPT)["argv"]


# -- 4. Ctrl-C while waiting


def interrupt_while_waiting(env: dict[str, str], *args: str, waiting: str) -> subprocess.CompletedProcess[str]:
    """Start the launcher, wait until it printed `waiting` (stdout or stderr), press Ctrl-C."""
    proc = subprocess.Popen([PYTHON, *LAUNCHER_FOR_CTRL_C, *args, SCRIPT], cwd=REPO, env=clean_env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    seen, deadline = "", time.monotonic() + 60
    while waiting not in seen:
        assert time.monotonic() < deadline and proc.poll() is None, seen
        for stream in select.select([proc.stdout, proc.stderr], [], [], 1)[0]:
            seen += stream.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, seen + out, seen + err)


@pytest.mark.process
def test_ctrl_c_while_the_master_does_not_resolve_is_one_line_and_130(tmp_path: Path) -> None:
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1",
                                                            "hosts": [UNRESOLVABLE, "algo-1"]}))  # fmt: skip
    env = {"SM_INPUT_CONFIG_DIR": str(config)}
    result = interrupt_while_waiting(env, "--dns-timeout", "60", waiting=f"@{UNRESOLVABLE}:7777")
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr, result.stderr
    assert "interrupted (SIGINT)" in result.stderr


@pytest.mark.process
def test_ctrl_c_while_waiting_for_the_oci_metadata_is_one_line_and_130(tmp_path: Path) -> None:
    env = {"NODE_RANK": "0", "INITIAL_CLUSTER_SIZE": "2", "CLUSTER_NODES_METADATA_FILE": str(tmp_path / "nodes.json")}
    result = interrupt_while_waiting(env, "--metadata-timeout", "60", waiting="waiting up to 60 s for rank(s) 0, 1")
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr, result.stderr
    assert "interrupted (SIGINT)" in result.stderr


# -- 5. the failure reason of bring-your-own SageMaker images (no SM_OUTPUT_DIR)


def byo_sagemaker(tmp: Path, resource: dict | str, output: bool = True) -> dict[str, str]:
    """/opt/ml under `tmp`: resourceconfig.json in input/config (SM_INPUT_CONFIG_DIR), and output/ beside it."""
    config = tmp / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(resource if isinstance(resource, str) else json.dumps(resource))
    if output:
        (tmp / "output").mkdir()
    return {"SM_INPUT_CONFIG_DIR": str(config)}


@pytest.mark.process
def test_a_master_that_never_resolves_is_the_failure_reason_without_sm_output_dir(tmp_path: Path) -> None:
    env = byo_sagemaker(tmp_path, {"current_host": "algo-1", "hosts": [UNRESOLVABLE, "algo-1"]})
    expect_exit_2("--dns-timeout", "0", SCRIPT, env=env, names=("did not resolve",))
    assert UNRESOLVABLE in (tmp_path / "output" / "failure").read_text()


@pytest.mark.process
def test_a_bad_resource_config_is_the_failure_reason_without_sm_output_dir(tmp_path: Path) -> None:
    env = byo_sagemaker(tmp_path, {"current_host": "algo-9", "hosts": ["algo-1"]})
    expect_exit_2(SCRIPT, env=env, names=("algo-9",))
    assert "algo-9" in (tmp_path / "output" / "failure").read_text()


@pytest.mark.process
def test_no_failure_file_is_invented_where_sagemakers_output_folder_is_absent(tmp_path: Path) -> None:
    env = byo_sagemaker(tmp_path, {"current_host": "algo-9", "hosts": ["algo-1"]}, output=False)
    expect_exit_2(SCRIPT, env=env, names=("algo-9",))
    assert not (tmp_path / "output").exists()


# -- 6. "--" and the script's arguments


@pytest.mark.parametrize(
    ("argv", "options", "program"),
    [
        (["a.py", "--", "x"], [], ["a.py", "--", "x"]),
        (["a.py", "--", "--", "x"], [], ["a.py", "--", "--", "x"]),
        (["--", "a.py", "--", "x"], [], ["a.py", "--", "x"]),
        (["--nnodes", "2", "--dry-run", "--", "-a.py"], ["--nnodes", "2", "--dry-run"], ["-a.py"]),
        (["--nn", "2", "a.py", "--nnodes", "3"], ["--nn", "2"], ["a.py", "--nnodes", "3"]),
        (["--nnodes=2", "-m", "pkg.train", "--", "-x"], ["--nnodes=2", "-m"], ["pkg.train", "--", "-x"]),
        (["--check"], ["--check"], []),
    ],
)  # fmt: skip
def test_everything_after_the_script_is_the_scripts_as_given(
    argv: list[str], options: list[str], program: list[str]
) -> None:
    from cloudddp.launcher.cli import build_parser, split_command_line

    assert split_command_line(build_parser(), argv) == (options, program)


@pytest.mark.process
def test_a_scripts_leading_double_dash_reaches_torchrun_and_the_script() -> None:
    argv = dry_run(SCRIPT, "--", "--", "x")["argv"]
    # torchrun's argparse swallows the first "--" after the script unless one of ours comes before it.
    assert argv[-5:] == ["--", SCRIPT, "--", "--", "x"]
    assert dry_run("--", SCRIPT, "--", "x")["argv"][-4:] == ["--", SCRIPT, "--", "x"]
    assert dry_run(SCRIPT, "a", "--", "x")["argv"][-4:] == [SCRIPT, "a", "--", "x"]


def test_torchrun_argv_puts_a_separator_only_where_torchrun_needs_one() -> None:
    plan = ClusterPlan(provider="standalone")
    assert torchrun_argv(plan, Target("t.py", ["--x"]), python="py")[-2:] == ["t.py", "--x"]
    assert torchrun_argv(plan, Target("m", ["--", "y"], is_module=True), python="py")[-5:] == [
        "--module", "--", "m", "--", "y"]  # fmt: skip


@pytest.mark.slow
def test_the_script_receives_a_double_dash_for_real(tmp_path: Path) -> None:
    script = tmp_path / "-args.py"
    script.write_text("import json, sys\nprint('ARGS ' + json.dumps(sys.argv[1:]))\n")
    result = run_launcher("--", script.name, "--", "--", "x", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert 'ARGS ["--", "--", "x"]' in result.stdout


# -- 7. a bracketed IPv6 endpoint, 8. xpu, 9. messages


def test_a_bracketed_ipv6_endpoint_gives_a_master_address_that_resolves() -> None:
    env = {"PET_NNODES": "1:2", "PET_RDZV_ENDPOINT": "[::1]:29400", "HOSTNAME": "j-worker-0"}
    plan = kubeflow.plan(env, DetectOptions(hostnames=["test-host"]))
    assert (plan.master_addr, plan.master_port, plan.rdzv_endpoint) == ("::1", 29400, "[::1]:29400")
    assert kubeflow.split_endpoint("[::1]") == ("::1", None)
    assert kubeflow.split_endpoint("etcd:2379") == ("etcd", 2379)


@pytest.mark.process
@pytest.mark.parametrize("word", NPROC_WORDS)
def test_every_word_nproc_per_node_takes_is_taken_from_kubeflow_too(word: str) -> None:
    env = {"PET_NNODES": "1", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m", "PET_NPROC_PER_NODE": word.upper()}
    assert kubeflow.plan(env, DetectOptions()).nproc_per_node == word
    assert dry_run("--nproc-per-node", word, SCRIPT)["nproc_per_node"] == word


@pytest.mark.process
def test_a_sagemaker_file_error_names_the_file_once(tmp_path: Path) -> None:
    config = tmp_path / "input" / "config"
    (config / "resourceconfig.json").mkdir(parents=True)
    message = expect_exit_2("--dry-run", SCRIPT, env={"SM_INPUT_CONFIG_DIR": str(config)}, names=("is a directory",))
    assert message.count("resourceconfig.json") == 1, message


@pytest.mark.network
def test_check_prints_processes_per_node_as_a_number() -> None:
    result = launcher("--check", "--check-window", "1", env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert "nproc_per_node=2 " in result.stdout and "gpus-or-1" not in result.stdout, result.stdout


@pytest.mark.parametrize("option", ["--dns-timeout", "--grace-period", "--metadata-timeout", "--check-window"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "soon"])
def test_a_duration_option_takes_finite_seconds_only(option: str, value: str) -> None:
    result = launcher("--dry-run", f"{option}={value}", str(SOURCES / "allreduce_check.py"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"argument {option}: {value!r} is not a number of seconds (finite, 0 or more)" in result.stderr


@pytest.mark.process
def test_a_one_node_job_whose_host_name_does_not_resolve_meets_on_loopback(tmp_path: Path) -> None:
    """torchrun retried such a name for ever ("The IPv6 network addresses of (n, port) cannot be retrieved"): a
    one-node Slurm job on a cluster whose node names are not host names hung until its time limit."""
    env = {"SLURM_JOB_ID": "88", "SLURM_JOB_NODELIST": UNRESOLVABLE, "SLURM_NNODES": "1", "SLURM_NODEID": "0"}
    dry = launcher("--dry-run", "--nproc-per-node", "1", SCRIPT, env=env)
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["master_addr"] == "127.0.0.1" and "--master_addr=127.0.0.1" in plan["argv"]
    assert UNRESOLVABLE in plan["sources"]["master_addr"]
    script = tmp_path / "hello.py"
    script.write_text("import os\nprint('hello from', os.environ['MASTER_ADDR'], flush=True)\n")
    ran = run_launcher("--nproc-per-node", "1", str(script), env=env, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "hello from 127.0.0.1" in ran.stdout


def test_a_resolvable_one_node_master_and_a_two_node_job_keep_their_names() -> None:
    one = launcher("--dry-run", "--master-addr", "localhost", SCRIPT)
    assert json.loads(one.stdout)["master_addr"] == "localhost"
    env = {"SLURM_JOB_ID": "88", "SLURM_STEP_NODELIST": f"{UNRESOLVABLE},n2", "SLURM_STEP_NUM_NODES": "2",
           "SLURM_NODEID": "0", "SLURM_STEP_ID": "0"}  # fmt: skip
    two = launcher("--dry-run", SCRIPT, env=env)
    assert two.returncode == 0, two.stderr
    assert (
        json.loads(two.stdout)["master_addr"] == UNRESOLVABLE
    )  # two nodes: waited for, then named if it never resolves


@pytest.mark.process
def test_a_node_rank_beyond_an_elastic_range_is_exit_2() -> None:
    expect_exit_2("--dry-run", "--nnodes", "2:2", "--node-rank", "5", SCRIPT,
                  names=("node rank 5", "out of range", "nnodes=2:2"))  # fmt: skip
