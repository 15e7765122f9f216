"""Oracle ADS `opctl` distributed-training YAML (`kind: distributed`) as a cloudddp job spec.

The file is read into pydantic models named by the YAML's own camelCase fields (`TrainYaml`,
`spec.infrastructure.spec.shapeName`, `spec.cluster.spec.worker.replicas`, ...), then turned into
the dict `cloudddp.job_spec.build_spec` takes. How ADS reads the file, from oracle/accelerated-data-science
at 0e785b9fd36fb354019e0924b94ac2b0ec6f235a: `ads/opctl/config/yaml_parsers/distributed/yaml_parser.py`
and `yaml_parsers/base.py` (`DistributedSpecParser`, `translate_config`),
`ads/opctl/backend/ads_ml_job.py` (`MLJobDistributedBackend.prepare_job_config` and `run`),
`ads/jobs/builders/infrastructure/dsc_job.py` (`DataScienceJob.attribute_map`, `standardize_spec`),
and the field list of its documented schema, `docs/source/yaml_schema/jobs/distributed.yaml`.

- Unknown keys: ADS reads every field by name (`.get`) and never validates the file (the parser's
  own "TODO: validate yamlInput"), so a key it does not know is ignored. cloudddp ignores it too,
  and warns, naming it (a misspelt `shapeNmae` would otherwise pass unseen).
- Fields ADS knows but cloudddp cannot honour (`ps`, `startOptions`, `storageMount`, git runtimes,
  ...) are errors naming the field and saying why (the `FIELDS` table), never silently dropped.
- `spec.infrastructure.spec` also takes the SDK's snake_case names (`shape_name`), as ADS's
  `DataScienceJob.standardize_spec` does.
- Nodes: ADS starts one main job run whatever `main.replicas` says (it warns above 1), and
  `worker.replicas or 1` worker runs when a non-empty `worker` section exists (so `replicas: 0`
  still gives one worker), none without one. cloudddp counts the same way and warns in both cases.
- Job name: `cluster.spec.name`, else `infrastructure.spec.displayName` (ADS); cloudddp falls
  back to the top-level `spec.name`, which ADS never reads, and warns when it does, or when
  the name must change to be a cloudddp name (letters, digits, hyphens).
- Image: `cluster.spec.image`, else `main.image`, else `worker.image` (ADS). An image name without a tag (no ":")
  gets `:latest`, as `ads opctl run` gives it (`ads/opctl/distributed/cmds.py` update_ini: `tag1 = "latest"`, then
  update_image writes `registry:tag` back into cluster.spec.image), with a warning. A name that is no image
  reference (the guide's `<region.ocir.io/...>` placeholder) is left as written, for the image check to refuse.
- Block storage: `blockStorageSize`, else ADS's default, 50 GB (`ads/jobs/builders/infrastructure/dsc_job.py`
  DSCJob.load_defaults, CONST_DEFAULT_BLOCK_STORAGE_SIZE = 50), not cloudddp's own 100.
- Arguments: each entry of `runtime.spec.args` stays one argument. ADS joins them with spaces into
  OCI__ENTRY_SCRIPT_ARGS (`cluster_config_helper.py` job_def_info) and its PyTorch runner splits that line again
  with shlex.split, so an entry holding a space, a quote or a backslash (or an empty one) reaches the script
  differently there: cloudddp warns, naming the entries (not their values, which may be secrets).
- Environment: `cluster.spec.config.env`, then `runtime.spec.env` (ADS's job definition:
  `ClusterConfigToJobSpecConverter.job_def_info` updates the first with the second), then `main`/`worker`
  `config.env`, which win: ADS passes them to each job run as overrides (`job_run_info`, `job.run(env_var=...)`).
  cloudddp runs one node group, so main and worker must agree.

Errors are pydantic's, rendered by `cloudddp.spec.describe_fields` (the job spec's renderer) with
the YAML's own field path and value. Errors about a value read from the file name the file's own
field (`compartmentId`) also when the check runs later at render (`source_of`). No `oci` import
here: reading a spec needs no SDK.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from cloudddp.errors import CloudDDPError
from cloudddp.redact import is_secret_name
from cloudddp.spec import SECRET_VALUE, describe_fields

Warn = Callable[[str], None]

# Every field of ADS's distributed spec -> what cloudddp does with it.
FIELDS: dict[str, str] = {
    "kind": "must be `distributed`",
    "apiVersion": "v1.0 only",
    "spec.name": "job name when neither cluster.spec.name nor displayName is set (ADS ignores it; warning)",
    "spec.infrastructure.type": "dataScienceJob only",
    "spec.infrastructure.kind / apiVersion": "ignored, as ADS does",
    "spec.infrastructure.spec.projectId": "oci.project_id",
    "spec.infrastructure.spec.compartmentId": "oci.compartment_id",
    "spec.infrastructure.spec.displayName": "job name when cluster.spec.name is unset",
    "spec.infrastructure.spec.logGroupId": "oci.log_group_id",
    "spec.infrastructure.spec.logId": (
        "oci.log_id; error without logGroupId (ADS finds the group itself: a Resource Search for the log's "
        "compartment, then the logs of each log group there; cloudddp makes no such calls: add logGroupId)"
    ),
    "spec.infrastructure.spec.subnetId": "oci.subnet_id",
    "spec.infrastructure.spec.shapeName": "oci.shape",
    "spec.infrastructure.spec.blockStorageSize": "oci.block_storage_gb; not set: 50, ADS's default (cloudddp's own is 100)",
    "spec.infrastructure.spec.shapeConfigDetails.ocpus": "oci.ocpus",
    "spec.infrastructure.spec.shapeConfigDetails.memoryInGBs": "oci.memory_in_gbs",
    "spec.infrastructure.spec.jobType / jobInfrastructureType": "error: cloudddp always creates a multi-node job",
    "spec.infrastructure.spec.storageMount": "error: use oci:// inputs, output and checkpoint",
    "spec.infrastructure.spec.freeformTags / definedTags": "error: not supported",
    "spec.cluster.kind": "PYTORCH only (Dask, TensorFlow, Horovod stay with ADS)",
    "spec.cluster.spec.name": "job name (as ADS)",
    "spec.cluster.spec.image": (
        "oci.image (else main.image, else worker.image, as ADS); without a tag, `:latest` is added, as ADS does (warning)"
    ),
    "spec.cluster.spec.workDir": "oci.work_dir",
    "spec.cluster.spec.config.env": "environment",
    "spec.cluster.spec.config.startOptions": "error: pass launcher options as cloudddp flags",
    "spec.cluster.spec.ephemeral": "ignored with a warning (cloudddp clusters always end with the job)",
    "spec.cluster.spec.main.name / worker.name": "ignored: one job run, one node group",
    "spec.cluster.spec.main.replicas": "1 main node, as ADS (warning above 1)",
    "spec.cluster.spec.main.image / worker.image": "the image when cluster.spec.image is unset; must agree",
    "spec.cluster.spec.main.config.env / worker.config.env": (
        "environment, over runtime.spec.env and cluster.spec.config.env, as ADS's per-run overrides (main and "
        "worker must agree)"
    ),
    "spec.cluster.spec.worker.replicas": "worker nodes; 0 counts as 1, as ADS (warning)",
    "spec.cluster.spec.ps / certificate": "error: TensorFlow parameter servers and Dask TLS are not PyTorch DDP",
    "spec.runtime.kind": "python only",
    "spec.runtime.spec.entryPoint": "entry_point",
    "spec.runtime.spec.args": (
        "args, each entry one argument; ADS joins them with spaces and its runner splits that line again (shlex), "
        "so there an entry holding a space, a quote or a backslash becomes other arguments (warning)"
    ),
    "spec.runtime.spec.env": "environment, over cluster.spec.config.env (as ADS's job definition)",
    "spec.runtime.spec.kwargs / uri / branch / commit / gitSecretId / codeDir / pythonPath": (
        "error: cloudddp ships the folder that holds the YAML instead"
    ),
}


INFRASTRUCTURE_PATH = "spec.infrastructure.spec"
ADS_BLOCK_STORAGE_GB = 50  # dsc_job.py DSCJob.CONST_DEFAULT_BLOCK_STORAGE_SIZE, applied by load_defaults
IMAGE_NAME = re.compile(r"[A-Za-z0-9._/-]+")  # what an image name (without tag or digest) is made of

# (oci field, value) -> (ADS field, file) it was read from: lets later checks name the YAML's field.
_SOURCES: dict[tuple[str, str], tuple[str, str]] = {}


def source_of(field: str, value: Any) -> tuple[str, str] | None:
    """(ADS field, file) if this value of oci.<field> was read from an ADS file, e.g.
    ("spec.infrastructure.spec.compartmentId", "train.yaml"); None otherwise (a flag, a cloudddp spec)."""
    return _SOURCES.get((field, str(value)))


def print_warning(message: str) -> None:
    print(f"cloudddp: warning: {message}", file=sys.stderr)


def refused(field: str) -> AfterValidator:
    """A field ADS knows and cloudddp cannot honour: an error saying why (FIELDS[field]) when it is set.

    Empty values pass: ADS does nothing with them either (`if not worker: return None`).
    """
    reason = FIELDS[field].removeprefix("error: ")

    def refuse(value: Any) -> None:
        if value:
            raise PydanticCustomError(
                "ads_refused", "cloudddp does not support this ADS field: {reason}", {"reason": reason}
            )

    return AfterValidator(refuse)


NotMultiNode = Annotated[Any, refused("spec.infrastructure.spec.jobType / jobInfrastructureType")]
StorageMount = Annotated[Any, refused("spec.infrastructure.spec.storageMount")]
Tags = Annotated[Any, refused("spec.infrastructure.spec.freeformTags / definedTags")]
StartOptions = Annotated[Any, refused("spec.cluster.spec.config.startOptions")]
NotPyTorchDDP = Annotated[Any, refused("spec.cluster.spec.ps / certificate")]
NotThisFolder = Annotated[
    Any, refused("spec.runtime.spec.kwargs / uri / branch / commit / gitSecretId / codeDir / pythonPath")
]
Ignored = Any  # read by ADS, without effect on the job (kind/apiVersion of a section)


class AdsSection(BaseModel):
    """A part of ADS's distributed spec, its fields named as in the YAML (camelCase).

    Unknown keys are kept (extra="allow") only to be named in a warning: ADS ignores them.
    """

    model_config = ConfigDict(alias_generator=to_camel, extra="allow", frozen=True)

    def unknown_fields(self, path: str) -> Iterator[str]:
        """The YAML paths of keys ADS does not know, in this section and the ones inside it."""
        for key in self.model_extra or {}:
            yield f"{path}{key}"
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            inside = f"{path}{field.alias or name}"
            if isinstance(value, AdsSection):
                yield from value.unknown_fields(f"{inside}.")
            elif isinstance(value, list):
                for index, item in enumerate(value):
                    if isinstance(item, AdsSection):
                        yield from item.unknown_fields(f"{inside}.{index}.")


class EnvVar(AdsSection):
    """One `env: [{name, value}]` entry (ADS's `translate_config`); the job receives the value as text."""

    name: str
    value: str | int | float | bool | None = None

    @field_validator("value", mode="before")
    @classmethod
    def _secret_stays_hidden(cls, value: Any, info: ValidationInfo) -> Any:
        """A wrong value of a secret-looking variable is named without being shown (its name is not in the error's
        location, `env.0.value`, so the renderer cannot tell on its own)."""
        name = str(info.data.get("name", ""))
        if is_secret_name(name) and not isinstance(value, str | int | float | bool | None):
            raise PydanticCustomError(SECRET_VALUE, "the value of {name} must be text or a number", {"name": name})
        return value


def env_dict(entries: list[EnvVar] | None) -> dict[str, str]:
    return {entry.name: "" if entry.value is None else str(entry.value) for entry in entries or []}


class NodeConfig(AdsSection):
    """`config:` of the cluster and of each role (`translate_config` reads `env` and `startOptions`)."""

    env: list[EnvVar] | None = None
    start_options: StartOptions = None


class Role(AdsSection):
    """`cluster.spec.main` / `cluster.spec.worker` (`parse_main`, `parse_worker_params`)."""

    name: Ignored = None  # ADS names job runs after it; cloudddp runs one job run
    replicas: int | None = Field(default=None, strict=True, ge=0)
    image: str | None = None
    config: NodeConfig | None = None


class ClusterSpec(AdsSection):
    name: str | None = None
    image: str | None = None
    work_dir: str | None = None
    ephemeral: Any = None
    config: NodeConfig | None = None
    main: Role
    worker: Role | None = None
    ps: NotPyTorchDDP = None
    certificate: NotPyTorchDDP = None

    @field_validator("worker", mode="before")
    @classmethod
    def _empty_worker_is_none(cls, value: Any) -> Any:
        return value or None  # ADS's parse_worker: `if not worker: return None`

    def node_count(self, origin: str, warn: Warn) -> int:
        """1 main + (`worker.replicas or 1` if there is a worker section), as ADS starts its job runs."""
        where = f"{origin}: spec.cluster.spec"
        if self.main.replicas and self.main.replicas > 1:
            warn(
                f"{where}.main.replicas is {self.main.replicas}; ADS runs one main node (and warns), and so does cloudddp."
            )
        if self.worker is None:
            return 1
        if self.worker.replicas == 0:
            warn(
                f"{where}.worker.replicas is 0; ADS reads it as 1 (`replicas or 1`), so this is 2 nodes, as "
                f"with ADS. Remove the worker section for a single node."
            )
        return 1 + (self.worker.replicas or 1)

    def chosen_image(self, origin: str) -> str | None:
        """cluster.spec.image, else main.image, else worker.image (ADS); one node group runs one image."""
        roles = {"main": self.main.image, "worker": self.worker.image if self.worker else None}
        chosen = self.image or roles["main"] or roles["worker"]
        for role, image in roles.items():
            if image and image != chosen:
                raise CloudDDPError(
                    f"{origin}: spec.cluster.spec.{role}.image is {image!r} but the job runs {chosen!r}; cloudddp "
                    f"runs one node group, so every node runs one image."
                )
        return chosen

    def environment(self, origin: str, runtime: dict[str, str]) -> dict[str, str]:
        """The cluster's variables, then the runtime's (`runtime`), then the roles' (which must agree: one node
        group). ADS puts the first two in the job definition and the roles' in each job run, which OCI lets
        override the job's: a role's value wins (`job_def_info` / `job_run_info` in
        ads/opctl/distributed/common/cluster_config_helper.py)."""
        main = env_dict(self.main.config.env if self.main.config else None)
        worker = env_dict(self.worker.config.env if self.worker and self.worker.config else None)
        if self.worker is not None:
            for key in sorted(set(main) | set(worker)):
                if main.get(key) != worker.get(key):
                    raise CloudDDPError(
                        f"{origin}: {key} differs between main ({main.get(key)!r}) and worker ({worker.get(key)!r}); "
                        f"cloudddp runs one node group, so every node gets the same environment."
                    )
        return {**env_dict(self.config.env if self.config else None), **runtime, **main, **worker}


class Cluster(AdsSection):
    kind: str | None = None
    api_version: Ignored = None
    spec: ClusterSpec

    @field_validator("kind")
    @classmethod
    def _pytorch(cls, value: str | None) -> str | None:
        if str(value).upper() != "PYTORCH":  # ADS accepts either case (its schema lists pytorch and PYTORCH)
            raise PydanticCustomError(
                "ads_cluster_kind",
                "cloudddp runs PyTorch DDP (kind: PYTORCH); Dask, TensorFlow and Horovod clusters stay with ADS",
            )
        return value


class ShapeConfig(AdsSection):
    ocpus: float | None = None
    memory_in_gbs: float | None = Field(default=None, alias="memoryInGBs")


# The snake_case names of dsc_job.py DataScienceJob's payload_attribute_map. Its attribute_map and
# shape_config_details_attribute_map (camelCase -> snake_case) are the fields of InfrastructureSpec and ShapeConfig.
ADS_PAYLOAD_NAMES = {"block_storage_size_in_gbs": "blockStorageSize", "job_shape_config_details": "shapeConfigDetails"}


def standardize_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """ADS's `DataScienceJob.standardize_spec`: snake_case keys (any case) become their camelCase names."""
    fields = {**InfrastructureSpec.model_fields, **ShapeConfig.model_fields}
    snake_to_camel = {snake: str(field.alias) for snake, field in fields.items()} | ADS_PAYLOAD_NAMES
    renamed = dict(spec)
    for key in list(renamed):
        if key not in snake_to_camel.values() and key.lower() in snake_to_camel:
            value = renamed.pop(key)
            renamed[snake_to_camel[key.lower()]] = standardize_spec(value) if isinstance(value, dict) else value
    return renamed


class InfrastructureSpec(AdsSection):
    project_id: str | None = None
    compartment_id: str | None = None
    display_name: str | None = None
    log_group_id: str | None = None
    log_id: str | None = None
    subnet_id: str | None = None
    shape_name: str | None = None
    block_storage_size: int | None = None
    shape_config_details: ShapeConfig | None = None
    job_type: NotMultiNode = None
    job_infrastructure_type: NotMultiNode = None
    storage_mount: StorageMount = None
    freeform_tags: Tags = None
    defined_tags: Tags = None

    @model_validator(mode="before")
    @classmethod
    def _snake_case_names(cls, data: Any) -> Any:
        return standardize_spec(data) if isinstance(data, dict) else data

    def oci_settings(self) -> dict[str, tuple[Any, str]]:
        """oci.<field> -> (value, the YAML field it came from), for the fields that are set."""
        shape = self.shape_config_details or ShapeConfig()
        found = {
            "project_id": (self.project_id, "projectId"), "compartment_id": (self.compartment_id, "compartmentId"),
            "log_group_id": (self.log_group_id, "logGroupId"), "log_id": (self.log_id, "logId"),
            "subnet_id": (self.subnet_id, "subnetId"), "shape": (self.shape_name, "shapeName"),
            "block_storage_gb": (
                ADS_BLOCK_STORAGE_GB if self.block_storage_size is None else self.block_storage_size, "blockStorageSize"
            ),
            "ocpus": (shape.ocpus, "shapeConfigDetails.ocpus"),
            "memory_in_gbs": (shape.memory_in_gbs, "shapeConfigDetails.memoryInGBs"),
        }  # fmt: skip
        return {field: (value, f"{INFRASTRUCTURE_PATH}.{where}") for field, (value, where) in found.items()
                if value is not None}  # fmt: skip


class Infrastructure(AdsSection):
    kind: Ignored = None
    api_version: Ignored = None
    type: Literal["dataScienceJob"] = "dataScienceJob"
    spec: InfrastructureSpec = InfrastructureSpec()


class RuntimeSpec(AdsSection):
    entry_point: str
    args: list[str | int | float | bool] | None = None
    env: list[EnvVar] | None = None
    kwargs: NotThisFolder = None
    uri: NotThisFolder = None
    branch: NotThisFolder = None
    commit: NotThisFolder = None
    git_secret_id: NotThisFolder = None
    code_dir: NotThisFolder = None
    python_path: NotThisFolder = None
    type: Ignored = None  # in ADS's documented schema, read by none of its code (parse_runtime reads runtime.type)


class Runtime(AdsSection):
    kind: Literal["python"] = "python"
    api_version: Ignored = None
    type: NotThisFolder = None  # ADS's git runtime (`runtime.type`)
    spec: RuntimeSpec


class Spec(AdsSection):
    name: str | None = None  # not read by ADS; cloudddp's last choice for the job name
    infrastructure: Infrastructure = Infrastructure()
    cluster: Cluster
    runtime: Runtime


class TrainYaml(AdsSection):
    """An ADS `kind: distributed` file (ADS's documented schema: docs/source/yaml_schema/jobs/distributed.yaml)."""

    kind: Literal["distributed"]
    api_version: Literal["v1.0"] | None = None
    spec: Spec

    def job_name(self, origin: str, warn: Warn) -> str:
        name = self.spec.cluster.spec.name or self.spec.infrastructure.spec.display_name
        if not name and self.spec.name:
            name = self.spec.name
            warn(
                f"{origin}: the job is named after spec.name {name!r}, which ADS does not read (it uses "
                f"spec.cluster.spec.name, else {INFRASTRUCTURE_PATH}.displayName)."
            )
        chosen = label(name or "cloudddp-job")
        if name and chosen != name:
            warn(f"{origin}: the job name {name!r} becomes {chosen!r} (cloudddp names are letters, digits, hyphens).")
        return chosen

    def oci_settings(self, origin: str, warn: Warn = print_warning) -> dict[str, Any]:
        """The `oci:` section, remembering where each value came from (`source_of`)."""
        cluster = self.spec.cluster.spec
        found = self.spec.infrastructure.spec.oci_settings()
        image = cluster.chosen_image(origin)
        if image:
            found["image"] = (tagged_as_ads_runs_it(image, origin, warn), "spec.cluster.spec.image")
        if cluster.work_dir:
            found["work_dir"] = (cluster.work_dir, "spec.cluster.spec.workDir")
        for field, (value, where) in found.items():
            _SOURCES[(field, str(value))] = (where, origin)
        return {field: value for field, (value, _) in found.items()}


def tagged_as_ads_runs_it(image: str, origin: str, warn: Warn) -> str:
    """`image:latest` for an image without a tag, as `ads opctl run` runs it (module docstring), with a warning."""
    if ":" in image or not IMAGE_NAME.fullmatch(image):  # tagged, a digest, or no image name (a placeholder)
        return image
    warn(
        f"{origin}: spec.cluster.spec.image {image!r} has no tag; ADS runs it as {image + ':latest'!r} "
        f"(`ads opctl run` adds :latest), and so does cloudddp. Write the tag to be sure which image runs."
    )
    return image + ":latest"


def one_shell_word(arg: str) -> bool:
    """Whether shlex.split gives `arg` back as one word (no space, quote or backslash in it, not empty)."""
    try:
        return shlex.split(arg) == [arg]
    except ValueError:  # an unbalanced quote: ADS's runner would fail on the whole line
        return False


def warn_about_split_arguments(args: list[str], origin: str, warn: Warn) -> None:
    """ADS passes `" ".join(args)` to its runner, which runs `shlex.split` on it (module docstring): name the entries
    that would not reach the script as written there (positions only: an argument may be a secret)."""
    changed = [i for i, arg in enumerate(args) if not one_shell_word(arg)]
    if changed:
        warn(
            f"{origin}: spec.runtime.spec.args entr{'y' if len(changed) == 1 else 'ies'} "
            f"{', '.join(map(str, changed))} hold{'s' if len(changed) == 1 else ''} a space, a quote, a backslash or "
            f"nothing; cloudddp passes every entry as one argument, while ADS joins them with spaces and its runner "
            f"splits that line again (shlex), so under ADS the script would get other arguments."
        )


def label(value: str) -> str:
    """A display name as a cloudddp job name (letters, digits, hyphens)."""
    cleaned = re.sub(r"[^A-Za-z0-9-]+", "-", value).strip("-")[:63]
    return cleaned or "cloudddp-job"


def read_train_yaml(data: dict[str, Any], origin: str, warn: Warn = print_warning) -> TrainYaml:
    """The file's fields as ADS reads them; unknown keys warned about and ignored, as ADS ignores them."""
    try:
        train = TrainYaml.model_validate(data)
    except ValidationError as exc:
        raise CloudDDPError(
            f"{origin}: {describe_fields(exc)}. (An Oracle ADS train.yaml; the ADS table in docs/providers/oci.md says what "
            f"cloudddp does with each field.)"
        ) from None
    unknown = list(train.unknown_fields(""))
    if unknown:
        warn(
            f"{origin}: {', '.join(unknown)}: not a field of ADS's distributed spec; ADS ignores unknown fields, "
            f"and so does cloudddp (check the spelling)."
        )
    return train


def spec_dict_from_ads(data: dict[str, Any], origin: str, warn: Warn = print_warning) -> dict[str, Any]:
    """The JobSpec fields (a dict for `build_spec`) an ADS `kind: distributed` YAML describes.

    `warn` receives one message per place where ADS and cloudddp differ (default: stderr).
    """
    train = read_train_yaml(data, origin, warn)
    cluster, runtime = train.spec.cluster.spec, train.spec.runtime.spec
    if cluster.ephemeral is not None:
        warn(f"{origin}: spec.cluster.spec.ephemeral is ignored: a cloudddp cluster always ends with its job.")
    source_dir = Path(origin).parent if origin and Path(origin).suffix in (".yaml", ".yml") else Path(".")
    args = [str(arg) for arg in runtime.args or []]
    warn_about_split_arguments(args, origin, warn)
    return {
        "name": train.job_name(origin, warn),
        "entry_point": runtime.entry_point,
        "args": args,
        "source_dir": str(source_dir) if str(source_dir) else ".",
        "nodes": cluster.node_count(origin, warn),
        "environment": cluster.environment(origin, env_dict(runtime.env)),
        "oci": train.oci_settings(origin, warn),
    }
