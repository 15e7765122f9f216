"""Findings on the launcher's input: `--check` on a job whose rendezvous numbers the nodes, rendezvous endpoints
whose port is not a number, paths that cannot be looked at, `--torchrun-arg VALUE` with VALUE starting with "-".

Each was a traceback, a wrong answer or a refusal of a documented form; each is now checked as a user meets it:
real `cloudddp-launch` processes (no torch imported: `--dry-run`, `--check`), or `main()` in-process where an
OSError must be injected (the tests run as root, which may open every folder).
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import subprocess
import time
from pathlib import Path

import pytest
from helpers import PLATFORM_NAMES, PLATFORM_PREFIXES, PYTHON, REPO, clean_env, launcher, run_launcher

from cloudddp.launcher import cli
from cloudddp.providers.local.provider import free_port

LONG_NAME = "n" * 300 + ".py"  # one path component past NAME_MAX (255): ENAMETOOLONG from stat()


def records(folder: Path) -> list[str]:
    """The exit records the launchers wrote (exit_record.py), their first line: the exit code."""
    return [path.read_text().split("\n")[0] for path in sorted(folder.iterdir())] if folder.is_dir() else []


def expect_exit_2(*args: str, env: dict[str, str] | None = None, cwd: Path | str = REPO) -> str:
    result = run_launcher(*args, env=env, cwd=cwd, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


# -- 1. --check where the rendezvous assigns the node ranks (Workers-only PyTorchJob) -------------------------------


def kubeflow_check(pod: str, endpoint: str, *, window: str = "20", backend: str = "c10d") -> subprocess.Popen[str]:
    """One pod of a Workers-only elastic PyTorchJob `job`, as kubeflow/training-operator v1.9.0
    (commit 6f74c7f6b2ed6c27aabd82d0a316b23f0646059c, pkg/controller.v1/pytorch/) starts it: no RANK, no
    PET_NODE_RANK, no MASTER_ADDR (envvar.go sets those only with a Master), PET_RDZV_ENDPOINT=job-worker-0:PORT
    (elastic.go); `job-worker-0` is 127.0.0.1 through the host map, as in the local emulation."""
    env = {"PET_RDZV_ENDPOINT": endpoint, "PET_RDZV_BACKEND": backend, "PET_NNODES": "2", "HOSTNAME": pod,
           "CLOUDDDP_HOST_MAP": "job-worker-0=127.0.0.1"}  # fmt: skip
    return subprocess.Popen(
        [PYTHON, "-m", "cloudddp.launcher", "--check", "--check-window", window],
        cwd=REPO, env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.network
def test_check_on_a_workers_only_pytorchjob_the_endpoints_pod_serves_and_the_other_connects() -> None:
    port = free_port()
    pods = [kubeflow_check(f"job-worker-{index}", f"job-worker-0:{port}") for index in (1, 0)]  # either order works
    (out1, err1), (out0, err0) = (pod.communicate(timeout=60) for pod in pods)
    assert [pod.returncode for pod in pods] == [0, 0], (out0, err0, out1, err1)
    # worker-0 hosts the rendezvous endpoint: it listened and worker-1 checked in (old code: both took themselves
    # for node 0, both listened, and each said "never checked in").
    assert "cloudddp-check: the rendezvous host" in out0 and ": OK: " in out0, out0
    assert "checked in: " in out0 and "(127.0.0.1)" in out0, out0
    assert "cloudddp-check: a node (its rank assigned by the rendezvous)" in out1, out1
    assert f"rendezvous host 127.0.0.1:{port} reachable" in out1 and "clock skew" in out1, out1
    assert "never checked in" not in out0 + out1
    # The plan line each pod prints: its rank is the rendezvous's to give (old: both printed `node 0/2:2`).
    assert "provider=kubeflow node ?/2:2" in out0 and "provider=kubeflow node ?/2:2" in out1, (out0, out1)


@pytest.mark.network
def test_check_on_a_workers_only_pytorchjob_names_a_pod_that_never_came() -> None:
    pod = kubeflow_check("job-worker-0", f"job-worker-0:{free_port()}", window="1")
    out, err = pod.communicate(timeout=60)
    assert pod.returncode == 1, out + err
    assert "cloudddp-check: the rendezvous host" in out and "only 0 of the 1 other node(s) checked in" in out, out


@pytest.mark.network
def test_check_alone_on_a_connecting_pod_says_it_cannot_reach_the_rendezvous_host() -> None:
    port = free_port()
    pod = kubeflow_check("job-worker-1", f"job-worker-0:{port}", window="1")
    out, err = pod.communicate(timeout=60)
    assert pod.returncode == 1, out + err
    assert f"TCP: the rendezvous host 127.0.0.1:{port} not reachable within 1 s" in out, out
    assert "never checked in" not in out  # it is no node 0


@pytest.mark.process
@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "[::]"])
def test_check_that_cannot_tell_which_node_hosts_the_rendezvous_says_so_with_exit_2(host: str) -> None:
    """The tester's reproducer: a loopback endpoint is every local pod's, so none can tell it serves. The wildcard
    address is every pod's too: each would have taken itself for the host and waited for the others."""
    err = expect_exit_2("--check", "--check-window", "2", env={
        "PET_RDZV_ENDPOINT": f"{host}:23999", "PET_RDZV_BACKEND": "c10d", "PET_NNODES": "2:2",
        "HOSTNAME": "job-worker-1"})  # fmt: skip
    assert f"--check cannot tell which node hosts this job's c10d rendezvous at '{host}:23999'" in err, err
    assert "--node-rank 0" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.process
def test_check_of_a_job_whose_etcd_rendezvous_numbers_the_nodes_says_it_cannot_with_exit_2() -> None:
    err = expect_exit_2("--check", "--check-window", "2", env={
        "PET_RDZV_ENDPOINT": "etcd:2379", "PET_RDZV_BACKEND": "etcd-v2", "PET_NNODES": "1:2",
        "HOSTNAME": "job-worker-1"})  # fmt: skip
    assert "--check cannot check this job" in err and "etcd-v2" in err and "'etcd:2379'" in err, err


@pytest.mark.network
def test_check_with_a_node_rank_given_still_has_node_0_serve() -> None:
    """--node-rank on such a job: the ranks are known, node 0 serves on the master port (as before)."""
    port = free_port()
    env = {"PET_RDZV_ENDPOINT": f"127.0.0.1:{port}", "PET_RDZV_BACKEND": "c10d", "PET_NNODES": "2:2"}
    pods = [subprocess.Popen(
        [PYTHON, "-m", "cloudddp.launcher", "--check", "--check-window", "20", "--node-rank", str(rank)],
        cwd=REPO, env=clean_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) for rank in (0, 1)]  # fmt: skip
    (out0, err0), (out1, err1) = (pod.communicate(timeout=60) for pod in pods)
    assert [pod.returncode for pod in pods] == [0, 0], (out0, err0, out1, err1)
    assert "cloudddp-check: node 0" in out0 and "checked in: rank 1" in out0, out0
    assert "cloudddp-check: node 1" in out1, out1


# -- 3. a rendezvous endpoint whose port is not a number -------------------------------------------------------------


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "env", "names"),
    [
        (["--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:abc"], {}, ["--rdzv-endpoint='127.0.0.1:abc'", "'abc'"]),
        (["--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:"], {}, ["--rdzv-endpoint='127.0.0.1:'"]),
        ([], {"PET_RDZV_ENDPOINT": "job-worker-0:abc", "PET_NNODES": "1:2"}, ["PET_RDZV_ENDPOINT='job-worker-0:abc'"]),
        ([], {"PET_RDZV_ENDPOINT": "job-worker-0:abc", "PET_NNODES": "2", "PET_NODE_RANK": "0"}, ["PET_RDZV_ENDPOINT"]),
    ],
    ids=["flag", "flag-empty-port", "PET_RDZV_ENDPOINT", "PET_RDZV_ENDPOINT-with-rank"],
)  # fmt: skip
def test_an_endpoint_port_that_is_not_a_number_is_one_error_naming_it(
    args: list[str], env: dict[str, str], names: list[str]
) -> None:
    # Old code: the flag ran torchrun into its traceback (exit 1); PET_RDZV_ENDPOINT made `job-worker-0:abc` the
    # master address.
    for mode in (["--dry-run"], []):
        err = expect_exit_2(*mode, *args, str(REPO / "sources" / "allreduce_check.py"), env=env)
        assert "is not a port number" in err and len(err.strip().splitlines()) == 1, err
        for name in names:
            assert name in err, (name, err)


def test_a_good_endpoint_still_plans() -> None:
    result = launcher("--dry-run", "--rdzv-backend", "c10d", "--nnodes", "1:2", "--rdzv-endpoint", "[::1]:29400",
                          str(REPO / "sources" / "allreduce_check.py"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rdzv_endpoint"] == "[::1]:29400"


# -- 4. paths that cannot be looked at -------------------------------------------------------------------------------


@pytest.mark.process
def test_a_script_name_too_long_is_one_error_with_an_exit_record(tmp_path: Path) -> None:
    exits = tmp_path / "exits"
    err = expect_exit_2("--dry-run", LONG_NAME, env={"CLOUDDDP_EXIT_DIR": str(exits)}, cwd=tmp_path)
    assert LONG_NAME in err and "cannot be looked at" in err and "File name too long" in err, err
    assert records(exits) == ["2"]  # old code: a traceback, exit 1, no record


@pytest.mark.process
def test_a_sagemaker_config_folder_name_too_long_is_one_error_with_an_exit_record(tmp_path: Path) -> None:
    exits = tmp_path / "exits"
    config = tmp_path / LONG_NAME
    err = expect_exit_2("--dry-run", str(REPO / "sources" / "allreduce_check.py"),
                        env={"CLOUDDDP_EXIT_DIR": str(exits), "SM_INPUT_CONFIG_DIR": str(config)})  # fmt: skip
    assert f"sagemaker: cannot look for {config / 'resourceconfig.json'}" in err and "--provider" in err, err
    assert records(exits) == ["2"]


@pytest.fixture
def clean_environ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """os.environ without any platform's variables (main() reads os.environ), and an exit-record folder."""
    for name in list(os.environ):
        if name.startswith(PLATFORM_PREFIXES) or name in PLATFORM_NAMES:
            monkeypatch.delenv(name)
    monkeypatch.setenv("CLOUDDDP_EXIT_DIR", str(tmp_path / "exits"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "exits"


def refuse(monkeypatch: pytest.MonkeyPatch, method: str, name: str) -> None:
    """Path.METHOD raises EACCES for a path called NAME, as for a file in another user's mode-700 folder."""
    original = getattr(pathlib.Path, method)

    def denied(self: pathlib.Path, *args: object, **kwargs: object) -> bool:
        if self.name == name:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return bool(original(self, *args, **kwargs))

    monkeypatch.setattr(pathlib.Path, method, denied)


def test_a_script_in_a_folder_without_permission_is_one_error_with_an_exit_record(
    clean_environ: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    refuse(monkeypatch, "is_file", "train.py")
    assert cli.main(["--dry-run", "private/train.py"]) == 2  # old code: PermissionError out of main()
    err = capsys.readouterr().err
    assert "the training script 'private/train.py' cannot be looked at (Permission denied" in err, err
    assert records(clean_environ) == ["2"]


def test_an_unreadable_sagemaker_config_folder_is_one_error_with_an_exit_record(
    clean_environ: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text("")
    monkeypatch.setenv("SM_INPUT_CONFIG_DIR", str(tmp_path / "config"))
    refuse(monkeypatch, "exists", "resourceconfig.json")
    assert cli.main(["--dry-run", "train.py"]) == 2
    err = capsys.readouterr().err
    assert f"cannot look for {tmp_path / 'config' / 'resourceconfig.json'}" in err and "Permission denied" in err
    assert "SM_INPUT_CONFIG_DIR" in err, err
    assert records(clean_environ) == ["2"]


def test_bad_flags_leave_an_exit_record_too(tmp_path: Path) -> None:
    """argparse's usage error ends the node as bad input does (exit 2): an elastic Slurm job must not count it lost."""
    exits = tmp_path / "exits"
    result = launcher("--rdzv-backend", "bogus", "train.py", env={"CLOUDDDP_EXIT_DIR": str(exits)})
    assert result.returncode == 2 and "invalid choice" in result.stderr, result.stderr
    assert records(exits) == ["2"]


# -- 5. --torchrun-arg VALUE, VALUE starting with "-" (the README's form) -------------------------------------------


@pytest.mark.parametrize("form", [["--torchrun-arg", "--log-dir=/x"], ["--torchrun-arg=--log-dir=/x"],
                                  ["--torchrun-a", "--log-dir=/x"]], ids=["two words", "one word", "prefix"])  # fmt: skip
def test_torchrun_arg_takes_a_value_that_starts_with_a_dash(form: list[str]) -> None:
    script = str(REPO / "sources" / "allreduce_check.py")
    result = launcher("--dry-run", *form, "--torchrun-arg", "-r", "--torchrun-arg", "3", script, "--x")
    assert result.returncode == 0, result.stderr  # old code, two words: "expected one argument", exit 2
    argv = json.loads(result.stdout)["argv"]
    assert argv[argv.index("--log-dir=/x") + 1 : argv.index("--log-dir=/x") + 3] == ["-r", "3"], argv
    assert argv[-2:] == [script, "--x"], argv


@pytest.mark.process
def test_check_exits_promptly_when_told_it_cannot() -> None:
    started = time.monotonic()
    expect_exit_2("--check", env={"PET_RDZV_ENDPOINT": "localhost:23999", "PET_NNODES": "2"})
    assert time.monotonic() - started < 50  # no --check-window wait (60 s) before saying so


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "env"),
    [(["--provider", "standalone", "--rdzv-backend", "c10d"], {}),
     (["--provider", "kubeflow"], {"PET_NNODES": "1", "PET_RDZV_ENDPOINT": "localhost:29400", "PET_RDZV_BACKEND": "c10d"})],
)  # fmt: skip
def test_check_of_a_one_node_rendezvous_job_checks_node_0(args: list[str], env: dict[str, str]) -> None:
    # Found by a review of 7e994c7: a job of one node has only node 0, whatever its endpoint; it was refused
    # (exit 2, "cannot tell which node hosts this job's c10d rendezvous").
    result = subprocess.run([PYTHON, "-m", "cloudddp.launcher", *args, "--check", "--check-window", "2"],
                            cwd=REPO, env=clean_env(env), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "node 0/1:1" in result.stdout and "cloudddp-check: node 0 (" in result.stdout and ": OK: " in result.stdout
