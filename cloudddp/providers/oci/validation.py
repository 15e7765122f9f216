"""Checks OCI Data Science would make, made before anything is uploaded or created.

Each rule below is one the service enforces (or a precondition of the request cloudddp
builds); violating it costs a round trip, an uploaded source archive and a created job at
best, and a half-made cluster at worst. Every error names the spec field and the value.

- OCIDs: `ocid1.<resource type>.<realm>.[region][.future use].<unique id>`
  (https://docs.oracle.com/en-us/iaas/Content/General/Concepts/identifiers.htm), and of
  the right resource type for the field (a subnet OCID in `compartment_id` is an error).
- Job environment variables: at most 20,000 characters in total (names and values);
  command-line arguments: at most 4,000 characters.
- Node group: replicas >= 1; block storage >= 50 GB; a shape that multi-node jobs run on.
- No secrets in job environment variables (anyone who can read the job reads them).

Pure functions of their arguments: no SDK, no network, usable in a dry run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from cloudddp.errors import CloudDDPError
from cloudddp.redact import is_secret_name

MAX_ENV_CHARS = 20_000
MAX_ARGS_CHARS = 4_000
MIN_BLOCK_STORAGE_GB = 50
MAX_STORAGE_MOUNTS = 5  # ADS enforces the same (MAXIMUM_MOUNT_COUNT in ads/jobs/.../dsc_job.py)

OCID = re.compile(
    r"ocid1\.(?P<type>[a-z0-9]+)\.(?P<realm>[a-z0-9]+)\.(?P<region>[a-z0-9-]*)(?:\.[a-z0-9-]+)?\.(?P<unique>[a-z0-9]{1,255})"
)
# Which resource types each spec field accepts (the root compartment's OCID is the tenancy's).
OCID_TYPES: dict[str, tuple[str, ...]] = {
    "compartment_id": ("compartment", "tenancy"),
    "project_id": ("datascienceproject",),
    "subnet_id": ("subnet",),
    "log_group_id": ("loggroup",),
    "log_id": ("log",),
    "job_run_id": ("datasciencejobrun",),
}
# Shapes multi-node jobs run on: GPU shapes, bare metal, and the flexible CPU shapes.
# Fixed-size legacy VM shapes (VM.Standard2.1, VM.Standard.E2.1, ...) are not offered for
# multi-node jobs.
MULTI_NODE_SHAPE = re.compile(r"(BM\.[A-Za-z0-9.-]+|VM\.GPU[A-Za-z0-9.-]*|VM\.[A-Za-z0-9.-]+\.Flex)")
SHAPE_NAME = re.compile(r"(VM|BM)\.[A-Za-z0-9.-]+")
WORK_DIR = re.compile(r"oci://(?P<bucket>[A-Za-z0-9._-]+)@(?P<namespace>[A-Za-z0-9._-]+)(?:/(?P<prefix>.*))?")
OCIR_IMAGE = re.compile(
    r"(?P<host>[A-Za-z0-9.-]*ocir[A-Za-z0-9.-]*)/(?P<namespace>[A-Za-z0-9._-]+)/(?P<repo>[^\s:@]+)(?P<ref>[:@]\S+)?"
)


def check_ocid(field: str, value: str | None, *, required: bool = False, hint: str = "") -> str | None:
    """`value` as given if it is an OCID of a type `field` accepts; a clear error otherwise."""
    if value is None or value == "":
        if required:
            raise CloudDDPError(f"oci.{field} is required{hint}.")
        return None
    match = OCID.fullmatch(value)
    if not match:
        raise CloudDDPError(
            f"oci.{field}={value!r} is not an OCID: expected ocid1.<resource type>.<realm>.[region].<unique id>, "
            f"like ocid1.{OCID_TYPES.get(field, ('compartment',))[0]}.oc1..aaaaaaaa... (copy it from the OCI Console)."
        )
    allowed = OCID_TYPES.get(field)
    if allowed and match["type"] not in allowed:
        raise CloudDDPError(
            f"oci.{field}={value!r} is the OCID of a {match['type']}, but {field} needs a {' or '.join(allowed)} OCID."
        )
    return value


def parse_work_dir(value: str | None, field: str = "oci.work_dir") -> tuple[str, str, str]:
    """`oci://bucket@namespace/prefix` -> (bucket, namespace, prefix without slashes at the ends)."""
    if not value:
        raise CloudDDPError(
            f"{field} is required: the Object Storage folder the source, staged inputs and outputs go to, "
            f"as oci://bucket@namespace/prefix (--work-dir)."
        )
    match = WORK_DIR.fullmatch(value.strip())
    if not match:
        raise CloudDDPError(f"{field}={value!r} must look like oci://bucket@namespace/prefix.")
    return match["bucket"], match["namespace"], (match["prefix"] or "").strip("/")


def check_shape(shape: str, ocpus: float | None, memory_in_gbs: float | None) -> None:
    if not SHAPE_NAME.fullmatch(shape):
        raise CloudDDPError(
            f"oci.shape={shape!r} is not an OCI shape name (like VM.Standard.E4.Flex or BM.GPU.A100-v2.8)."
        )
    if not MULTI_NODE_SHAPE.fullmatch(shape):
        raise CloudDDPError(
            f"oci.shape={shape!r} cannot run multi-node jobs; use a GPU shape (VM.GPU.*, BM.GPU.*), a bare metal "
            f"shape (BM.*) or a flexible CPU shape (VM.Standard.E4.Flex, VM.Standard3.Flex, VM.Optimized3.Flex, ...)."
        )
    if not shape.endswith(".Flex") and (ocpus is not None or memory_in_gbs is not None):
        raise CloudDDPError(
            f"oci.ocpus/oci.memory_in_gbs apply to flexible shapes only (*.Flex); oci.shape={shape!r} has a fixed size."
        )


def check_image(image: str | None) -> str:
    if not image:
        raise CloudDDPError(
            "oci.image is required: Data Science jobs run a container image from OCI Container Registry. Build "
            "infra/docker/Dockerfile and push it to <region-key>.ocir.io/<tenancy-namespace>/<repo>:<tag> (--image)."
        )
    if not OCIR_IMAGE.fullmatch(image):
        raise CloudDDPError(
            f"oci.image={image!r}: Data Science jobs pull images from OCI Container Registry only; expected "
            f"<region-key>.ocir.io/<tenancy-namespace>/<repo>:<tag>."
        )
    return image


def check_replicas(replicas: int) -> None:
    if replicas < 1:
        raise CloudDDPError(f"nodes={replicas}: a node group needs at least 1 replica.")


def check_block_storage(size_gb: int) -> None:
    if size_gb < MIN_BLOCK_STORAGE_GB:
        raise CloudDDPError(
            f"oci.block_storage_gb={size_gb}: Data Science jobs need at least {MIN_BLOCK_STORAGE_GB} GB of block storage."
        )


def env_size(env: Mapping[str, str]) -> int:
    return sum(len(k) + len(v) for k, v in env.items())


def check_environment(env: Mapping[str, str], user_keys: Sequence[str]) -> None:
    """The 20,000-character limit, and no secret-looking user variables (cloudddp adds none)."""
    secrets = [k for k in user_keys if is_secret_name(k)]
    if secrets:
        raise CloudDDPError(
            f"environment {', '.join(sorted(secrets))}: looks like a secret, and job environment variables are "
            f"readable by anyone who can read the job. Keep secrets in OCI Vault and read them in the job with its "
            f"resource principal, or rename the variable if it holds no secret."
        )
    total = env_size(env)
    if total > MAX_ENV_CHARS:
        largest = sorted(env, key=lambda k: len(k) + len(env[k]), reverse=True)[:3]
        raise CloudDDPError(
            f"the job's environment variables hold {total:,} characters (names and values); OCI Data Science allows "
            f"{MAX_ENV_CHARS:,}. Largest: {', '.join(f'{k} ({len(k) + len(env[k]):,})' for k in largest)}. Move large "
            f"values into a file in the source folder."
        )


def check_arguments(arguments: Sequence[str]) -> None:
    total = len(" ".join(arguments))
    if total > MAX_ARGS_CHARS:
        raise CloudDDPError(
            f"the script's command-line arguments (args and hyperparameters) hold {total:,} characters; OCI Data "
            f"Science allows {MAX_ARGS_CHARS:,}. Move long values into a config file in the source folder."
        )


def check_mount_count(count: int) -> None:
    if count > MAX_STORAGE_MOUNTS:
        raise CloudDDPError(
            f"the job needs {count} Object Storage mounts (work dir, oci:// inputs, output, checkpoint); OCI Data "
            f"Science jobs take at most {MAX_STORAGE_MOUNTS}. Put the inputs under one bucket prefix."
        )
