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
lands in ./cloudddp-compose/<service>/model. A local `output` folder takes the main
service's model (the model the OCI job would copy to `output`); a local `checkpoint`
folder is mounted into every service, shared, as the job's `oci://` checkpoint mount is.
`oci://` (or other URI) inputs, output and checkpoint are refused: nothing is downloaded.
An elastic node range is refused as `render -p oci` refuses it: the services are a fixed set.

Docker Compose interpolates `$NAME` and `${NAME}` in every value of the file from the
host's environment, and reads `$$` as one literal `$` (Compose specification,
"Interpolation": https://docs.docker.com/reference/compose-file/interpolation/ ,
compose-spec/compose-spec 12-interpolation.md). `compose_dict` holds the values as the
containers get them; `compose_yaml` writes each `$` in them as `$$`, except the `${NAME}`
references it writes on purpose for secret-named variables. Pure: no SDK, no Docker.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from cloudddp.cluster.environment import channel_variable
from cloudddp.cluster.oci import MASTER_PORT
from cloudddp.errors import CloudDDPError
from cloudddp.providers.oci.validation import shown
from cloudddp.providers.registry import require_elastic_support
from cloudddp.redact import is_secret_name
from cloudddp.secrets_policy import ARGS, HYPERPARAMETERS, InClear, check_secrets

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

# The base image of infra/docker/Dockerfile: public, with Python and PyTorch.
DEFAULT_IMAGE = "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"
JOB_SIDE_MOUNT = "/opt/cloudddp"
ADS_KEY_MOUNT = "~/.oci:/home/oci_dist_training/.oci:ro"  # ADS's config.ini default `oci_key_mnt`
# [registry[:port]/]path[:tag][@digest], lower-case path components (Docker's reference grammar, simplified).
IMAGE_REFERENCE = re.compile(
    r"(?:[A-Za-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
# The variable names Compose can substitute (its `${NAME}` grammar, case-insensitive in compose-go).
COMPOSE_NAME = re.compile(r"[_A-Za-z][_A-Za-z0-9]*")
OUTPUT_MOUNT = "/output"  # the main service's model folder when the spec names a local output
CHECKPOINT_MOUNT = "/checkpoints"  # every service's checkpoint folder when the spec names a local one
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


class Reference(str):
    """A `${NAME}` that Compose must substitute from the host's environment: written as is, never escaped."""


def literal(text: str) -> str:
    """`text` as Compose reads it back unchanged: every `$` doubled (the spec's escape for a literal `$`)."""
    return text.replace("$", "$$")


def escaped(value: Any) -> Any:
    """The document as written: every string literal (keys are not interpolated), References kept."""
    if isinstance(value, Reference):
        return str(value)
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, dict):
        return {key: escaped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [escaped(item) for item in value]
    return value


def host_folder(where: str, field: str) -> str:
    """A local folder for a bind mount, as an absolute path; URIs and paths Compose would split are refused."""
    if "://" in where:
        raise CloudDDPError(
            f"{field}={where!r}: the docker-compose test (render -p oci --compose) mounts folders of this host; "
            f"it downloads and uploads nothing. Give a local folder, or leave {field} out."
        )
    path = str(Path(where).expanduser().resolve())
    if ":" in path:  # the short volume syntax is HOST:CONTAINER[:MODE]
        raise CloudDDPError(f"{field}={where!r}: a folder whose path has a ':' cannot be a docker-compose volume.")
    return path


def compose_advice(variable: str) -> str:
    """How a secret reaches the script instead: the file names a secret-named variable, the host gives its value."""
    return (
        f"Pass it in a variable (-e {variable}=...): a secret-named variable reaches the compose file as a "
        f"${{{variable}}} reference, which Compose fills in from the host's environment, and the script reads it "
        f"from its own (the OCI job refuses these arguments too)."
    )


# The script's arguments go into `command:`; secret-named variables become ${NAME} references (user_environment).
IN_CLEAR = InClear(
    fields=(HYPERPARAMETERS, ARGS), where="written into the compose file's `command:`", by_reference=compose_advice
)


def user_environment(spec: JobSpec) -> dict[str, str]:
    """The spec's variables; secret-looking values stay out of the file: Compose reads them from the host."""
    environment: dict[str, str] = {}
    for name, value in spec.environment.items():
        if not is_secret_name(name):
            environment[name] = value
        elif COMPOSE_NAME.fullmatch(name):
            environment[name] = Reference(f"${{{name}}}")
        else:
            raise CloudDDPError(
                f"environment.{name}: a secret-named variable reaches the compose file as a ${{{name}}} reference "
                f"to the host's environment, and Compose cannot substitute a name like that (letters, digits and "
                f"'_' only, not starting with a digit). Rename it."
            )
    return environment


def node_environment(spec: JobSpec, rank: int, arguments: list[str]) -> dict[str, str]:
    return {
        **user_environment(spec),
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


def data_mounts(spec: JobSpec, rank: int, environment: dict[str, str], volumes: list[str]) -> None:
    """Inputs read-only at /data/<channel>; a local output (main only) and checkpoint folder in place of the
    service's own."""
    for channel in sorted(spec.inputs):
        volumes.append(f"{host_folder(spec.inputs[channel], f'inputs.{channel}')}:/data/{channel}:ro")
        environment[channel_variable(channel)] = f"/data/{channel}"
    if spec.output and rank == 0:
        volumes.append(f"{host_folder(spec.output, 'output')}:{OUTPUT_MOUNT}")
        environment["CLOUDDDP_MODEL_DIR"] = OUTPUT_MOUNT
    if spec.checkpoint:
        volumes.append(f"{host_folder(spec.checkpoint, 'checkpoint')}:{CHECKPOINT_MOUNT}")
        environment["CLOUDDDP_CHECKPOINT_DIR"] = CHECKPOINT_MOUNT


def compose_dict(spec: JobSpec, output_root: str = "./cloudddp-compose") -> dict[str, Any]:
    """The services as the containers get them (after Compose's interpolation); compose_yaml writes the file."""
    require_elastic_support("oci", spec)  # the services are a fixed set, as the OCI job's nodes are
    for channel, where in spec.inputs.items():
        if "://" in where:
            raise CloudDDPError(
                f"inputs.{channel}={where!r}: the docker-compose test mounts local folders; download the data first."
            )
    check_secrets(spec, IN_CLEAR)  # `render --compose` is a door of its own (cli.print_compose)
    image = image_for(spec)
    source = host_folder(spec.source_dir, "source_dir")
    job_side = str(Path(__file__).resolve().parents[2])  # the cloudddp package
    arguments = spec.script_args()
    services: dict[str, Any] = {}
    for rank in range(spec.nodes):
        service = f"{spec.name}-main" if rank == 0 else f"{spec.name}-worker-{rank - 1}"
        environment = node_environment(spec, rank, arguments)
        volumes = [
            f"{source}:/code:ro",
            f"{job_side}:{JOB_SIDE_MOUNT}/cloudddp:ro",
            f"{output_root}/{service}:/outputs",
        ]
        if spec.oci.work_dir:
            environment["OCI__WORK_DIR"] = spec.oci.work_dir
            environment["OCI_IAM_TYPE"] = "api_key"
            volumes.append(ADS_KEY_MOUNT)
        data_mounts(spec, rank, environment, volumes)
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
    models = f"{output_root}/<service>/model"
    if spec.output:
        models = f"the main service's in {host_folder(spec.output, 'output')!r}, the others' in {models}"
    header = (
        f"# docker compose for a local test of {spec.name!r}: {spec.nodes} containers on this host, "
        f"written by `cloudddp render --provider oci --compose`.\n"
        f"# Image {image}: any image with Python and PyTorch; each service runs cloudddp's launcher, mounted from "
        f"this machine. {credentials[0].upper() + credentials[1:]}.\n"
        f"# Run: docker compose up   (models: {models})\n"
    )
    return header + yaml.safe_dump(escaped(document), sort_keys=False, default_flow_style=False)
