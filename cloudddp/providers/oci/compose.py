"""A docker-compose file for the Oracle ADS guide's local test, from a cloudddp job spec.

`cloudddp render --provider oci --compose [-f train.yaml]` prints it; `docker compose up`
then runs one container per node on this host, as the ADS guide's hand-written file did:
host networking, `<name>-main` (RANK 0) and `<name>-worker-<i>`, and the legacy ADS
variables the cloudddp launcher understands (`cloudddp.cluster.oci.legacy_plan`):
OCI__MODE=MAIN|WORKER, RANK, OCI__WORKER_COUNT, OCI__MAIN_ADDR, MASTER_PORT (29400).
OCI__ENTRY_SCRIPT / OCI__ENTRY_SCRIPT_ARGS are set too, so an ADS-built image still
finds the script; the cloudddp image (infra/docker) runs the command instead.

Differences from the guide, on purpose: the source folder is mounted at /code (no image
rebuild per code change), local inputs are mounted read-only at /data/<channel>, each
node's model folder lands in ./cloudddp-compose/<service>/model, no `ports:` (ignored
with host networking) and no ~/.oci mount (the job side needs no OCI credentials).
Pure: no SDK, no Docker.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml

from cloudddp.cluster.oci import MASTER_PORT
from cloudddp.errors import CloudDDPError
from cloudddp.redact import is_secret_name
from cloudddp.spec import JobSpec

LOCAL_IMAGE = "cloudddp-train:latest"


def compose_dict(spec: JobSpec, output_root: str = "./cloudddp-compose") -> dict[str, Any]:
    for channel, where in spec.inputs.items():
        if "://" in where:
            raise CloudDDPError(
                f"inputs.{channel}={where!r}: the docker-compose test mounts local folders; download the data first."
            )
    source = str(Path(spec.source_dir).resolve())
    arguments = spec.script_args()
    workers = spec.nodes - 1
    services: dict[str, Any] = {}
    for rank in range(spec.nodes):
        service = f"{spec.name}-main" if rank == 0 else f"{spec.name}-worker-{rank - 1}"
        environment: dict[str, str] = {
            # Secret-looking values stay out of the file: compose reads them from the host's environment.
            **{k: (f"${{{k}}}" if is_secret_name(k) else v) for k, v in spec.environment.items()},
            "OCI__CLUSTER_TYPE": "PYTORCH",
            "OCI__MODE": "MAIN" if rank == 0 else "WORKER",
            "RANK": str(rank),
            "OCI__WORKER_COUNT": str(workers),
            "OCI__MAIN_ADDR": "127.0.0.1",
            "MASTER_PORT": str(MASTER_PORT),
            "OCI__ENTRY_SCRIPT": spec.entry_point,
            "OCI__ENTRY_SCRIPT_ARGS": shlex.join(arguments),
            "OCI__EPHEMERAL": "1",
            "SHAPE": spec.oci.shape,
            "NCCL_SOCKET_IFNAME": "lo",
            "GLOO_SOCKET_IFNAME": "lo",
            "CLOUDDDP_MODEL_DIR": "/outputs/model",
            "CLOUDDDP_CHECKPOINT_DIR": "/outputs/checkpoints",
        }
        if spec.oci.work_dir:
            environment["OCI__WORK_DIR"] = spec.oci.work_dir
        volumes = [f"{source}:/code:ro", f"{output_root}/{service}:/outputs"]
        for channel in sorted(spec.inputs):
            volumes.append(f"{Path(spec.inputs[channel]).resolve()}:/data/{channel}:ro")
            environment[f"CLOUDDDP_CHANNEL_{channel.upper()}"] = f"/data/{channel}"
        command = ["-m", spec.entry_point] if spec.module else [spec.entry_point]
        if spec.nproc_per_node is not None:
            command = [f"--nproc-per-node={spec.nproc_per_node}", *command]
        services[service] = {
            "image": spec.oci.image or LOCAL_IMAGE,
            "network_mode": "host",
            "working_dir": "/code",
            "command": [*command, *arguments],
            "environment": environment,
            "volumes": volumes,
        }
    return {"services": services}


def compose_yaml(spec: JobSpec, output_root: str = "./cloudddp-compose") -> str:
    image = spec.oci.image or LOCAL_IMAGE
    header = (
        f"# docker compose for a local test of {spec.name!r}: {spec.nodes} containers on this host, "
        f"written by `cloudddp render --provider oci --compose`.\n"
        f"# Image: docker build -t {image} -f infra/docker/Dockerfile .   Then: docker compose up\n"
    )
    return header + yaml.safe_dump(compose_dict(spec, output_root), sort_keys=False, default_flow_style=False)
