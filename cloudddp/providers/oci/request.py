"""The CreateJobDetails / CreateJobRunDetails a JobSpec becomes: pure, no client, no upload.

One multi-node job with one node group of `nodes` replicas, an OCIR container, and one
job run. How the user's code and data reach the nodes (all through one Object Storage
mount of the work dir, so the container needs no SDK and no credentials):

    oci://bucket@namespace/<prefix>/<name>/         mounted at /mnt/cloudddp
      runs/<stamp>/sourcedir.tar.gz                 pack_source(): script + bundled launcher; <stamp> is
                                                    UTC to the millisecond plus a random suffix (run_stamp)
      runs/<stamp>/output/                          node 0's model folder, logs/node-<rank>.log
      inputs/<channel>/v-<content hash>/            local input folders, staged as versions (staging/engine.py)

`oci://` inputs, an `oci://` output and an `oci://` checkpoint get a mount each. Every
node runs `node.ENTRYPOINT`: it unpacks the archive onto the node's block volume and runs
the node script shipped inside it (see node.py), with the script's arguments as CMD.
"""

from __future__ import annotations

import math
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudddp.cluster.environment import channel_variable
from cloudddp.errors import CloudDDPError
from cloudddp.providers.oci import node, validation

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

MOUNT_ROOT = "/mnt"
WORK_MOUNT = "cloudddp"
NODE_GROUP = "cloudddp"
ARCHIVE_NAME = "sourcedir.tar.gz"
COMPARTMENT_VARIABLES = ("NB_SESSION_COMPARTMENT_OCID", "CLOUDDDP_OCI_COMPARTMENT_ID")
PROJECT_VARIABLES = ("PROJECT_OCID", "CLOUDDDP_OCI_PROJECT_ID")
OUTPUT_TAG = "cloudddp-output"
NODES_TAG = "cloudddp-nodes"
RUN_ID_PLACEHOLDER = "<id returned by create_job>"
# A staged folder is read at the version `submit` publishes (`inputs/<channel>/v-<content hash>`, see
# cloudddp.staging.engine); the hash is only known once the data is read, so the dry run says so. As long
# as a real version name (v- and 16 hex digits): the environment's size limit is checked on the real length.
VERSION_AT_SUBMIT = "v-<hash-at-submit>"


@dataclass
class Mount:
    """An Object Storage mount: `bucket@namespace/prefix` at /mnt/<directory>."""

    directory: str
    bucket: str
    namespace: str
    prefix: str

    @property
    def path(self) -> str:
        return f"{MOUNT_ROOT}/{self.directory}"

    @property
    def uri(self) -> str:
        return f"oci://{self.bucket}@{self.namespace}/{self.prefix}".rstrip("/")


@dataclass
class Upload:
    """A local folder `submit` puts under `prefix/` of the work-dir bucket (the source as one archive)."""

    local: str
    prefix: str
    kind: str  # "archive" or "folder"
    variable: str | None = None  # a folder: the job's variable whose VERSION_AT_SUBMIT submit fills in


@dataclass
class Parts:
    """Everything `submit` needs besides credentials; `render` builds it, nothing else."""

    create_job: Any  # oci.data_science.models.CreateJobDetails
    create_job_run: Any  # oci.data_science.models.CreateJobRunDetails (job_id filled in by submit)
    bucket: str
    namespace: str
    uploads: list[Upload]
    job_config: dict[str, Any]
    output_uri: str
    logging: bool
    settings_origin: dict[str, str] = field(default_factory=dict)


def setting_or_environment(
    spec_value: str | None, environ: Mapping[str, str], names: tuple[str, ...]
) -> tuple[str | None, str]:
    """The spec's value, else the first of the variables `names` that is set; and where it came from."""
    if spec_value:
        return spec_value, "spec"
    for name in names:
        if environ.get(name):
            return environ[name], name
    return None, ""


def mount_for(uri: str, directory: str, field_name: str) -> Mount:
    bucket, namespace, prefix = validation.parse_work_dir(uri, field_name)
    return Mount(directory=directory, bucket=bucket, namespace=namespace, prefix=prefix)


def runtime_minutes(seconds: int | None) -> int | None:
    """maximum_runtime_in_minutes: none unless the job gives max_runtime, as ADS sends none (its train.yaml has no
    such field; oracle/accelerated-data-science 0e785b9fd36fb354019e0924b94ac2b0ec6f235a): the service then stops
    the job at no time limit of cloudddp's making."""
    return max(1, math.ceil(seconds / 60)) if seconds is not None else None


def validate_locals(spec: JobSpec) -> None:
    spec.require_source()
    for channel, where in spec.inputs.items():
        if "://" in where:
            if not where.startswith("oci://"):
                raise CloudDDPError(f"inputs.{channel}={where!r}: OCI jobs read local folders or oci:// URIs.")
        elif not Path(where).exists():
            raise CloudDDPError(f"inputs.{channel}={where!r} does not exist.")
    for name in ("output", "checkpoint"):
        value = getattr(spec, name)
        if value and not value.startswith("oci://"):
            raise CloudDDPError(
                f"{name}={value!r}: on OCI the {name} must be an oci://bucket@namespace/prefix URI (or unset: "
                f"{'the work dir' if name == 'output' else 'node-local'}). Download the model afterwards with "
                f"OCIProvider.fetch_artifacts."
            )


@dataclass
class DataPaths:
    """Where the job's data is: the Object Storage mounts, the variables naming them, the folders to stage."""

    mounts: list[Mount]
    env: dict[str, str]
    uploads: list[Upload]
    output_uri: str


# The settings every job needs, and where else they are read from (a Data Science notebook session sets both).
REQUIRED_VARIABLES = {"compartment_id": COMPARTMENT_VARIABLES, "project_id": PROJECT_VARIABLES}
REQUIRED_HINTS = {
    "compartment_id": f" (--compartment, or {' / '.join(COMPARTMENT_VARIABLES)})",
    "project_id": f" (--project, or {' / '.join(PROJECT_VARIABLES)})",
}


def missing_settings(spec: JobSpec, environ: Mapping[str, str]) -> list[str]:
    return [f"oci.{field} is required{REQUIRED_HINTS[field]}." for field, names in REQUIRED_VARIABLES.items()
            if not setting_or_environment(getattr(spec.oci, field), environ, names)[0]]  # fmt: skip


def check_settings(spec: JobSpec, environ: Mapping[str, str]) -> tuple[str, str, dict[str, str], str, Any]:
    """Every limit of the oci section: (compartment, project, where each came from, image, flex shape config)."""
    settings = spec.oci
    compartment_id, compartment_from = setting_or_environment(settings.compartment_id, environ, COMPARTMENT_VARIABLES)
    project_id, project_from = setting_or_environment(settings.project_id, environ, PROJECT_VARIABLES)
    validation.check_ocid("compartment_id", compartment_id, required=True, hint=REQUIRED_HINTS["compartment_id"])
    validation.check_ocid("project_id", project_id, required=True, hint=REQUIRED_HINTS["project_id"])
    validation.check_ocid("subnet_id", settings.subnet_id)
    validation.check_ocid("log_group_id", settings.log_group_id)
    validation.check_ocid("log_id", settings.log_id)
    validation.check_log_settings(settings.log_group_id, settings.log_id)
    image = validation.check_image(settings.image)
    if settings.region:
        validation.check_region(settings.region, "oci.region", environ)
    flex = validation.check_shape(
        settings.shape, settings.ocpus, settings.memory_in_gbs,
        allow_unknown=environ.get(validation.UNKNOWN_SHAPE_VARIABLE) == "1",
    )  # fmt: skip
    validation.check_block_storage(settings.block_storage_gb)
    validate_locals(spec)
    origins = {"compartment_id": compartment_from, "project_id": project_from}
    return compartment_id, project_id, origins, image, flex  # type: ignore[return-value]  # checked: required


def data_paths(spec: JobSpec, work: Mount, stamp: str, run_prefix: str) -> DataPaths:
    """Inputs, output and checkpoint: an `oci://` URI is mounted, a local folder staged into the work dir."""
    mounts = [work]
    env: dict[str, str] = {"CLOUDDDP_SOURCE": f"{work.path}/runs/{stamp}/{ARCHIVE_NAME}"}
    uploads: list[Upload] = []
    for channel in sorted(spec.inputs):
        where = spec.inputs[channel]
        if where.startswith("oci://"):
            mount = mount_for(where, f"cloudddp-in-{channel}", f"inputs.{channel}")
            mounts.append(mount)
            env[channel_variable(channel)] = mount.path
        else:
            variable = channel_variable(channel)
            uploads.append(Upload(str(Path(where).resolve()), f"{work.prefix}/inputs/{channel}", "folder", variable))
            env[variable] = f"{work.path}/inputs/{channel}/{VERSION_AT_SUBMIT}"
    if spec.output:
        output = mount_for(spec.output, "cloudddp-output", "output")
        mounts.append(output)
        env["CLOUDDDP_OUTPUT_DIR"], output_uri = output.path, output.uri
    else:
        env["CLOUDDDP_OUTPUT_DIR"] = f"{work.path}/runs/{stamp}/output"
        output_uri = f"oci://{work.bucket}@{work.namespace}/{run_prefix}/output"
    if spec.checkpoint:
        checkpoint = mount_for(spec.checkpoint, "cloudddp-checkpoint", "checkpoint")
        mounts.append(checkpoint)
        env["CLOUDDDP_CHECKPOINT_DIR"] = checkpoint.path
    validation.check_mount_count(len(mounts))
    return DataPaths(mounts=mounts, env=env, uploads=uploads, output_uri=output_uri)


def job_environment(spec: JobSpec, env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """cloudddp's variables plus the user's (no clashes), and the script's arguments (the container's CMD)."""
    clashes = sorted(set(env) & set(spec.environment))
    if clashes:
        raise CloudDDPError(f"environment {', '.join(clashes)}: set by cloudddp for the job; choose other names.")
    validation.check_env_names(sorted(spec.environment))
    env = {**env, **spec.environment}
    validation.check_environment(env, list(spec.environment))
    arguments = spec.script_args()
    validation.check_container_command(node.ENTRYPOINT, arguments)
    return env, arguments


def node_group(spec: JobSpec, image: str, flex: Any, env: dict[str, str], arguments: list[str]) -> Any:
    """The one node group: `nodes` replicas of the container on the shape."""
    from oci.data_science import models

    shape_config = models.JobShapeConfigDetails(ocpus=flex[0], memory_in_gbs=flex[1]) if flex else None
    return models.JobNodeGroupConfigurationDetails(
        name=NODE_GROUP,
        replicas=spec.nodes,
        minimum_success_replicas=spec.nodes,  # DDP: every rank must finish
        job_infrastructure_configuration_details=models.MultiNodeJobInfrastructureConfigurationDetails(
            shape_name=spec.oci.shape,
            block_storage_size_in_gbs=spec.oci.block_storage_gb,
            job_shape_config_details=shape_config,
        ),
        job_configuration_details=models.DefaultJobConfigurationDetails(environment_variables=env),
        job_environment_configuration_details=models.OcirContainerJobEnvironmentConfigurationDetails(
            image=image,
            entrypoint=list(node.ENTRYPOINT),
            cmd=arguments or None,
        ),
    )


def create_job_details(spec: JobSpec, project_id: str, compartment_id: str, group: Any, mounts: list[Mount]) -> Any:
    """CreateJobDetails: the multi-node configuration, logging and the storage mounts."""
    from oci.data_science import models

    settings = spec.oci
    network: Any = (
        models.JobCustomNetworkConfiguration(subnet_id=settings.subnet_id)
        if settings.subnet_id
        else models.JobDefaultNetworkConfiguration()
    )
    node_configuration = models.MultiNodeJobNodeConfigurationDetails(
        startup_order="IN_PARALLEL",
        maximum_runtime_in_minutes=runtime_minutes(spec.runtime_limit(None)),
        job_network_configuration=network,
        job_node_group_configuration_details_list=[group],
    )
    logging = bool(settings.log_group_id)
    log_configuration = models.JobLogConfigurationDetails(
        enable_logging=logging,
        enable_auto_log_creation=logging and not settings.log_id,
        log_group_id=settings.log_group_id,
        log_id=settings.log_id,
    )
    storage = [
        models.ObjectStorageMountConfigurationDetails(
            destination_directory_name=m.directory, namespace=m.namespace, bucket=m.bucket,
            prefix=(m.prefix + "/") if m.prefix else None,
        )
        for m in mounts
    ]  # fmt: skip
    return models.CreateJobDetails(
        project_id=project_id,
        compartment_id=compartment_id,
        display_name=spec.name,
        description=f"cloudddp: {spec.entry_point} on {spec.nodes} x {settings.shape}",
        job_node_configuration_details=node_configuration,
        job_log_configuration_details=log_configuration,
        job_storage_mount_configuration_details_list=storage,
        freeform_tags={"cloudddp": "1"},
    )


def create_run_details(spec: JobSpec, project_id: str, compartment_id: str, stamp: str, output_uri: str) -> Any:
    """CreateJobRunDetails; `submit` fills in the job id create_job returns."""
    from oci.data_science import models

    tags = {NODES_TAG: str(spec.nodes), OUTPUT_TAG: output_uri}  # check_output_uri: it fits a tag value
    return models.CreateJobRunDetails(
        project_id=project_id,
        compartment_id=compartment_id,
        display_name=f"{spec.name}-{stamp}",
        job_id=RUN_ID_PLACEHOLDER,
        freeform_tags=tags,
    )


def run_stamp(now: float | None = None) -> str:
    """This launch's run folder and display-name suffix: `YYYYmmdd-HHMMSS-mmm-xxxxxx` (UTC, milliseconds as the
    SageMaker provider's job names, and 6 random hex digits), so two launches of one job in the same
    millisecond still get folders, output prefixes and run names of their own."""
    moment = time.time() if now is None else now
    millis = int(moment * 1000) % 1000
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(moment))}-{millis:03d}-{secrets.token_hex(3)}"


def check_output_uri(spec: JobSpec, output_uri: str, stamp: str) -> None:
    """The run's output URI fits its `cloudddp-output` tag; the error names what the user can shorten."""
    if spec.output:
        validation.check_output_tag(output_uri, f"output={spec.output!r} ({len(spec.output)} characters)")
        return
    fixed = len(f"/runs/{stamp}/output")
    work_dir = spec.oci.work_dir or ""
    origin = (
        f"{validation.shown('work_dir', work_dir)} ({len(work_dir)} characters) and the job name {spec.name!r} "
        f"({len(spec.name)}), {len(output_uri) - fixed} as oci://bucket@namespace/prefix/name"
    )
    validation.check_output_tag(output_uri, origin, fixed)


def build(spec: JobSpec, environ: Mapping[str, str] | None = None, stamp: str | None = None) -> Parts:
    """The request for `spec`; every limit the service enforces is checked here, first."""
    environ = os.environ if environ is None else environ
    stamp = stamp or run_stamp()
    compartment_id, project_id, origins, image, flex = check_settings(spec, environ)
    bucket, namespace, base = validation.parse_work_dir(spec.oci.work_dir)
    job_prefix = "/".join(p for p in (base, spec.name) if p)
    run_prefix = f"{job_prefix}/runs/{stamp}"
    paths = data_paths(spec, Mount(WORK_MOUNT, bucket, namespace, job_prefix), stamp, run_prefix)
    check_output_uri(spec, paths.output_uri, stamp)
    env, arguments = job_environment(spec, paths.env)
    uploads = [Upload(str(Path(spec.source_dir).resolve()), run_prefix, "archive"), *paths.uploads]
    launcher_args = [f"--nproc-per-node={spec.nproc_per_node}"] if spec.nproc_per_node is not None else []
    job_config = {"entry_point": spec.entry_point, "module": spec.module, "args": [], "launcher_args": launcher_args}
    group = node_group(spec, image, flex, env, arguments)
    return Parts(
        create_job=create_job_details(spec, project_id, compartment_id, group, paths.mounts),
        create_job_run=create_run_details(spec, project_id, compartment_id, stamp, paths.output_uri),
        bucket=bucket, namespace=namespace, uploads=uploads, job_config=job_config, output_uri=paths.output_uri,
        logging=bool(spec.oci.log_group_id), settings_origin=origins,
    )  # fmt: skip


def describe_plan(parts: Parts) -> dict[str, Any]:
    """What `submit` does before create_job, for the dry run."""
    location = f"oci://{parts.bucket}@{parts.namespace}"
    stage = []
    for upload in parts.uploads:
        if upload.kind == "archive":
            target, what = f"{upload.prefix}/{ARCHIVE_NAME}", "source archive with the cloudddp launcher"
        else:
            target, what = (
                f"{upload.prefix}/{VERSION_AT_SUBMIT}/",
                "input folder, published as a version (nothing deleted)",
            )
        stage.append({"from": upload.local, "to": f"{location}/{target}", "what": what})
    plan: dict[str, Any] = {
        "stage": stage,
        "source_archive_job_config": parts.job_config,
        "output": parts.output_uri,
        "logs": "OCI Logging" if parts.logging else "off: set oci.log_group_id (--log-group) to stream logs",
    }  # fmt: skip
    origins = {k: v for k, v in parts.settings_origin.items() if v and v != "spec"}
    if origins:
        plan["from_environment"] = origins
    return plan
