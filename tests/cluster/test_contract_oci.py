"""OCI's job side against Oracle ADS's own code (fixtures/oci_upstream.py)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from fixtures.oci_upstream import JOB_OCID, legacy_node, native_node
from helpers import PYTHON, REPO, SOURCES, clean_env, launcher

from cloudddp.cluster import DetectOptions, detect_provider, oci
from cloudddp.errors import CloudDDPError
from cloudddp.providers.local.provider import free_port

SCRIPT = str(SOURCES / "allreduce_check.py")
FAST = DetectOptions(metadata_timeout=0.2, metadata_poll=0.05, interface_for=lambda ip: {"10.0.0.5": "ens3"}.get(ip))


def metadata(tmp: Path, *entries: tuple[int, str]) -> str:
    path = tmp / "cluster.json"
    path.write_text(json.dumps([{"Rank": r, "IPAddress": ip} for r, ip in entries]))
    return str(path)


def test_legacy_nodes_share_the_rendezvous_id_although_their_job_runs_differ() -> None:
    plans = [oci.plan(legacy_node(rank, workers=2), FAST) for rank in range(3)]
    assert {p.rdzv_id for p in plans} == {JOB_OCID}
    assert [p.node_rank for p in plans] == [0, 1, 2]
    assert {p.nnodes for p in plans} == {3}
    assert [p.master_addr for p in plans[1:]] == ["10.0.0.5", "10.0.0.5"]


def test_legacy_worker_accepts_the_main_ip_ads_itself_writes() -> None:
    env = legacy_node(1, workers=1)
    env["OCI__MAIN_IP"] = env.pop("MASTER_ADDR")
    plan = oci.plan(env, FAST)
    assert (plan.master_addr, plan.sources["master_addr"]) == ("10.0.0.5", "OCI__MAIN_IP")


def test_legacy_worker_without_an_address_says_the_work_dir_handshake_is_not_done() -> None:
    env = legacy_node(1, workers=1)
    del env["MASTER_ADDR"]
    with pytest.raises(CloudDDPError) as info:
        oci.plan(env, FAST)
    assert "OCI__WORK_DIR='oci://bucket@namespace/cluster'" in str(info.value)
    assert "does not do that work-dir handshake" in str(info.value)


def test_native_size_falls_back_to_node_count_as_ads_does(tmp_path: Path) -> None:
    path = metadata(tmp_path, (0, "10.0.0.5"), (1, "10.0.0.6"))
    plan = oci.plan(native_node(1, 2, path, size_variable="NODE_COUNT"), FAST)
    assert (plan.nnodes, plan.node_rank, plan.sources["nnodes"]) == (2, 1, "NODE_COUNT")


@pytest.mark.parametrize("missing", ["CLUSTER_NODES_METADATA_FILE", "NODE_RANK"])
def test_partial_native_variables_are_refused_naming_the_missing_one(tmp_path: Path, missing: str) -> None:
    env = native_node(0, 2, metadata(tmp_path, (0, "10.0.0.5")))
    del env[missing]
    assert detect_provider(env).NAME == "oci"  # never a silent standalone run
    result = launcher("--dry-run", SCRIPT, env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{missing} is not set" in result.stderr


def test_the_socket_interface_is_the_one_owning_this_nodes_metadata_ip(tmp_path: Path) -> None:
    path = metadata(tmp_path, (0, "10.0.0.5"), (1, "10.0.0.6"))
    plan = oci.plan(native_node(0, 2, path), FAST)
    assert (plan.network_interface, plan.local_addr) == ("ens3", "10.0.0.5")
    user_set = oci.plan({**native_node(0, 2, path), "NCCL_SOCKET_IFNAME": "eth9"}, FAST)
    assert user_set.network_interface == "eth9"
    override = oci.plan({**native_node(0, 2, path), "SET_SOCKET_IFNAME": "ib0"}, FAST)
    assert override.network_interface == "ib0"


def test_the_real_interface_lookup_finds_loopback(tmp_path: Path) -> None:
    plan = oci.plan(native_node(0, 1, metadata(tmp_path, (0, "127.0.0.1"))), DetectOptions())
    assert plan.network_interface == "lo"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ('[{"Rank": 0, "IPAddress": "10.0.0.5"}, {"Rank": 0, "IPAddress": "10.0.0.6"}]', "lists rank 0 twice"),
        ('[{"Rank": 0, "IPAddress": ""}, {"Rank": 1, "IPAddress": "10.0.0.6"}]', 'non-empty "IPAddress"'),
        ("{not json", "does not parse as JSON"),
        ('{"Rank": 0}', "must hold a JSON list"),
    ],
    ids=["duplicate-rank", "empty-ip", "not-json", "not-a-list"],
)
def test_a_bad_metadata_file_is_named_with_what_is_wrong(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(content)
    result = launcher("--dry-run", "--metadata-timeout", "1", SCRIPT, env=native_node(0, 2, str(path)))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert fragment in result.stderr and str(path) in result.stderr
    assert "never came up" not in result.stderr


@pytest.mark.parametrize("kind", ["directory", "latin-1"])
def test_a_metadata_file_that_is_a_directory_or_not_utf8_is_named(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "cluster.json"
    if kind == "directory":
        path.mkdir()
    else:
        path.write_bytes('[{"Rank": 0, "IPAddress": "caf\xe9"}]'.encode("latin-1"))
    result = launcher("--dry-run", SCRIPT, env=native_node(0, 1, str(path)))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert str(path) in result.stderr
    assert ("is a directory" if kind == "directory" else "not UTF-8") in result.stderr


@pytest.mark.slow
def test_two_legacy_ads_nodes_with_their_own_job_runs_train_together(tmp_path: Path) -> None:
    """Before: JOB_RUN_OCID as rendezvous id differed per node and rank 0 waited forever."""
    port = str(free_port())
    nodes = []
    for rank in range(2):
        env = {**legacy_node(rank, workers=1, main_ip="127.0.0.1"), "MASTER_PORT": port}
        with open(tmp_path / f"node{rank}.log", "wb") as log:
            nodes.append(subprocess.Popen([PYTHON, "-m", "cloudddp.launcher", SCRIPT, "--out-dir", str(tmp_path / "out")],
                                          cwd=REPO, env=clean_env(env), stdout=log, stderr=subprocess.STDOUT))  # fmt: skip
    started = time.monotonic()
    try:
        codes = [node.wait(timeout=120) for node in nodes]
    finally:
        for node in nodes:
            node.kill()
    logs = [(tmp_path / f"node{r}.log").read_text() for r in range(2)]
    assert codes == [0, 0], logs
    assert time.monotonic() - started < 120
    assert [json.loads((tmp_path / "out" / f"rank{r}.json").read_text())["sum"] for r in range(2)] == [3.0, 3.0]
