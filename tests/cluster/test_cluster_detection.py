"""Detection of every cluster environment, as pure functions of a variable mapping and files.

No subprocesses, no torch: each case builds the variables a platform really sets and checks
the resulting `ClusterPlan` (or the error a person would read).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cloudddp.cluster import (
    DetectOptions,
    awsbatch,
    detect_provider,
    kubeflow,
    oci,
    pbs,
    resolve_plan,
    sagemaker,
    skypilot,
    slurm,
    standalone,
)
from cloudddp.cluster.hostlist import expand_hostlist
from cloudddp.cluster.plan import NPROC_GPUS_OR_ONE, ClusterPlan
from cloudddp.errors import CloudDDPError

OPTIONS = DetectOptions(hostnames=["test-host"])


def error_from(call: Callable[[], Any], *fragments: str) -> CloudDDPError:
    """Run `call`, expect a CloudDDPError whose message contains every fragment."""
    with pytest.raises(CloudDDPError) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return info.value


@pytest.fixture
def clean(tmp_path: Path) -> dict[str, str]:
    """A base environment that cannot see a real /opt/ml/input/config on the test machine."""
    return {"SM_INPUT_CONFIG_DIR": str(tmp_path / "no-sagemaker-here")}


# ---------------------------------------------------------------- Slurm hostlists


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node1", ["node1"]),
        ("gpu-[01-03,07]", ["gpu-01", "gpu-02", "gpu-03", "gpu-07"]),
        ("n[1-2]", ["n1", "n2"]),
        ("node[008-011]", ["node008", "node009", "node010", "node011"]),
        ("node[8-11]", ["node8", "node9", "node10", "node11"]),
        ("node[098-101]", ["node098", "node099", "node100", "node101"]),
        ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
        ("gpu-[01-02],cpu1,login[3-4]", ["gpu-01", "gpu-02", "cpu1", "login3", "login4"]),
        ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
        ("node[1-2].cluster.local", ["node1.cluster.local", "node2.cluster.local"]),
        ("[1-2]node", ["1node", "2node"]),
        ("node[5]", ["node5"]),
        ("node[3-3]", ["node3"]),
        ("a[1,3-4,9],b[2]", ["a1", "a3", "a4", "a9", "b2"]),
        ("x[1-2]y[7]z[0-1]", ["x1y7z0", "x1y7z1", "x2y7z0", "x2y7z1"]),
        (" node[1-2] ", ["node1", "node2"]),
        ("node[1-2], cpu1", ["node1", "node2", "cpu1"]),
    ],
)
def test_hostlist_expands_like_scontrol_show_hostnames(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("node[1-3", "never closed"),
        ("node1-3]", "without a matching '['"),
        ("node[[1-2]]", "nested"),
        ("node[5-3]", "backwards"),
        ("node[]", "empty bracket group"),
        ("node[a-c]", "neither a number nor a range"),
        ("node[1-b]", "neither a number nor a range"),
        ("node[1-2-3]", "neither a number nor a range"),
        ("node[1,,2]", "neither a number nor a range"),
        ("node[-2]", "neither a number nor a range"),
        ("a,,b", "empty entry"),
        ("a,b,", "empty entry"),
        (",a", "empty entry"),
        ("no de1", "white space"),
        ("node[1-999999999]", "more than"),
        ("r[1-9999]n[1-9999]", "more than"),
    ],
)
def test_malformed_hostlist_is_an_error_naming_the_variable_and_value(text: str, reason: str) -> None:
    error_from(lambda: expand_hostlist(text), "SLURM_JOB_NODELIST", repr(text), reason)


def test_hostlist_error_names_the_variable_it_was_read_from() -> None:
    error_from(lambda: expand_hostlist("n[2-1]", variable="SLURM_NODELIST"), "SLURM_NODELIST='n[2-1]'")


# ---------------------------------------------------------------- Slurm


def slurm_env(**extra: str) -> dict[str, str]:
    """What `srun --nodes=2 --ntasks-per-node=1` sets on the second node (selection; the full set as
    Slurm 22.05 writes it is in tests/cluster/fixtures/slurm/)."""
    env = {
        "SLURM_JOB_ID": "123456",
        "SLURM_JOBID": "123456",
        "SLURM_JOB_NODELIST": "gpu-[01-02]",
        "SLURM_NODELIST": "gpu-[01-02]",
        "SLURM_NNODES": "2",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_STEP_ID": "0",
        "SLURM_STEPID": "0",
        "SLURM_STEP_NODELIST": "gpu-[01-02]",
        "SLURM_STEP_NUM_NODES": "2",
        "SLURM_NODEID": "1",
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "0",
        "SLURM_NTASKS": "2",
        "SLURM_GPUS_ON_NODE": "4",
    }
    env.update(extra)
    return env


def test_slurm_node_reads_rank_hosts_master_and_gpus() -> None:
    plan = slurm.plan(slurm_env(), OPTIONS)
    assert plan.provider == "slurm"
    assert plan.hosts == ["gpu-01", "gpu-02"]
    assert (plan.nnodes, plan.node_rank) == (2, 1)
    assert plan.master_addr == "gpu-01"
    assert plan.nproc_per_node == 4
    assert plan.rdzv_id == "123456.0"  # job and step: two steps of one allocation are two rendezvous
    assert plan.sources["node_rank"] == "SLURM_NODEID"
    assert plan.sources["nproc_per_node"] == "SLURM_GPUS_ON_NODE"


def test_slurm_port_is_derived_from_the_job_id() -> None:
    plan = slurm.plan(slurm_env(), OPTIONS)
    assert plan.master_port == 20000 + 2 * (123456 % 6000)
    other = slurm.plan(slurm_env(SLURM_JOB_ID="123457"), OPTIONS)
    # The next job's master port is neither this job's nor its fail-fast channel's (master + 1).
    assert other.master_port == plan.master_port + 2


def test_slurm_master_port_variable_overrides_the_derived_port() -> None:
    plan = slurm.plan(slurm_env(MASTER_PORT="31000"), OPTIONS)
    assert plan.master_port == 31000
    assert plan.sources["master_port"] == "MASTER_PORT"


def test_slurm_without_gpus_falls_back_to_gpus_or_one() -> None:
    plan = slurm.plan(slurm_env(SLURM_GPUS_ON_NODE="0"), OPTIONS)
    assert plan.nproc_per_node == NPROC_GPUS_OR_ONE
    env = slurm_env()
    del env["SLURM_GPUS_ON_NODE"]
    assert slurm.plan(env, OPTIONS).nproc_per_node == NPROC_GPUS_OR_ONE


def test_slurm_host_map_replaces_an_unresolvable_master_name() -> None:
    env = slurm_env(
        SLURM_JOB_NODELIST="n[1-2]", SLURM_NODELIST="n[1-2]", SLURM_STEP_NODELIST="n[1-2]", SLURM_NODEID="0"
    )
    plan = slurm.plan(env, OPTIONS)
    plan.map_hosts({"n1": "127.0.0.1"})
    assert plan.master_addr == "127.0.0.1"
    assert plan.sources["master_addr"] == "host map (n1)"
    assert plan.hosts == ["n1", "n2"]


def test_slurm_single_node_batch_without_nodeid_is_rank_zero() -> None:
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node1", "SLURM_NNODES": "1"}
    plan = slurm.plan(env, OPTIONS)
    assert (plan.nnodes, plan.node_rank, plan.master_addr) == (1, 0, "node1")


def test_slurm_multi_node_without_nodeid_asks_for_srun() -> None:
    env = slurm_env()
    del env["SLURM_NODEID"]
    error_from(lambda: slurm.plan(env, OPTIONS), "SLURM_NODEID", "srun --ntasks-per-node=1")


def test_slurm_nodeid_at_or_beyond_nnodes_is_an_error() -> None:
    error_from(lambda: slurm.plan(slurm_env(SLURM_NODEID="2"), OPTIONS), "SLURM_NODEID=2", "SLURM_STEP_NUM_NODES=2")
    error_from(lambda: slurm.plan(slurm_env(SLURM_NODEID="7"), OPTIONS), "SLURM_NODEID=7")


def test_slurm_negative_nodeid_is_an_error() -> None:
    error_from(lambda: slurm.plan(slurm_env(SLURM_NODEID="-1"), OPTIONS), "SLURM_NODEID", "'-1'")


def test_slurm_nnodes_disagreeing_with_the_nodelist_is_an_error() -> None:
    error_from(
        lambda: slurm.plan(slurm_env(SLURM_STEP_NUM_NODES="3"), OPTIONS),
        "SLURM_STEP_NUM_NODES=3",
        "SLURM_STEP_NODELIST='gpu-[01-02]'",
        "2 host(s)",
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SLURM_STEP_NUM_NODES", "two"),
        ("SLURM_NODEID", "1.0"),
        ("SLURM_GPUS_ON_NODE", "4(x2)"),
        ("MASTER_PORT", "http"),
    ],
)
def test_slurm_non_integer_values_are_errors(name: str, value: str) -> None:
    error_from(lambda: slurm.plan(slurm_env(**{name: value}), OPTIONS), name, repr(value))


def test_slurm_malformed_nodelist_is_an_error_naming_it() -> None:
    env = slurm_env(SLURM_STEP_NODELIST="gpu-[01-02")
    error_from(lambda: slurm.plan(env, OPTIONS), "SLURM_STEP_NODELIST='gpu-[01-02'", "never closed")
    single = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "gpu-[01"}
    error_from(lambda: slurm.plan(single, OPTIONS), "SLURM_JOB_NODELIST='gpu-[01'")


def test_slurm_detection_needs_a_job_id_and_a_nodelist() -> None:
    assert slurm.detect(slurm_env())
    assert slurm.detect({"SLURM_JOB_ID": "1", "SLURM_NODELIST": "n1"})
    assert not slurm.detect({"SLURM_JOB_ID": "1"})
    assert not slurm.detect({"SLURM_JOB_NODELIST": "n1"})


# ---------------------------------------------------------------- PBS


def write_nodefile(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "4567.pbs-server.nodes"
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def pbs_env(path: Path, **extra: str) -> dict[str, str]:
    env = {"PBS_JOBID": "4567.pbs-server", "PBS_NODEFILE": str(path), "PBS_O_WORKDIR": "/home/u"}
    env.update(extra)
    return env


def test_pbs_nodefile_slots_are_deduplicated_in_allocation_order(tmp_path: Path) -> None:
    path = write_nodefile(tmp_path, ["node3"] * 4 + ["node1"] * 4 + ["node2"] * 4 + ["node1"])
    plan = pbs.plan(pbs_env(path), DetectOptions(hostnames=["node1"]))
    assert plan.hosts == ["node3", "node1", "node2"]
    assert (plan.nnodes, plan.node_rank) == (3, 1)
    assert plan.master_addr == "node3"
    assert plan.master_port == 20000 + 2 * 4567
    assert plan.rdzv_id == "4567.pbs-server"
    assert plan.nproc_per_node == NPROC_GPUS_OR_ONE


@pytest.mark.parametrize(
    ("listed", "names"),
    [
        ("node2.cluster.local", ["node2"]),
        ("node2", ["node2.cluster.local"]),
        ("NODE2", ["node2"]),
        ("node2.cluster.local", ["other", "node2.cluster.local."]),
    ],
)
def test_pbs_matches_short_names_and_fqdns_both_ways(tmp_path: Path, listed: str, names: list[str]) -> None:
    path = write_nodefile(tmp_path, ["node1.cluster.local", listed])
    plan = pbs.plan(pbs_env(path), DetectOptions(hostnames=names))
    assert plan.node_rank == 1


def test_pbs_fqdns_in_different_domains_do_not_match(tmp_path: Path) -> None:
    path = write_nodefile(tmp_path, ["node1.a.example", "node2.a.example"])
    error_from(
        lambda: pbs.plan(pbs_env(path), DetectOptions(hostnames=["node2.b.example"])),
        "node2.b.example",
        "node1.a.example, node2.a.example",
    )


@pytest.mark.parametrize("name", ["PMI_RANK", "OMPI_COMM_WORLD_RANK"])
def test_pbs_mpi_rank_gives_the_node_rank(tmp_path: Path, name: str) -> None:
    path = write_nodefile(tmp_path, ["node1", "node2", "node3"])
    plan = pbs.plan(pbs_env(path, **{name: "2"}), DetectOptions(hostnames=["node3"]))
    assert plan.node_rank == 2
    assert plan.sources["node_rank"] == name
    # A host the node file does not name (an emulation mapping names to addresses): the rank alone decides.
    assert pbs.plan(pbs_env(path, **{name: "1"}), DetectOptions(hostnames=["laptop"])).node_rank == 1


def test_pbs_two_launchers_on_one_host_are_named_as_such(tmp_path: Path) -> None:
    """mpiexec -n 4 over a node file vm,vm,othernode,othernode put ranks 0 and 1 on vm: rank 1 took vm for node 1
    (node 0 holds the store at the first host), and ranks 2 and 3 were refused as out of range."""
    path = write_nodefile(tmp_path, ["vm", "vm", "othernode", "othernode"])
    error_from(lambda: pbs.plan(pbs_env(path, PMI_RANK="1"), DetectOptions(hostnames=["vm"])),
               "PMI_RANK=1", "is node 0 in PBS_NODEFILE", "more than one launcher", "-ppn 1")  # fmt: skip


def test_pbs_mpi_rank_beyond_the_hosts_is_an_error(tmp_path: Path) -> None:
    path = write_nodefile(tmp_path, ["node1", "node1", "node2", "node2"])
    error_from(lambda: pbs.plan(pbs_env(path, PMI_RANK="3"), OPTIONS), "PMI_RANK=3", "PBS_NODEFILE=2")


def test_pbs_non_integer_mpi_rank_is_an_error(tmp_path: Path) -> None:
    path = write_nodefile(tmp_path, ["node1"])
    error_from(lambda: pbs.plan(pbs_env(path, OMPI_COMM_WORLD_RANK="x"), OPTIONS), "OMPI_COMM_WORLD_RANK", "'x'")


def test_pbs_host_not_in_nodefile_lists_hosts_and_own_names(tmp_path: Path) -> None:
    path = write_nodefile(tmp_path, ["node1", "node2"])
    error_from(
        lambda: pbs.plan(pbs_env(path), DetectOptions(hostnames=["login1", "login1.cluster"])),
        "login1, login1.cluster",
        "node1, node2",
        f"PBS_NODEFILE={str(path)!r}",
    )


def test_pbs_missing_nodefile_is_an_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "gone"
    error_from(lambda: pbs.plan(pbs_env(path), OPTIONS), f"PBS_NODEFILE={str(path)!r}", "cannot read")


def test_pbs_empty_nodefile_is_an_error_naming_the_path(tmp_path: Path) -> None:
    path = write_nodefile(tmp_path, ["", "  "])
    error_from(lambda: pbs.plan(pbs_env(path), OPTIONS), f"PBS_NODEFILE={str(path)!r}", "lists no hosts")


def test_pbs_nodefile_that_is_a_directory_is_an_error(tmp_path: Path) -> None:
    error_from(lambda: pbs.plan(pbs_env(tmp_path), OPTIONS), f"PBS_NODEFILE={str(tmp_path)!r}")


def test_pbs_host_map_applies_to_the_master(tmp_path: Path) -> None:
    path = write_nodefile(tmp_path, ["node1", "node2"])
    plan = pbs.plan(pbs_env(path), DetectOptions(hostnames=["node2"]))
    plan.map_hosts({"node1": "10.0.0.1"})
    assert plan.master_addr == "10.0.0.1"
    assert plan.sources["master_addr"] == "host map (node1)"


# ---------------------------------------------------------------- Kubeflow


def pytorchjob_v1_old(rank: int = 2) -> dict[str, str]:
    """An older training-operator: only the plain variables, WORLD_SIZE = pod count."""
    return {
        "MASTER_ADDR": "mnist-master-0",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "3",
        "RANK": str(rank),
        "PYTHONUNBUFFERED": "0",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    }


def pytorchjob_v1_new(rank: int = 2) -> dict[str, str]:
    """A recent training-operator with nprocPerNode: 8 (WORLD_SIZE counts processes)."""
    env = pytorchjob_v1_old(rank)
    env.update(
        {
            "WORLD_SIZE": "24",
            "PET_MASTER_ADDR": "mnist-master-0",
            "PET_MASTER_PORT": "23456",
            "PET_NNODES": "3",
            "PET_NODE_RANK": str(rank),
            "PET_NPROC_PER_NODE": "8",
        }
    )
    return env


def test_kubeflow_v1_plain_variables_give_node_count_and_rank() -> None:
    plan = kubeflow.plan(pytorchjob_v1_old(), OPTIONS)
    assert (plan.nnodes, plan.node_rank) == (3, 2)
    assert (plan.master_addr, plan.master_port) == ("mnist-master-0", 23456)
    assert plan.rdzv_backend == "static"
    assert plan.nproc_per_node == NPROC_GPUS_OR_ONE


def test_kubeflow_v1_pet_nnodes_wins_over_world_size_counting_processes() -> None:
    plan = kubeflow.plan(pytorchjob_v1_new(), OPTIONS)
    assert plan.nnodes == 3
    assert plan.sources["nnodes"] == "PET_NNODES"
    assert plan.nproc_per_node == 8
    assert plan.node_rank == 2


def test_kubeflow_pet_values_take_precedence_over_plain_ones() -> None:
    env = pytorchjob_v1_new(rank=1)
    env.update({"PET_MASTER_ADDR": "pet-master", "PET_MASTER_PORT": "29511", "RANK": "0"})
    plan = kubeflow.plan(env, OPTIONS)
    assert (plan.master_addr, plan.master_port, plan.node_rank) == ("pet-master", 29511, 1)
    assert plan.sources["master_addr"] == "PET_MASTER_ADDR"
    assert plan.sources["node_rank"] == "PET_NODE_RANK"


def test_kubeflow_v1_without_master_port_uses_23456() -> None:
    env = pytorchjob_v1_old()
    del env["MASTER_PORT"]
    assert kubeflow.plan(env, OPTIONS).master_port == 23456


def test_kubeflow_elastic_pytorchjob_uses_the_c10d_rendezvous() -> None:
    env = {
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": "elastic-job-worker-0:23456",
        "PET_NNODES": "2:4",
        "PET_MAX_RESTARTS": "3",
        "PET_NPROC_PER_NODE": "2",
        "PET_RDZV_ID": "elastic-job",
    }
    assert kubeflow.detect(env)
    plan = kubeflow.plan(env, OPTIONS)
    assert plan.nnodes == "2:4"
    assert (plan.rdzv_backend, plan.rdzv_endpoint) == ("c10d", "elastic-job-worker-0:23456")
    assert plan.endpoint == "elastic-job-worker-0:23456"
    assert plan.max_restarts == 3
    assert plan.nproc_per_node == 2
    assert plan.rdzv_id == "elastic-job"
    assert (plan.master_addr, plan.master_port) == ("elastic-job-worker-0", 23456)
    assert "rendezvous" in plan.sources["node_rank"]


def test_kubeflow_endpoint_without_backend_defaults_to_c10d() -> None:
    plan = kubeflow.plan({"PET_RDZV_ENDPOINT": "job-worker-0", "PET_NNODES": "1:2"}, OPTIONS)
    assert plan.rdzv_backend == "c10d"
    assert (plan.master_addr, plan.master_port) == ("job-worker-0", 29400)


def test_kubeflow_trainer_v2_reads_pet_variables_and_defaults_port_29500() -> None:
    env = {
        "PET_NNODES": "2",
        "PET_NODE_RANK": "1",
        "PET_MASTER_ADDR": "train-node-0-0.train",
        "PET_NPROC_PER_NODE": "auto",
        "JOB_COMPLETION_INDEX": "1",
    }
    assert kubeflow.detect(env)
    plan = kubeflow.plan(env, OPTIONS)
    assert (plan.nnodes, plan.node_rank, plan.master_addr) == (2, 1, "train-node-0-0.train")
    assert plan.master_port == 29500
    assert plan.nproc_per_node == "auto"
    env["PET_MASTER_PORT"] = "29500"
    assert kubeflow.plan(env, OPTIONS).sources["master_port"] == "PET_MASTER_PORT"


@pytest.mark.parametrize(("raw", "expected"), [("4", 4), ("gpu", "gpu"), ("CPU", "cpu"), ("auto", "auto")])
def test_kubeflow_nproc_per_node_accepts_counts_and_torchrun_words(raw: str, expected: int | str) -> None:
    env = {"PET_NNODES": "1", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m", "PET_NPROC_PER_NODE": raw}
    assert kubeflow.plan(env, OPTIONS).nproc_per_node == expected


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PET_NPROC_PER_NODE", "eight"),
        ("PET_NPROC_PER_NODE", "0"),
        ("PET_NNODES", "4:2"),
        ("PET_NNODES", "a:b"),
        ("PET_NNODES", "0"),
        ("PET_NODE_RANK", "first"),
        ("PET_MASTER_PORT", "port"),
        ("PET_MAX_RESTARTS", "-1"),
    ],
)
def test_kubeflow_bad_values_are_errors_naming_variable_and_value(name: str, value: str) -> None:
    env = pytorchjob_v1_new(rank=0)
    env[name] = value
    error_from(lambda: kubeflow.plan(env, OPTIONS), name, repr(value))


def test_kubeflow_rank_beyond_node_count_is_an_error() -> None:
    error_from(lambda: kubeflow.plan(pytorchjob_v1_old(rank=3), OPTIONS), "RANK=3", "WORLD_SIZE")
    error_from(lambda: kubeflow.plan(pytorchjob_v1_new(rank=5), OPTIONS), "PET_NODE_RANK=5", "PET_NNODES=3")


def test_kubeflow_elastic_range_without_endpoint_is_an_error() -> None:
    env = {"PET_NNODES": "1:4", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m"}
    error_from(lambda: kubeflow.plan(env, OPTIONS), "PET_NNODES='1:4'", "PET_RDZV_ENDPOINT")


def test_kubeflow_dynamic_backend_without_endpoint_is_an_error() -> None:
    env = {"PET_NNODES": "2", "PET_NODE_RANK": "0", "PET_MASTER_ADDR": "m", "PET_RDZV_BACKEND": "etcd-v2"}
    error_from(lambda: kubeflow.plan(env, OPTIONS), "PET_RDZV_BACKEND='etcd-v2'", "PET_RDZV_ENDPOINT")


def test_kubeflow_static_job_without_master_is_an_error() -> None:
    error_from(lambda: kubeflow.plan({"PET_NNODES": "2", "PET_NODE_RANK": "0"}, OPTIONS), "PET_MASTER_ADDR")


def test_kubeflow_plain_variables_with_another_platform_marker_are_not_kubeflow() -> None:
    assert kubeflow.detect(pytorchjob_v1_old())
    for marker in ("SLURM_JOB_ID", "OCI__MODE", "TORCHELASTIC_RUN_ID", "PBS_JOBID"):
        assert not kubeflow.detect({**pytorchjob_v1_old(), marker: "x"}), marker
    assert not kubeflow.detect({"MASTER_ADDR": "m", "RANK": "0"})


# ---------------------------------------------------------------- AWS Batch


def batch_env(index: int, main: int = 0, nodes: int = 3, **extra: str) -> dict[str, str]:
    env = {
        "AWS_BATCH_JOB_ID": f"0a1b2c3d-aaaa-bbbb-cccc-0123456789ab#{index}",
        "AWS_BATCH_JOB_ATTEMPT": "1",
        "AWS_BATCH_JOB_NODE_INDEX": str(index),
        "AWS_BATCH_JOB_NUM_NODES": str(nodes),
        "AWS_BATCH_JOB_MAIN_NODE_INDEX": str(main),
    }
    if index != main:
        env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = "10.0.1.17"
    env.update(extra)
    return env


def test_awsbatch_child_node_uses_the_main_node_address() -> None:
    plan = awsbatch.plan(batch_env(2), OPTIONS)
    assert (plan.nnodes, plan.node_rank) == (3, 2)
    assert plan.master_addr == "10.0.1.17"
    assert plan.master_port == 29500
    assert plan.rdzv_id == "0a1b2c3d-aaaa-bbbb-cccc-0123456789ab"


def test_awsbatch_main_node_names_itself() -> None:
    plan = awsbatch.plan(batch_env(0), DetectOptions(hostnames=["ip-10-0-1-17.ec2.internal"]))
    assert plan.node_rank == 0
    assert plan.master_addr == "ip-10-0-1-17.ec2.internal"
    assert plan.sources["master_addr"] == "this node (main)"


def test_awsbatch_ranks_count_from_a_main_node_that_is_not_index_zero() -> None:
    ranks = [awsbatch.plan(batch_env(i, main=1), OPTIONS).node_rank for i in range(3)]
    assert ranks == [2, 0, 1]


def test_awsbatch_child_without_main_address_is_an_error() -> None:
    env = batch_env(1)
    del env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"]
    error_from(
        lambda: awsbatch.plan(env, OPTIONS),
        "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS",
        "AWS_BATCH_JOB_NODE_INDEX=1",
    )


def test_awsbatch_out_of_range_indexes_are_errors() -> None:
    error_from(
        lambda: awsbatch.plan(batch_env(3), OPTIONS),
        "AWS_BATCH_JOB_NODE_INDEX=3",
        "AWS_BATCH_JOB_NUM_NODES=3",
    )
    error_from(lambda: awsbatch.plan(batch_env(0, main=5), OPTIONS), "AWS_BATCH_JOB_MAIN_NODE_INDEX=5")
    error_from(
        lambda: awsbatch.plan(batch_env(0, AWS_BATCH_JOB_NUM_NODES="three"), OPTIONS),
        "AWS_BATCH_JOB_NUM_NODES",
        "'three'",
    )


def test_awsbatch_single_node_job_is_not_detected() -> None:
    assert not awsbatch.detect({"AWS_BATCH_JOB_ID": "abc", "AWS_BATCH_JQ_NAME": "q"})
    assert awsbatch.detect(batch_env(0))


# ---------------------------------------------------------------- SkyPilot


def sky_env(rank: int, **extra: str) -> dict[str, str]:
    env = {
        "SKYPILOT_NODE_RANK": str(rank),
        "SKYPILOT_NODE_IPS": "10.0.0.4\n10.0.0.5\n10.0.0.6\n",
        "SKYPILOT_NUM_NODES": "3",
        "SKYPILOT_NUM_GPUS_PER_NODE": "8",
        "SKYPILOT_TASK_ID": "sky-2024-01-01-00-00-00-000000_mycluster_1",
    }
    env.update(extra)
    return env


def test_skypilot_node_gets_master_local_address_and_gpus() -> None:
    plan = skypilot.plan(sky_env(1), OPTIONS)
    assert plan.hosts == ["10.0.0.4", "10.0.0.5", "10.0.0.6"]
    assert (plan.nnodes, plan.node_rank) == (3, 1)
    assert plan.master_addr == "10.0.0.4"
    assert plan.local_addr == "10.0.0.5"
    assert plan.nproc_per_node == 8
    assert plan.rdzv_id.startswith("sky-")


def test_skypilot_without_gpus_falls_back_to_gpus_or_one() -> None:
    assert skypilot.plan(sky_env(0, SKYPILOT_NUM_GPUS_PER_NODE="0"), OPTIONS).nproc_per_node == NPROC_GPUS_OR_ONE


def test_skypilot_node_count_disagreeing_with_ips_is_an_error() -> None:
    error_from(
        lambda: skypilot.plan(sky_env(0, SKYPILOT_NUM_NODES="4"), OPTIONS),
        "SKYPILOT_NUM_NODES=4",
        "SKYPILOT_NODE_IPS",
        "3 address(es)",
    )


def test_skypilot_rank_beyond_the_nodes_is_an_error() -> None:
    error_from(lambda: skypilot.plan(sky_env(3), OPTIONS), "SKYPILOT_NODE_RANK=3", "SKYPILOT_NUM_NODES=3")
    without_count = {k: v for k, v in sky_env(3).items() if k != "SKYPILOT_NUM_NODES"}
    message = str(error_from(lambda: skypilot.plan(without_count, OPTIONS), "the number of IPs in SKYPILOT_NODE_IPS=3"))
    assert "SKYPILOT_NUM_NODES" not in message  # it named a variable that was not set


def test_skypilot_non_integer_rank_is_an_error() -> None:
    error_from(lambda: skypilot.plan(sky_env(0, SKYPILOT_NODE_RANK="zero"), OPTIONS), "SKYPILOT_NODE_RANK", "'zero'")


# ---------------------------------------------------------------- SageMaker


def write_resource_config(directory: Path, **fields: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "current_host": "algo-2",
        "current_instance_type": "ml.p4d.24xlarge",
        "current_group_name": "homogeneousCluster",
        "hosts": ["algo-1", "algo-2"],
        "instance_groups": [
            {
                "instance_group_name": "homogeneousCluster",
                "instance_type": "ml.p4d.24xlarge",
                "hosts": ["algo-2", "algo-1"],
            }
        ],
        "network_interface_name": "eth0",
    }
    config.update(fields)
    path = directory / "resourceconfig.json"
    path.write_text(json.dumps(config))
    return directory


def test_sagemaker_resource_config_gives_rank_master_and_interface(tmp_path: Path) -> None:
    config_dir = write_resource_config(tmp_path / "config")
    env = {"SM_INPUT_CONFIG_DIR": str(config_dir), "SM_NUM_GPUS": "8", "TRAINING_JOB_NAME": "job-1"}
    assert sagemaker.detect(env)
    plan = sagemaker.plan(env, DetectOptions())
    assert (plan.nnodes, plan.node_rank) == (2, 1)
    assert (plan.master_addr, plan.master_port) == ("algo-1", 7777)
    assert plan.nproc_per_node == 8
    assert plan.network_interface == "eth0"
    assert plan.rdzv_id == "job-1"
    assert plan.failure_file is None  # no SageMaker output folder beside this config: nothing to write to


def test_sagemaker_failure_file_only_where_the_sagemaker_layout_exists(tmp_path: Path) -> None:
    root = tmp_path / "opt" / "ml"
    env = {"SM_INPUT_CONFIG_DIR": str(write_resource_config(root / "input" / "config"))}
    assert sagemaker.plan(env, DetectOptions()).failure_file is None
    (root / "output").mkdir()
    assert sagemaker.plan(env, DetectOptions()).failure_file == str(root / "output" / "failure")


def test_sagemaker_variables_alone_are_enough(clean: dict[str, str]) -> None:
    env = {
        **clean,
        "SM_HOSTS": '["algo-1","algo-2","algo-3"]',
        "SM_CURRENT_HOST": "algo-3",
        "SM_NETWORK_INTERFACE_NAME": "eth1",
        "SM_OUTPUT_DIR": "/tmp/sm-output",
    }
    plan = sagemaker.plan(env, DetectOptions())
    assert (plan.nnodes, plan.node_rank, plan.master_addr) == (3, 2, "algo-1")
    assert plan.network_interface == "eth1"
    assert plan.nproc_per_node == NPROC_GPUS_OR_ONE
    assert plan.failure_file == "/tmp/sm-output/failure"


def hetero_config(tmp_path: Path, current: str, group: str) -> Path:
    return write_resource_config(
        tmp_path / "config",
        current_host=current,
        current_group_name=group,
        hosts=["algo-1", "algo-2", "algo-3"],
        instance_groups=[
            {
                "instance_group_name": "gpus",
                "instance_type": "ml.p4d.24xlarge",
                "hosts": ["algo-1", "algo-3"],
            },
            {"instance_group_name": "data", "instance_type": "ml.c5.18xlarge", "hosts": ["algo-2"]},
        ],
    )


def test_sagemaker_heterogeneous_host_outside_chosen_groups_sits_out(tmp_path: Path) -> None:
    env = {"SM_INPUT_CONFIG_DIR": str(hetero_config(tmp_path, "algo-2", "data"))}
    plan = sagemaker.plan(env, DetectOptions(instance_groups=["gpus"]))
    assert plan.participates is False
    assert "algo-2" in plan.skip_reason and "'data'" in plan.skip_reason


def test_sagemaker_heterogeneous_ranks_count_only_chosen_groups(tmp_path: Path) -> None:
    env = {
        "SM_INPUT_CONFIG_DIR": str(hetero_config(tmp_path, "algo-3", "gpus")),
        "CLOUDDDP_SAGEMAKER_INSTANCE_GROUPS": "gpus",
    }
    plan = sagemaker.plan(env, DetectOptions())
    assert plan.participates is True
    assert plan.hosts == ["algo-1", "algo-3"]
    assert (plan.nnodes, plan.node_rank) == (2, 1)


def test_sagemaker_unknown_instance_group_is_an_error(tmp_path: Path) -> None:
    env = {"SM_INPUT_CONFIG_DIR": str(hetero_config(tmp_path, "algo-1", "gpus"))}
    error_from(lambda: sagemaker.plan(env, DetectOptions(instance_groups=["tpus"])), "tpus", "gpus")


@pytest.mark.parametrize("raw", ["algo-1,algo-2", "[]", '{"algo-1": 1}', "[1, 2]"])
def test_sagemaker_malformed_sm_hosts_is_an_error(clean: dict[str, str], raw: str) -> None:
    env = {**clean, "SM_HOSTS": raw, "SM_CURRENT_HOST": "algo-1"}
    error_from(lambda: sagemaker.plan(env, DetectOptions()), "SM_HOSTS", repr(raw))


def test_sagemaker_current_host_missing_from_hosts_is_an_error(clean: dict[str, str]) -> None:
    env = {**clean, "SM_HOSTS": '["algo-1","algo-2"]', "SM_CURRENT_HOST": "algo-9"}
    error_from(lambda: sagemaker.plan(env, DetectOptions()), "'algo-9'", "['algo-1', 'algo-2']")


def test_sagemaker_broken_resource_config_is_an_error_naming_the_file(tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "resourceconfig.json").write_text("{not json")
    error_from(
        lambda: sagemaker.plan({"SM_INPUT_CONFIG_DIR": str(config_dir)}, DetectOptions()),
        "resourceconfig.json",
    )


# ---------------------------------------------------------------- OCI Data Science


class FakeTime:
    """An injectable clock and sleep: sleeping advances the clock, and may run a hook."""

    def __init__(self, on_sleep: Callable[[int], None] | None = None) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep:
            self.on_sleep(len(self.sleeps))


def write_metadata(path: Path, ips: dict[int, str]) -> None:
    path.write_text(json.dumps([{"Rank": rank, "IPAddress": ip} for rank, ip in ips.items()]))


def oci_native_env(path: Path, rank: int, size: int = 3) -> dict[str, str]:
    return {
        "NODE_RANK": str(rank),
        "INITIAL_CLUSTER_SIZE": str(size),
        "CLUSTER_NODES_METADATA_FILE": str(path),
        "NODE_GROUP_NAME": "workers",
        "NCCL_SOCKET_IFNAME": "ens300f0",
        "GLOO_SOCKET_IFNAME": "ens300f0",
        "JOB_OCID": "ocid1.datasciencejob.oc1..aaa",
        "JOB_RUN_OCID": "ocid1.datasciencejobrun.oc1..bbb",
    }


def test_oci_complete_metadata_gives_master_and_local_address(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    write_metadata(path, {1: "10.0.0.11", 0: "10.0.0.10", 2: "10.0.0.12"})
    plan = oci.plan(oci_native_env(path, rank=2), DetectOptions())
    assert (plan.nnodes, plan.node_rank) == (3, 2)
    assert plan.hosts == ["10.0.0.10", "10.0.0.11", "10.0.0.12"]
    assert (plan.master_addr, plan.master_port) == ("10.0.0.10", 29400)
    assert plan.local_addr == "10.0.0.12"
    assert plan.network_interface == "ens300f0"
    assert plan.rdzv_id == "ocid1.datasciencejobrun.oc1..bbb"


def test_oci_incomplete_metadata_times_out_naming_missing_ranks(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    write_metadata(path, {0: "10.0.0.10"})
    fake = FakeTime()
    options = DetectOptions(metadata_timeout=10, metadata_poll=2, clock=fake.clock, sleep=fake.sleep)
    error_from(
        lambda: oci.plan(oci_native_env(path, rank=0), options),
        "rank(s) 1, 2",
        "INITIAL_CLUSTER_SIZE=3",
        "CLUSTER_NODES_METADATA_FILE",
        str(path),
    )
    assert fake.sleeps and sum(fake.sleeps) >= 10


def test_oci_waits_until_metadata_fills_in(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text("")  # the service has not written it yet

    def fill(sleeps: int) -> None:
        if sleeps == 1:
            write_metadata(path, {0: "10.0.0.10"})
        elif sleeps == 3:
            write_metadata(path, {0: "10.0.0.10", 1: "10.0.0.11", 2: "10.0.0.12"})

    fake = FakeTime(on_sleep=fill)
    options = DetectOptions(metadata_timeout=60, metadata_poll=2, clock=fake.clock, sleep=fake.sleep)
    plan = oci.plan(oci_native_env(path, rank=1), options)
    assert plan.local_addr == "10.0.0.11"
    assert len(fake.sleeps) == 3


def test_oci_native_rank_beyond_cluster_size_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    error_from(
        lambda: oci.plan(oci_native_env(path, rank=3), DetectOptions()),
        "NODE_RANK=3",
        "INITIAL_CLUSTER_SIZE=3",
    )


def test_oci_legacy_main_node_is_rank_zero_on_port_29400() -> None:
    env = {"OCI__MODE": "MAIN", "OCI__WORKER_COUNT": "2", "OCI__CLUSTER_TYPE": "PYTORCH"}
    assert oci.detect(env)
    plan = oci.plan(env, DetectOptions())
    assert (plan.nnodes, plan.node_rank) == (3, 0)
    assert (plan.master_addr, plan.master_port) == ("127.0.0.1", 29400)


def test_oci_legacy_worker_reads_rank_and_main_address() -> None:
    env = {"OCI__MODE": "WORKER", "OCI__WORKER_COUNT": "2", "RANK": "2", "OCI__MAIN_ADDR": "10.0.0.10"}
    plan = oci.plan(env, DetectOptions())
    assert (plan.node_rank, plan.master_addr) == (2, "10.0.0.10")
    assert plan.sources["master_addr"] == "OCI__MAIN_ADDR"


def test_oci_legacy_worker_without_main_address_is_an_error() -> None:
    env = {"OCI__MODE": "WORKER", "OCI__WORKER_COUNT": "1", "RANK": "1"}
    error_from(lambda: oci.plan(env, DetectOptions()), "MASTER_ADDR", "OCI__MAIN_ADDR")


def test_oci_legacy_bad_mode_and_count_are_errors() -> None:
    error_from(lambda: oci.plan({"OCI__MODE": "BOSS"}, DetectOptions()), "OCI__MODE", "'BOSS'")
    error_from(
        lambda: oci.plan({"OCI__MODE": "MAIN", "OCI__WORKER_COUNT": "many"}, DetectOptions()),
        "OCI__WORKER_COUNT",
        "'many'",
    )


# ---------------------------------------------------------------- choosing the environment


def realistic_environments(tmp_path: Path) -> dict[str, dict[str, str]]:
    nodefile = write_nodefile(tmp_path, ["node1", "node2"])
    metadata = tmp_path / "oci.json"
    write_metadata(metadata, {0: "10.0.0.10", 1: "10.0.0.11", 2: "10.0.0.12"})
    return {
        "slurm": slurm_env(),
        "pbs": pbs_env(nodefile),
        "kubeflow": pytorchjob_v1_new(),
        "awsbatch": batch_env(1),
        "skypilot": sky_env(1),
        "oci": oci_native_env(metadata, rank=1),
        "sagemaker": {"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1"},
    }


@pytest.mark.parametrize("name", ["slurm", "pbs", "kubeflow", "awsbatch", "skypilot", "oci", "sagemaker"])
def test_each_platform_is_detected_from_its_own_variables(tmp_path: Path, clean: dict[str, str], name: str) -> None:
    env = {**clean, **realistic_environments(tmp_path)[name]}
    assert name == detect_provider(env).NAME


def test_nothing_detected_means_standalone(clean: dict[str, str]) -> None:
    env = {**clean, "HOME": "/root", "PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0,1"}
    module = detect_provider(env)
    assert module is standalone
    plan = resolve_plan(env)
    assert isinstance(plan, ClusterPlan)
    assert (plan.provider, plan.nnodes, plan.node_rank, plan.master_addr) == ("standalone", 1, 0, "127.0.0.1")


def test_contradictory_platform_variables_are_an_error(tmp_path: Path, clean: dict[str, str]) -> None:
    envs = realistic_environments(tmp_path)
    env = {**clean, **envs["slurm"], **envs["skypilot"]}
    error_from(lambda: detect_provider(env), "contradictory", "slurm", "skypilot", "--provider")


def test_provider_argument_overrides_contradictory_detection(tmp_path: Path, clean: dict[str, str]) -> None:
    envs = realistic_environments(tmp_path)
    env = {**clean, **envs["slurm"], **envs["skypilot"]}
    assert detect_provider(env, "slurm") is slurm
    plan = resolve_plan(env, "slurm", OPTIONS)
    assert (plan.provider, plan.master_addr) == ("slurm", "gpu-01")


def test_provider_variable_overrides_detection(tmp_path: Path, clean: dict[str, str]) -> None:
    env = {**clean, **realistic_environments(tmp_path)["slurm"], "CLOUDDDP_PROVIDER": "standalone"}
    assert detect_provider(env) is standalone


def test_provider_aliases_are_accepted(clean: dict[str, str]) -> None:
    assert detect_provider(clean, "K8S") is kubeflow
    assert detect_provider(clean, "local") is standalone


def test_unknown_provider_is_an_error_naming_it(clean: dict[str, str]) -> None:
    error_from(lambda: detect_provider(clean, "lsf"), "'lsf'", "slurm")


def test_a_bad_number_or_port_in_a_platform_variable_names_the_platform() -> None:
    from cloudddp.cluster.plan import EnvReader

    reader = EnvReader({"SM_NUM_GPUS": "x", "MASTER_PORT": "99999"}, "sagemaker")
    error_from(lambda: reader.int("SM_NUM_GPUS"), "sagemaker: the environment variable SM_NUM_GPUS='x'")
    error_from(lambda: reader.port("MASTER_PORT"), "sagemaker: the environment variable MASTER_PORT='99999'")
