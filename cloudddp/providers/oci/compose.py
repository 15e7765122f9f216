"""A docker-compose file for the Oracle ADS guide's local test, from a cloudddp job spec.

`cloudddp render --provider oci --compose [-f train.yaml]` prints it; `docker compose up`
then runs one container per node on this host, as the ADS guide's hand-written file did:
host networking, `<name>-main` (RANK 0) and `<name>-worker-<i>`, and the legacy ADS
variables the cloudddp launcher understands (`cloudddp.cluster.oci.legacy_plan`):
OCI__MODE=MAIN|WORKER, RANK, OCI__WORKER_COUNT, OCI__MAIN_ADDR, MASTER_PORT (29400),
OCI__ENTRY_SCRIPT / OCI__ENTRY_SCRIPT_ARGS.

Any image with Python and PyTorch works, whatever its own entrypoint does: an image built
the ADS way runs its ADS driver and ignores `command`, so every service sets `entrypoint`
to cloudddp's launcher, and this machine's copy of the job side (standard library only) is
mounted read-only at /opt/cloudddp. Without `oci.image`, the public PyTorch image
`DEFAULT_IMAGE` is used. A placeholder like the guide's `<region.ocir.io/...>` is refused.

As in ADS's own local run (`ads/opctl/distributed/cmds.py`, `update_ini`, at
oracle/accelerated-data-science 0e785b9fd36fb354019e0924b94ac2b0ec6f235a), a spec with a
work dir (OCI__WORK_DIR) gets `~/.oci` mounted at /home/oci_dist_training/.oci and
OCI_IAM_TYPE=api_key, so scripts that use it reach Object Storage; without one, no
credentials enter the containers. The source folder is mounted at /code (no image rebuild
per code change), local inputs read-only at /data/<channel>, each node's model folder
lands in ./cloudddp-compose/<service>/model. Pure: no SDK, no Docker.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

import cloudddp
from cloudddp.cluster.environment import channel_variable
from cloudddp.cluster.oci import MASTER_PORT
from cloudddp.errors import CloudDDPError
from cloudddp.providers.oci.validation import shown
from cloudddp.redact import is_secret_name
from cloudddp.spec import JobSpec

# The base image of infra/docker/Dockerfile: public, with Python and PyTorch.
DEFAULT_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
JOB_SIDE_MOUNT = "/opt/cloudddp"
ADS_KEY_MOUNT = "~/.oci:/home/oci_dist_training/.oci:ro"  # ADS's config.ini default `oci_key_mnt`
# [registry[:port]/]path[:tag][@digest], lower-case path components (Docker's reference grammar, simplified).
IMAGE_REFERENCE = re.compile(
    r"(?:[A-Za-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
# Runs the mounted launcher with whichever python the image has; the service's command is its arguments.
ENTRYPOINT = ["/bin/sh", "-c", 'exec "$(command -v python3 || command -v python)" -m cloudddp.launcher "$@"',
              "cloudddp-launch"]  # fmt: skip


def image_for(spec: JobSpec) -> str:
    image = spec.oci.image or DEFAULT_IMAGE
    if not IMAGE_REFERENCE.fullmatch(image):
        raise CloudDDPError(
            f"{shown('image', image)} is not an image name docker can pull (a placeholder?). Set oci.image (--image) "
            f"to your image, e.g. <region-key>.ocir.io/<namespace>/<repo>:<tag>, or leave it unset for "
            f"{DEFAULT_IMAGE}: any image with Python and PyTorch works, cloudddp's launcher is mounted into it."
        )
    return image


def compose_dict(spec: JobSpec, output_root: str = "./cloudddp-compose") -> dict[str, Any]:
    for channel, where in spec.inputs.items():
        if "://" in where:
            raise CloudDDPError(
                f"inputs.{channel}={where!r}: the docker-compose test mounts local folders; download the data first."
            )
    image = image_for(spec)
    source = str(Path(spec.source_dir).resolve())
    job_side = str(Path(cloudddp.__file__).resolve().parent)
    arguments = spec.script_args()
    services: dict[str, Any] = {}
    for rank in range(spec.nodes):
        service = f"{spec.name}-main" if rank == 0 else f"{spec.name}-worker-{rank - 1}"
        environment: dict[str, str] = {
            # Secret-looking values stay out of the file: compose reads them from the host's environment.
            **{k: (f"${{{k}}}" if is_secret_name(k) else v) for k, v in spec.environment.items()},
            "PYTHONPATH": JOB_SIDE_MOUNT,
            "OCI__CLUSTER_TYPE": "PYTORCH",
            "OCI__MODE": "MAIN" if rank == 0 else "WORKER",
            "RANK": str(rank),
            "OCI__WORKER_COUNT": str(spec.nodes - 1),
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
        volumes = [
            f"{source}:/code:ro",
            f"{job_side}:{JOB_SIDE_MOUNT}/cloudddp:ro",
            f"{output_root}/{service}:/outputs",
        ]
        if spec.oci.work_dir:
            environment["OCI__WORK_DIR"] = spec.oci.work_dir
            environment["OCI_IAM_TYPE"] = "api_key"
            volumes.append(ADS_KEY_MOUNT)
        for channel in sorted(spec.inputs):
            volumes.append(f"{Path(spec.inputs[channel]).resolve()}:/data/{channel}:ro")
            environment[channel_variable(channel)] = f"/data/{channel}"
        command = ["-m", spec.entry_point] if spec.module else [spec.entry_point]
        if spec.nproc_per_node is not None:
            command = [f"--nproc-per-node={spec.nproc_per_node}", *command]
        services[service] = {
            "image": image,
            "network_mode": "host",
            "working_dir": "/code",
            "entrypoint": list(ENTRYPOINT),
            "command": [*command, *arguments],
            "environment": environment,
            "volumes": volumes,
        }
    return {"services": services}


def compose_yaml(spec: JobSpec, output_root: str = "./cloudddp-compose") -> str:
    document = compose_dict(spec, output_root)
    image = next(iter(document["services"].values()))["image"]
    credentials = (
        "~/.oci is mounted for OCI__WORK_DIR (as ADS's local run does)"
        if spec.oci.work_dir
        else "no OCI credentials enter the containers"
    )
    header = (
        f"# docker compose for a local test of {spec.name!r}: {spec.nodes} containers on this host, "
        f"written by `cloudddp render --provider oci --compose`.\n"
        f"# Image {image}: any image with Python and PyTorch; each service runs cloudddp's launcher, mounted from "
        f"this machine. {credentials[0].upper() + credentials[1:]}.\n"
        f"# Run: docker compose up   (models: {output_root}/<service>/model)\n"
    )
    return header + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
