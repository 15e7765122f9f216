"""Per-node directories and variables for each emulated platform.

Each simulated node gets the environment contract of the platform it emulates, so the
job-side launcher and the training script run exactly as they would there:

- sagemaker: `<run>/nodes/algo-N/` laid out like /opt/ml (input/config/*.json,
  input/data/<channel>, model, output, checkpoints) and the SM_* variables.
- oci: NODE_RANK, INITIAL_CLUSTER_SIZE and a cluster metadata file the runner fills in
  as nodes start.
- kubeflow: the PyTorchJob operator's MASTER_ADDR/RANK/WORLD_SIZE and PET_* variables.
- slurm: SLURM_JOB_NODELIST and friends for a job on node[1-N].
- none: plain launcher flags.

Host names the platform would give (algo-1, node1, <job>-master-0) resolve to loopback
through the launcher's host map. Outside SageMaker, data, model and checkpoint folders
reach the script as CLOUDDDP_CHANNEL_<NAME>, CLOUDDDP_MODEL_DIR, CLOUDDDP_CHECKPOINT_DIR.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudddp.spec import JobSpec

LOOPBACK = "127.0.0.1"


@dataclass
class NodeLayout:
    """One simulated node: its name, folders to create, files to write, variables, launcher flags."""

    name: str
    rank: int
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    launcher_args: list[str] = field(default_factory=list)
    files: dict[str, Any] = field(default_factory=dict)  # path -> JSON content
    dirs: list[Path] = field(default_factory=list)
    channels: dict[str, Path] = field(default_factory=dict)  # channel -> folder the data must appear in
    model_dir: Path | None = None
    checkpoint_dir: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rank": self.rank,
            "root": str(self.root),
            "env": self.env,
            "launcher_args": self.launcher_args,
            "files": {str(k): v for k, v in self.files.items()},
            "dirs": [str(d) for d in self.dirs],
            "channels": {k: str(v) for k, v in self.channels.items()},
            "model_dir": str(self.model_dir) if self.model_dir else None,
            "checkpoint_dir": str(self.checkpoint_dir) if self.checkpoint_dir else None,
        }


def host_map_arg(names: list[str]) -> str:
    return ",".join(f"{name}={LOOPBACK}" for name in names)


def sagemaker_nodes(spec: JobSpec, run_dir: Path, job_name: str) -> list[NodeLayout]:
    hosts = [f"algo-{i + 1}" for i in range(spec.nodes)]
    channels = sorted(spec.inputs)
    hyperparameters = {k: json.dumps(v) for k, v in spec.hyperparameters.items()}
    nodes = []
    for rank, host in enumerate(hosts):
        root = run_dir / "nodes" / host
        config = root / "input" / "config"
        node = NodeLayout(name=host, rank=rank, root=root)
        node.model_dir, node.checkpoint_dir = root / "model", root / "checkpoints"
        node.channels = {c: root / "input" / "data" / c for c in channels}
        node.dirs = [config, node.model_dir, root / "output" / "data", node.checkpoint_dir]
        node.files = {
            config / "resourceconfig.json": {
                "current_host": host,
                "current_instance_type": "local",
                "current_group_name": "homogeneousCluster",
                "hosts": hosts,
                "instance_groups": [
                    {"instance_group_name": "homogeneousCluster", "instance_type": "local", "hosts": hosts}
                ],
                "network_interface_name": "lo",
            },
            config / "hyperparameters.json": hyperparameters,
            config / "inputdataconfig.json": {
                c: {"TrainingInputMode": "File", "S3DistributionType": "FullyReplicated", "RecordWrapperType": "None"}
                for c in channels
            },
            config / "checkpointconfig.json": {"LocalPath": str(node.checkpoint_dir)},
        }
        node.env = {
            "TRAINING_JOB_NAME": job_name,
            "SM_HOSTS": json.dumps(hosts),
            "SM_CURRENT_HOST": host,
            "SM_CURRENT_INSTANCE_TYPE": "local",
            "SM_NUM_GPUS": "0",
            "SM_NUM_CPUS": str(os.cpu_count() or 1),
            "SM_NETWORK_INTERFACE_NAME": "lo",
            "SM_INPUT_DIR": str(root / "input"),
            "SM_INPUT_CONFIG_DIR": str(config),
            "SM_MODEL_DIR": str(node.model_dir),
            "SM_OUTPUT_DIR": str(root / "output"),
            "SM_OUTPUT_DATA_DIR": str(root / "output" / "data"),
            "SM_CHANNELS": json.dumps(channels),
            "SM_HPS": json.dumps(spec.hyperparameters),
            **{f"SM_CHANNEL_{c.upper()}": str(p) for c, p in node.channels.items()},
            **{f"SM_HP_{k.upper()}": str(v) for k, v in spec.hyperparameters.items()},
        }
        node.launcher_args = ["--host-map", host_map_arg(hosts), "--hyperparameters-as-args"]
        nodes.append(node)
    return nodes


def generic_node(spec: JobSpec, run_dir: Path, name: str, rank: int) -> NodeLayout:
    """Folders and CLOUDDDP_* variables shared by the non-SageMaker emulations."""
    root = run_dir / "nodes" / name
    node = NodeLayout(name=name, rank=rank, root=root)
    node.model_dir, node.checkpoint_dir = root / "model", root / "checkpoints"
    node.channels = {c: root / "data" / c for c in sorted(spec.inputs)}
    node.dirs = [node.model_dir, node.checkpoint_dir]
    node.env = {
        "CLOUDDDP_MODEL_DIR": str(node.model_dir),
        "CLOUDDDP_CHECKPOINT_DIR": str(node.checkpoint_dir),
        **{f"CLOUDDDP_CHANNEL_{c.upper()}": str(p) for c, p in node.channels.items()},
    }
    return node


def oci_nodes(spec: JobSpec, run_dir: Path, job_name: str) -> list[NodeLayout]:
    metadata = run_dir / "oci" / "cluster_nodes_metadata.json"
    nodes = []
    for rank in range(spec.nodes):
        node = generic_node(spec, run_dir, f"node-{rank}", rank)
        node.env.update(
            NODE_RANK=str(rank),
            INITIAL_CLUSTER_SIZE=str(spec.nodes),
            CLUSTER_NODES_METADATA_FILE=str(metadata),
            NODE_GROUP_NAME="cloudddp-group",
            JOB_OCID=f"ocid1.datasciencejob.local..{job_name}",
            JOB_RUN_OCID=f"ocid1.datasciencejobrun.local..{job_name}",
            NCCL_SOCKET_IFNAME="lo",
            GLOO_SOCKET_IFNAME="lo",
        )
        nodes.append(node)
    return nodes


def kubeflow_nodes(spec: JobSpec, run_dir: Path, job_name: str) -> list[NodeLayout]:
    master = f"{job_name}-master-0"
    nodes = []
    for rank in range(spec.nodes):
        name = master if rank == 0 else f"{job_name}-worker-{rank - 1}"
        node = generic_node(spec, run_dir, name, rank)
        node.env.update(
            MASTER_ADDR=master, WORLD_SIZE=str(spec.nodes), RANK=str(rank),
            PET_NNODES=str(spec.nodes), PET_NODE_RANK=str(rank), PET_MASTER_ADDR=master,
        )  # fmt: skip
        node.launcher_args = ["--host-map", host_map_arg([master])]
        nodes.append(node)
    return nodes


def slurm_nodes(spec: JobSpec, run_dir: Path, job_name: str) -> list[NodeLayout]:
    hosts = [f"node{i + 1}" for i in range(spec.nodes)]
    nodelist = f"node[1-{spec.nodes}]" if spec.nodes > 1 else "node1"
    job_id = str(zlib.crc32(job_name.encode()) % 900000 + 100000)
    nodes = []
    for rank, host in enumerate(hosts):
        node = generic_node(spec, run_dir, host, rank)
        node.env.update(
            SLURM_JOB_ID=job_id, SLURM_JOB_NAME=job_name, SLURM_JOB_NODELIST=nodelist, SLURM_NODELIST=nodelist,
            SLURM_NNODES=str(spec.nodes), SLURM_NODEID=str(rank), SLURM_PROCID=str(rank), SLURM_LOCALID="0",
            SLURM_NTASKS=str(spec.nodes), SLURMD_NODENAME=host,
        )  # fmt: skip
        node.launcher_args = ["--host-map", host_map_arg(hosts)]
        nodes.append(node)
    return nodes


def plain_nodes(spec: JobSpec, run_dir: Path, job_name: str) -> list[NodeLayout]:
    nodes = []
    for rank in range(spec.nodes):
        node = generic_node(spec, run_dir, f"node-{rank}", rank)
        node.launcher_args = [
            "--provider", "standalone", f"--nnodes={spec.nodes}", f"--node-rank={rank}", f"--master-addr={LOOPBACK}",
        ]  # fmt: skip
        nodes.append(node)
    return nodes


EMULATIONS = {
    "sagemaker": sagemaker_nodes,
    "oci": oci_nodes,
    "kubeflow": kubeflow_nodes,
    "slurm": slurm_nodes,
    "none": plain_nodes,
}


def node_layouts(spec: JobSpec, run_dir: Path, job_name: str) -> list[NodeLayout]:
    return EMULATIONS[spec.local.emulate](spec, run_dir, job_name)
