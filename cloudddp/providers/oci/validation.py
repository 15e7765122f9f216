"""Checks OCI Data Science would make, made before anything is uploaded or created.

Each rule below is one the service enforces (or a precondition of the request cloudddp
builds); violating it costs a round trip, an uploaded source archive and a created job at
best, and a half-made cluster at worst. Every error names the spec field and the value.

- OCIDs: `ocid1.<resource type>.<realm>.[region][.future use].<unique id>`
  (https://docs.oracle.com/en-us/iaas/Content/General/Concepts/identifiers.htm), and of
  the right resource type for the field (a subnet OCID in `compartment_id` is an error).
- Job environment variables: at most 20,000 characters in total (names and values).
  (The 4,000-character limit of `commandLineArguments` does not apply: cloudddp passes the
  script's arguments as the container's CMD, under the tighter 2,048-byte rule below.)
- Node group: block storage >= 50 GB; a shape that multi-node jobs run on (the node count is the
  job spec's `nodes`, checked there, once for every provider).
  Flexible shapes: the OCPU and memory ranges of `FLEX_SHAPES`; GPU shapes: a name in
  `GPU_SHAPES` (case aside), so a typo is caught here rather than by the service.
- The container's CMD + ENTRYPOINT under 2,048 bytes (see node.py for the source).
- The region: one the `oci` SDK knows (`oci.regions`, offline), or one described by
  OCI_REGION_METADATA as the SDK reads it for regions newer than itself.
- Object Storage URIs: `oci://bucket@namespace/prefix` whose prefix has no empty (`//`),
  `.` or `..` segment and no `?` or `#` (the mount and the staging would disagree).
- Environment variable names (channel variables `CLOUDDDP_CHANNEL_<NAME>` included):
  letters, digits and `_`, not starting with a digit, as a shell can read them.
- No secrets in job environment variables (anyone who can read the job reads them), nor in the
  script's arguments (the container's CMD, just as readable): no secret-named hyperparameter, no
  password in a URL.
- A log needs its log group (`JobLogConfigurationDetails` takes both; ADS looks the group up with
  extra calls, cloudddp asks for it).
- The run's output URI fits a freeform tag value (256 characters): cloudddp finds the model through it.

Pure functions of their arguments: no network, no client, usable in a dry run (only
`oci.regions`' offline tables are read).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence

from cloudddp.cluster.plan import parse_port
from cloudddp.errors import CloudDDPError
from cloudddp.providers.oci.node import MAX_COMMAND_BYTES, command_bytes
from cloudddp.staging.location import oci_prefix_problems

MAX_ENV_CHARS = 20_000
MIN_BLOCK_STORAGE_GB = 50
MAX_STORAGE_MOUNTS = 5  # ADS enforces the same (MAXIMUM_MOUNT_COUNT in ads/jobs/.../dsc_job.py)
# A freeform tag value holds at most 256 characters: OCI's "Limits on Tags"
# (https://docs.oracle.com/en-us/iaas/Content/Tagging/Concepts/taggingoverview.htm#limits, which OCI's
# "Understanding Free-form Tags" page names as the limit for free-form tags).
MAX_TAG_VALUE_CHARS = 256
DEFAULT_FLEX_OCPUS = 2.0
DEFAULT_FLEX_MEMORY_GB = 32.0

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
GPU_SHAPE = re.compile(r"(VM|BM)\.GPU.*", re.IGNORECASE)
# Flexible shapes Data Science runs: name -> (max OCPUs, max memory in GB), from OCI's
# "Supported Compute Shapes" page for Data Science
# (https://docs.oracle.com/en-us/iaas/data-science/using/supported-shapes.htm). The same
# page and Compute's shape reference
# (https://docs.oracle.com/en-us/iaas/Content/Compute/References/computeshapes.htm) give the
# other bounds: at least 1 OCPU; memory at least 1 GB per OCPU and at most 64 GB per OCPU.
FLEX_SHAPES: dict[str, tuple[float, float]] = {
    "VM.Standard.E3.Flex": (114, 1776),
    "VM.Standard.E4.Flex": (114, 1760),
    "VM.Standard.E5.Flex": (94, 1049),
    "VM.Standard.A1.Flex": (80, 512),
    "VM.Standard.A2.Flex": (78, 946),
    "VM.Standard3.Flex": (32, 512),
    "VM.Optimized3.Flex": (18, 256),
}
MIN_GB_PER_OCPU, MAX_GB_PER_OCPU = 1.0, 64.0
# GPU shapes, from Oracle ADS's shape index: oracle/accelerated-data-science,
# ads/aqua/resources/gpu_shapes_index.json at 0e785b9fd36fb354019e0924b94ac2b0ec6f235a
# (compared case-insensitively: the index spells "BM.GPU.A100-V2.8", the Console "-v2").
GPU_SHAPES = (
    "BM.GPU.A10.4", "BM.GPU.A100-V2.8", "BM.GPU.B200.8", "BM.GPU.B4.8", "BM.GPU.GB200.4", "BM.GPU.H100.8",
    "BM.GPU.H200.8", "BM.GPU.L40S-NC.4", "BM.GPU.L40S.4", "BM.GPU.MI300X.8", "BM.GPU2.2", "BM.GPU4.8",
    "VM.GPU.A10.1", "VM.GPU.A10.2", "VM.GPU2.1", "VM.GPU3.1", "VM.GPU3.2", "VM.GPU3.4", "VM.GPU3.8",
)  # fmt: skip
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SHAPE_NAME = re.compile(r"(VM|BM)\.[A-Za-z0-9.-]+")
WORK_DIR = re.compile(r"oci://(?P<bucket>[A-Za-z0-9._-]+)@(?P<namespace>[A-Za-z0-9._-]+)(?:/(?P<prefix>.*))?")
OCIR_IMAGE = re.compile(
    r"(?P<host>[A-Za-z0-9.-]*ocir[A-Za-z0-9.-]*)/(?P<namespace>[A-Za-z0-9._-]+)/(?P<repo>[^\s:@]+)(?P<ref>[:@]\S+)?"
)
# The job's image, as the oci SDK documents it (2.189.0, OcirContainerJobEnvironmentConfigurationDetails.image):
# `<region>.ocir.io/<registry>/<image>:<tag>` or `...:<tag>@digest` -- a tag in both. Path components, tag and
# digest as the reference grammar writes them (distribution/reference regexp.go at 727f80d4: pathComponent,
# tag, digestPat).
PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
OCIR_REFERENCE = re.compile(
    rf"{PATH_COMPONENT}(?:/{PATH_COMPONENT})*:[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,})?"
)


def shown(field: str, value: object) -> str:
    """A setting as errors name it: `oci.<field>=value`, or the ADS file's own field if it came from one."""
    from cloudddp.providers.oci.ads import source_of

    source = source_of(field, value)
    text = f"{value:g}" if isinstance(value, float) else repr(value)
    if source:
        return f"{source[0]}={text} ({source[1]}, cloudddp's oci.{field})"
    return f"oci.{field}={text}"


def check_ocid(field: str, value: str | None, *, required: bool = False, hint: str = "") -> str | None:
    """`value` as given if it is an OCID of a type `field` accepts; a clear error otherwise."""
    if value is None or value == "":
        if required:
            raise CloudDDPError(f"oci.{field} is required{hint}.")
        return None
    match = OCID.fullmatch(value)
    if not match:
        raise CloudDDPError(
            f"{shown(field, value)} is not an OCID: expected ocid1.<resource type>.<realm>.[region].<unique id>, "
            f"like ocid1.{OCID_TYPES.get(field, ('compartment',))[0]}.oc1..aaaaaaaa... (copy it from the OCI Console)."
        )
    allowed = OCID_TYPES.get(field)
    if allowed and match["type"] not in allowed:
        raise CloudDDPError(
            f"{shown(field, value)} is the OCID of a {match['type']}, but {field} needs a {' or '.join(allowed)} OCID."
        )
    return value


def parse_work_dir(value: str | None, field: str = "oci.work_dir") -> tuple[str, str, str]:
    """`oci://bucket@namespace/prefix` -> (bucket, namespace, prefix without slashes at the ends)."""
    if not value:
        raise CloudDDPError(
            f"{field} is required: the Object Storage folder the source, staged inputs and outputs go to, "
            f"as oci://bucket@namespace/prefix (--work-dir)."
        )
    setting = shown("work_dir", value) if field == "oci.work_dir" else f"{field}={value!r}"
    match = WORK_DIR.fullmatch(value)
    if not match:
        raise CloudDDPError(f"{setting} must look like oci://bucket@namespace/prefix.")
    prefix = match["prefix"] or ""
    if problems := oci_prefix_problems(prefix):
        raise CloudDDPError(
            f"{setting}: the prefix has {' and '.join(problems)}; Object Storage would store the names "
            f"literally while the job's mount and cloudddp's staging would not agree on them. Use a prefix like "
            f"oci://{match['bucket']}@{match['namespace']}/team/project."
        )
    return match["bucket"], match["namespace"], prefix.strip("/")


UNKNOWN_SHAPE_VARIABLE = "CLOUDDDP_OCI_ALLOW_UNKNOWN_SHAPE"


def check_shape(
    shape: str, ocpus: float | None, memory_in_gbs: float | None, *, allow_unknown: bool = False
) -> tuple[float, float] | None:
    """The shape can run a multi-node job; for a flexible shape, the (OCPUs, memory GB) to ask for.

    `ocpus`/`memory_in_gbs` left unset get the defaults (`default_flex`). `allow_unknown`
    (CLOUDDDP_OCI_ALLOW_UNKNOWN_SHAPE=1) lets a GPU shape newer than the table through.
    """
    if not SHAPE_NAME.fullmatch(shape):
        raise CloudDDPError(
            f"{shown('shape', shape)} is not an OCI shape name (like VM.Standard.E4.Flex or BM.GPU.A100-v2.8)."
        )
    if not MULTI_NODE_SHAPE.fullmatch(shape):
        raise CloudDDPError(
            f"{shown('shape', shape)} cannot run multi-node jobs; use a GPU shape (VM.GPU.*, BM.GPU.*), a bare metal "
            f"shape (BM.*) or a flexible CPU shape ({', '.join(FLEX_SHAPES)})."
        )
    if GPU_SHAPE.fullmatch(shape) and not allow_unknown:
        known = {name.lower(): name for name in GPU_SHAPES}
        if shape.lower() not in known:
            close = difflib.get_close_matches(shape.lower(), known, n=3, cutoff=0.7)
            hint = f" Did you mean {' or '.join(known[c] for c in close)}?" if close else ""
            raise CloudDDPError(
                f"{shown('shape', shape)} is not a GPU shape cloudddp knows.{hint} Known: {', '.join(GPU_SHAPES)} (from "
                f"Oracle ADS's shape index). If OCI offers it since, set {UNKNOWN_SHAPE_VARIABLE}=1."
            )
    if not shape.endswith(".Flex"):
        if ocpus is not None or memory_in_gbs is not None:
            raise CloudDDPError(
                f"oci.ocpus/oci.memory_in_gbs apply to flexible shapes only (*.Flex); {shown('shape', shape)} has a fixed "
                f"size."
            )
        return None
    return check_flex(shape, ocpus, memory_in_gbs)


def check_flex(shape: str, ocpus: float | None, memory_in_gbs: float | None) -> tuple[float, float]:
    """OCPUs and memory within the shape's documented ranges (see FLEX_SHAPES)."""
    if shape not in FLEX_SHAPES:
        close = difflib.get_close_matches(shape, FLEX_SHAPES, n=1, cutoff=0.8)
        hint = f" Did you mean {close[0]}?" if close else ""
        raise CloudDDPError(
            f"{shown('shape', shape)} is not a flexible shape Data Science runs.{hint} Flexible shapes: "
            f"{', '.join(FLEX_SHAPES)}."
        )
    max_ocpus, max_memory = FLEX_SHAPES[shape]
    chosen_ocpus = DEFAULT_FLEX_OCPUS if ocpus is None else ocpus
    chosen_memory = DEFAULT_FLEX_MEMORY_GB if memory_in_gbs is None else memory_in_gbs
    ocpus_shown = f"oci.ocpus={chosen_ocpus:g} (default)" if ocpus is None else shown("ocpus", ocpus)
    if not 1 <= chosen_ocpus <= max_ocpus:
        raise CloudDDPError(f"{ocpus_shown}: {shape} takes 1 to {max_ocpus:g} OCPUs.")
    memory_shown = (
        f"oci.memory_in_gbs={chosen_memory:g} (default)"
        if memory_in_gbs is None
        else shown("memory_in_gbs", memory_in_gbs)
    )
    low = max(MIN_GB_PER_OCPU * chosen_ocpus, 1.0)
    high = min(MAX_GB_PER_OCPU * chosen_ocpus, max_memory)
    if not low <= chosen_memory <= high:
        raise CloudDDPError(
            f"{memory_shown} with {ocpus_shown}: "
            f"{shape} takes {low:g} to {high:g} GB for {chosen_ocpus:g} OCPUs (1 to 64 GB per OCPU, at most "
            f"{max_memory:g} GB)."
        )
    return chosen_ocpus, chosen_memory


def check_region(region: str, origin: str = "oci.region", environ: Mapping[str, str] | None = None) -> str:
    """A region the oci SDK knows offline (`oci.regions`), or one OCI_REGION_METADATA describes."""
    import oci

    known = set(oci.regions.REGIONS)
    short = dict(oci.regions.REGIONS_SHORT_NAMES)
    if region in known or region in short:
        return region
    metadata = (environ or {}).get(oci.regions.OCI_REGION_METADATA_ENV_VAR_NAME)
    if metadata:
        try:
            described = json.loads(metadata)
        except ValueError:
            described = {}
        if isinstance(described, dict) and region in (described.get("regionIdentifier"), described.get("regionKey")):
            return region
    problem = ""
    if region != region.strip():
        problem = " (it has spaces around it)"
    elif region != region.lower() and region.lower() in known:
        problem = " (region names are lower case)"
    close = difflib.get_close_matches(region.strip().lower(), sorted(known), n=1, cutoff=0.75)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise CloudDDPError(
        f"{origin}={region!r} is not an OCI region{problem}.{hint} The oci SDK {oci.__version__} knows "
        f"{len(known)} regions (like us-ashburn-1, eu-frankfurt-1) and their short names (iad, fra); for a region "
        f"newer than the SDK, upgrade the oci package or describe it in OCI_REGION_METADATA."
    )


def check_container_command(entrypoint: Sequence[str], cmd: Sequence[str] | None) -> None:
    """CMD + ENTRYPOINT under 2,048 bytes (counted as node.command_bytes does)."""
    size = command_bytes(entrypoint, cmd)
    if size >= MAX_COMMAND_BYTES:
        own = command_bytes(entrypoint, [])
        over = size - (MAX_COMMAND_BYTES - 1)
        raise CloudDDPError(
            f"the container command is {size:,} bytes: cloudddp's entrypoint ({own:,}) plus the script's arguments "
            f"(args and hyperparameters, {size - own:,}). OCI Data Science needs CMD + ENTRYPOINT under "
            f"{MAX_COMMAND_BYTES:,} bytes: {over:,} byte(s) over. Move long values into a config file in the source "
            f"folder."
        )


def check_env_names(names: Sequence[str]) -> None:
    """Names a shell can read: letters, digits and _, not starting with a digit."""
    bad = [name for name in names if not ENV_NAME.fullmatch(name)]
    if bad:
        raise CloudDDPError(
            f"environment {', '.join(repr(b) for b in bad)}: not valid environment variable names (letters, digits and _, "
            f"not starting with a digit)."
        )


def check_image(image: str | None) -> str:
    if not image:
        raise CloudDDPError(
            "oci.image is required: Data Science jobs run a container image from OCI Container Registry. Build "
            "infra/docker/Dockerfile and push it to <region-key>.ocir.io/<tenancy-namespace>/<repo>:<tag> (--image)."
        )
    match = OCIR_IMAGE.fullmatch(image)
    if not match:
        raise CloudDDPError(
            f"{shown('image', image)}: Data Science jobs pull images from OCI Container Registry only; expected "
            f"<region-key>.ocir.io/<tenancy-namespace>/<repo>:<tag>."
        )
    if not OCIR_REFERENCE.fullmatch(image.split("/", 1)[1]):
        raise CloudDDPError(
            f"{shown('image', image)}: expected <region-key>.ocir.io/<tenancy-namespace>/<repo>:<tag> (or "
            f":<tag>@sha256:<digest>), as OCI Data Science takes it: a tag is required, and the namespace and "
            f"repository are lower-case letters and digits joined by '.', '_' or '-'."
        )
    return image


def check_block_storage(size_gb: int) -> None:
    if size_gb < MIN_BLOCK_STORAGE_GB:
        raise CloudDDPError(
            f"{shown('block_storage_gb', size_gb)}: Data Science jobs need at least {MIN_BLOCK_STORAGE_GB} GB of block storage."
        )


def env_size(env: Mapping[str, str]) -> int:
    return sum(len(k) + len(v) for k, v in env.items())


# Set by the service on each node of a multi-node run, each node its own (shared/platforms.md; ADS reads NODE_RANK,
# INITIAL_CLUSTER_SIZE, CLUSTER_NODES_METADATA_FILE and JOB_RUN_OCID from it: oracle/accelerated-data-science
# ads/jobs/templates/driver_pytorch.py at 0e785b9f): one value in the job's environment would give every node
# the same rank.
SERVICE_VARIABLES = (
    "NODE_RANK", "INITIAL_CLUSTER_SIZE", "CLUSTER_NODES_METADATA_FILE", "NODE_GROUP_NAME", "JOB_OCID", "JOB_RUN_OCID",
)  # fmt: skip


def check_service_variables(env: Mapping[str, str], user_keys: Sequence[str]) -> None:
    """No user value for what the service sets on each node; MASTER_PORT, which the job side reads, a port."""
    taken = sorted(set(user_keys) & set(SERVICE_VARIABLES))
    if taken:
        raise CloudDDPError(
            f"environment {', '.join(taken)}: OCI Data Science sets {'these' if len(taken) > 1 else 'this'} on each "
            f"node of a multi-node job run; a value in the job's environment would be the same on every node. "
            f"Remove {'them' if len(taken) > 1 else 'it'}."
        )
    if "MASTER_PORT" in user_keys and env.get("MASTER_PORT", ""):  # as the job side reads it (cluster/oci.py)
        parse_port(env["MASTER_PORT"], "environment MASTER_PORT")


def check_environment(env: Mapping[str, str], user_keys: Sequence[str]) -> None:
    """The 20,000-character limit (a secret among the variables is refused before: OCI's PROVIDER.in_clear)."""
    check_service_variables(env, user_keys)
    total = env_size(env)
    if total > MAX_ENV_CHARS:
        largest = sorted(env, key=lambda k: len(k) + len(env[k]), reverse=True)[:3]
        raise CloudDDPError(
            f"the job's environment variables hold {total:,} characters (names and values); OCI Data Science allows "
            f"{MAX_ENV_CHARS:,}. Largest: {', '.join(f'{k} ({len(k) + len(env[k]):,})' for k in largest)}. Move large "
            f"values into a file in the source folder."
        )


def check_mount_count(count: int) -> None:
    if count > MAX_STORAGE_MOUNTS:
        raise CloudDDPError(
            f"the job needs {count} Object Storage mounts (work dir, oci:// inputs, output, checkpoint); OCI Data "
            f"Science jobs take at most {MAX_STORAGE_MOUNTS}. Put the inputs under one bucket prefix."
        )


def check_log_settings(log_group_id: str | None, log_id: str | None) -> None:
    """A log only with its log group, named as the user wrote them (an ADS file's own fields, or oci.*).

    ADS accepts a `logId` alone and finds the group itself (`DataScienceJob._prepare_log_config`: a Resource
    Search for the log's compartment, then the logs of every log group there; oracle/accelerated-data-science
    ads/jobs/builders/infrastructure/dsc_job.py and ads/common/oci_logging.py `OCILog._get_log_group_id` at
    0e785b9f). cloudddp makes no such calls before submitting: it asks for the group.
    """
    if not log_id or log_group_id:
        return
    from cloudddp.providers.oci.ads import INFRASTRUCTURE_PATH, source_of

    source = source_of("log_id", log_id)
    if source:
        raise CloudDDPError(
            f"{source[1]}: {INFRASTRUCTURE_PATH}.logId={log_id!r} is set without {INFRASTRUCTURE_PATH}.logGroupId. "
            f"OCI Data Science needs the log group of a job's log; ADS looks it up with extra calls (a Resource "
            f"Search, then every log group of the compartment), cloudddp does not. Add {INFRASTRUCTURE_PATH}."
            f"logGroupId: <the OCID of the log group that holds this log> (the log's page in the OCI Console names "
            f"its log group)."
        )
    raise CloudDDPError(
        f"oci.log_id={log_id!r} is set without oci.log_group_id: OCI Data Science needs the log group of a job's "
        f"log. Add oci.log_group_id (--log-group): the OCID of the log group that holds this log (the log's page in "
        f"the OCI Console names it); or set only oci.log_group_id to have a log created for each run."
    )


def check_output_tag(output_uri: str, origin: str, fixed: int = 0) -> None:
    """The output URI fits the run's `cloudddp-output` freeform tag, through which cloudddp finds the model.

    `origin` names what the user controls (the work dir and job name, or `output`); `fixed` is how many
    characters cloudddp adds after it (`/runs/<stamp>/output`).
    """
    if len(output_uri) <= MAX_TAG_VALUE_CHARS:
        return
    over = len(output_uri) - MAX_TAG_VALUE_CHARS
    added = f", plus {fixed} characters cloudddp adds for each run (/runs/<stamp>/output)" if fixed else ""
    raise CloudDDPError(
        f"the job run's output location is {len(output_uri)} characters: {origin}{added}. cloudddp records it in "
        f"the run's freeform tag `cloudddp-output`, whose value OCI limits to {MAX_TAG_VALUE_CHARS} characters, and "
        f"finds the model through it after the run (status, fetch_artifacts). Shorten it by at least {over} "
        f"characters."
    )
