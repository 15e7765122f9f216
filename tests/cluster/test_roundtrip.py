"""Every emulated platform, both directions: what `emulate` writes, `plan` reads back consistently.

For clusters of 1, 2 and 5 nodes, every node's plan (through the launcher's own option handling,
host map included) must agree on master address, port, rendezvous id and node count, and the
node ranks must be exactly 0..N-1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudddp.cluster import BY_NAME, EMULATIONS, oci
from cloudddp.cluster.environment import EmulatedCluster, EmulatedEnvironment, Environment
from cloudddp.cluster.plan import ClusterPlan
from cloudddp.launcher.cli import build_parser, plan_for


def plan_node(env: dict[str, str], launcher_args: list[str]) -> ClusterPlan:
    args = build_parser().parse_args([*launcher_args, "--metadata-timeout", "1", "train.py"])
    return plan_for(args, env)


@pytest.mark.parametrize("platform", sorted(EMULATIONS))
@pytest.mark.parametrize("size", [1, 2, 5])
def test_every_node_of_an_emulated_cluster_agrees_on_the_rendezvous(platform: str, size: int, tmp_path: Path) -> None:
    cluster = EmulatedCluster(
        nodes=size, job_name="rt-job", run_dir=tmp_path, channels=("train",), hyperparameters={"epochs": 2, "lr": 0.1}
    )
    nodes = EMULATIONS[platform].emulate(cluster)
    assert [node.rank for node in nodes] == list(range(size))
    for node in nodes:
        node.write_files()
        if "CLUSTER_NODES_METADATA_FILE" in node.env:  # the local runner adds each node as it starts
            oci.append_metadata(Path(node.env["CLUSTER_NODES_METADATA_FILE"]), node.rank)
    plans = [plan_node(node.env, node.launcher_args) for node in nodes]
    expected_provider = "standalone" if platform == "none" else platform
    assert {p.provider for p in plans} == {expected_provider}
    assert sorted(p.node_rank for p in plans) == list(range(size))
    assert [p.node_rank for p in plans] == [node.rank for node in nodes]
    agreed = {(p.master_addr, p.master_port, p.rdzv_id, p.nnodes, p.endpoint) for p in plans}
    assert len(agreed) == 1, agreed
    assert plans[0].nnodes == size
    assert plans[0].master_addr == "127.0.0.1"  # every emulated host name reaches loopback


def test_every_platform_module_keeps_the_documented_protocol() -> None:
    assert all(isinstance(module, Environment) for module in BY_NAME.values())
    assert all(isinstance(module, EmulatedEnvironment) for module in EMULATIONS.values())
    assert not isinstance(BY_NAME["awsbatch"], EmulatedEnvironment)  # the check can fail: no emulate() there


@pytest.mark.parametrize("platform", sorted(set(EMULATIONS) - {"sagemaker"}))
def test_a_channel_with_dashes_and_dots_reaches_the_script_as_the_real_providers_name_it(
    platform: str, tmp_path: Path
) -> None:
    # Slurm's batch script and the Kubernetes manifest name `my-data` CLOUDDDP_CHANNEL_MY_DATA (a shell can read
    # it); the emulation gave CLOUDDDP_CHANNEL_MY-DATA, so a script tried locally found no data on the cluster.
    cluster = EmulatedCluster(nodes=1, job_name="rt-job", run_dir=tmp_path, channels=("my-data", "v1.2"))
    (node,) = EMULATIONS[platform].emulate(cluster)
    channels = {name: value for name, value in node.env.items() if name.startswith("CLOUDDDP_CHANNEL_")}
    assert channels == {
        "CLOUDDDP_CHANNEL_MY_DATA": str(node.channels["my-data"]),
        "CLOUDDDP_CHANNEL_V1_2": str(node.channels["v1.2"]),
    }
