"""The job spec: one description of a training job, for every provider.

Loaded from YAML (`cloudddp launch -f job.yaml`) and/or command-line flags (flags win),
or built by `Estimator(...)`. Unknown fields are errors, so a typo never passes silently.
"""

from __future__ import annotations

import difflib
import os
import re
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from cloudddp.cluster.environment import channel_variable
from cloudddp.errors import CloudDDPError
from cloudddp.metrics import definition_problem
from cloudddp.redact import REDACTED, is_secret_name, redact, redact_entries

if TYPE_CHECKING:
    from typing_extensions import LiteralString  # typing's from Python 3.11 (pydantic requires this package)

NprocPerNode = int | Literal["gpu", "cpu", "auto"]
Scalar = str | int | float | bool


class Section(BaseModel):
    """A part of the job spec; unknown fields are errors. Provider settings subclass it."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_true_or_false_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        # Pydantic's lax mode reads true as 1, so `nodes: true` would run one node without a word.
        field = cls.model_fields.get(info.field_name or "")
        if (
            isinstance(value, bool)
            and field
            and takes(field.annotation, (int, float))
            and not takes(field.annotation, (bool,))
        ):
            raise ValueError(f"must be a number, not {str(value).lower()}")
        return value


def takes(annotation: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a field's type is one of `kinds`, or a union (or Optional) holding one."""
    return annotation in kinds or any(takes(arg, kinds) for arg in typing.get_args(annotation))


class FailoverSettings(Section):
    """How far a job with `targets:` looks for capacity (docs/guides/failover.md)."""

    pending_timeout: int = Field(
        default=600, ge=1,
        description="seconds a submitted job may stay pending, for a reason that says it cannot be scheduled (Slurm "
        "PartitionDown, Kubernetes Unschedulable...), before the next target is tried",
    )  # fmt: skip
    max_hops: int = Field(default=3, ge=0, description="moves to a next target at most; 0: the first target only")
    deadline: int = Field(default=3600, ge=1, description="seconds from launch after which no further target is tried")


class TargetBase(Section):
    """One entry of `targets:`: where to try the job, and what differs there. The fields it sets win over the job's
    common ones; what neither sets comes from the context. `job_spec.model_for` adds each provider's section."""

    name: str | None = Field(default=None, description="what --target NAME picks; default: the provider's name")
    provider: str
    nodes: int | None = Field(default=None, ge=1)
    nproc_per_node: NprocPerNode | None = None

    @field_validator("nproc_per_node")
    @classmethod
    def _positive(cls, value: NprocPerNode | None) -> NprocPerNode | None:
        if isinstance(value, int) and value < 1:
            raise ValueError("must be at least 1 (or gpu, cpu, auto)")
        return value

    @model_validator(mode="after")
    def _own_section_only(self) -> TargetBase:
        others = [field for field in self.model_fields_set if field in type(self).sections and field != self.provider]
        if others:
            raise field_errors("target_section", [(self.provider, f"a {self.provider} target sets only its own "
                               f"section ({self.provider}:), not {', '.join(sorted(others))}:")], ("provider",))  # fmt: skip
        return self

    @property
    def label(self) -> str:
        return self.name or self.provider

    def overrides(self) -> dict[str, Any]:
        """What the target sets, as a partial job spec (its section only as far as given)."""
        given = self.model_dump(exclude_unset=True, exclude={"name", "provider"})
        return {key: value for key, value in given.items() if value is not None}

    sections: typing.ClassVar[tuple[str, ...]] = ()


class JobSpecBase(Section):
    """Everything about a job that does not depend on where it runs.

    `JobSpec` is this plus one section per registered provider (`spec.local`, `spec.sagemaker`,
    ...), built from the registry on first use (see `job_spec_model`).
    """

    # Each description is also `cloudddp launch`'s help for the field's flag (cli.py SPEC_OPTIONS) and the schema's.
    name: str = Field(default="cloudddp-job", description="job name")
    entry_point: str
    module: bool = False
    args: list[str] = []
    source_dir: str = Field(default=".", description="folder shipped with the job; the entry point is a file in it")
    nodes: int = Field(default=1, ge=1, description="number of nodes (with min_nodes: the most)")
    # Elastic mode (cloudddp/elastic.py): set min_nodes and the job runs on min_nodes..nodes nodes.
    min_nodes: int | None = Field(default=None, ge=1, description="elastic: start with this many nodes")
    max_restarts: int = Field(default=0, ge=0, description="elastic: times the nodes may re-form after a failure")
    rdzv_backend: Literal["c10d", "etcd-v2"] = Field(default="c10d", description="elastic rendezvous: c10d or etcd-v2")
    rdzv_endpoint: str | None = Field(
        default=None, validate_default=True, description="etcd-v2: the etcd server's HOST:PORT"
    )
    nproc_per_node: NprocPerNode | None = Field(default=None, description="processes per node: N, gpu, cpu or auto")
    inputs: dict[str, str] = Field(default={}, description="channel -> folder or URI (s3://, oci://) the job reads")
    output: str | None = Field(default=None, description="where the model/artifacts go")
    checkpoint: str | None = Field(default=None, description="checkpoint folder or URI (resumes from it)")
    environment: dict[str, str] = Field(default={}, description="variables for the job")
    hyperparameters: dict[str, Scalar] = Field(default={}, description="passed to the script as --key value")
    metrics: dict[str, str] = Field(
        default_factory=dict,
        description="NAME -> REGEX, read from every log line as SageMaker's MetricDefinitions read them (the first "
        "group is the value); none: cloudddp's defaults for sources/train_ddp.py's epoch lines (`cloudddp metrics`)",
    )
    targets: list[TargetBase] = Field(
        default_factory=list,
        description="where to run, in order of preference: each a provider, its section and any of nodes and "
        "nproc_per_node; a capacity or quota error moves the job to the next (docs/guides/failover.md)",
    )
    failover: FailoverSettings = Field(default_factory=FailoverSettings)
    max_runtime: int | None = Field(
        default=None, ge=1,
        description="seconds; not given: the platform's own limit (SageMaker 24 h, as the SDK v2 sends; none on OCI; "
        "the partition's on Slurm, the queue's on PBS; 24 h on Kubernetes and the local provider)",
    )  # fmt: skip

    @field_validator("targets")
    @classmethod
    def _targets_named_once(cls, value: list[TargetBase]) -> list[TargetBase]:
        labels = [target.label for target in value]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(f"two targets are called {twice[0]!r}: give each a name of its own (name: ...)")
        return value

    @field_validator("name")
    @classmethod
    def _name_is_a_label(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}", value):
            raise ValueError("must be 1-63 letters, digits or hyphens, starting with a letter or digit")
        return value

    @field_validator("inputs")
    @classmethod
    def _channel_names(cls, value: dict[str, str]) -> dict[str, str]:
        for channel, where in value.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", channel):
                raise ValueError(f"channel name {channel!r} must be letters, digits, '.', '_' or '-'")
            if not where.strip():  # Path("") is the current folder: it would be staged whole
                raise ValueError(f"channel {channel!r} has an empty path; give a folder, or an s3:// or oci:// URI")
        # One variable holds one folder: `train` and `TRAIN` (or `a-b` and `a_b`) would leave the script one of them.
        seen: dict[str, str] = {}
        for channel in value:
            variable = channel_variable(channel)
            if variable in seen:
                raise ValueError(
                    f"channels {seen[variable]!r} and {channel!r} would reach the script as one variable, "
                    f"{variable}; rename one of them"
                )
            seen[variable] = channel
        return value

    @field_validator("metrics")
    @classmethod
    def _metric_definitions(cls, value: dict[str, str]) -> dict[str, str]:
        for name, regex in value.items():
            if problem := definition_problem(name, regex):
                raise ValueError(problem)
        return value

    @field_validator("output", "checkpoint")
    @classmethod
    def _not_empty(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("is empty; give a folder or a URI, or leave it out")
        return value

    @field_validator("nproc_per_node")
    @classmethod
    def _positive_nproc(cls, value: NprocPerNode | None) -> NprocPerNode | None:
        if isinstance(value, int) and value < 1:  # torchrun would refuse it on the nodes, after submission
            raise ValueError("must be at least 1 (or gpu, cpu, auto)")
        return value

    @field_validator("min_nodes")
    @classmethod
    def _at_most_nodes(cls, value: int | None, info: ValidationInfo) -> int | None:
        nodes = info.data.get("nodes")
        if value is not None and nodes is not None and value > nodes:
            raise ValueError(f"is more than nodes={nodes}, the most nodes an elastic job takes")
        return value

    @field_validator("max_restarts")
    @classmethod
    def _restarts_need_elastic(cls, value: int, info: ValidationInfo) -> int:
        if value and "min_nodes" in info.data and info.data["min_nodes"] is None:  # absent: min_nodes failed itself
            raise ValueError(
                "applies to elastic jobs only (nodes MIN:MAX, whose nodes re-form after a failure); a fixed-size "
                "job fails as a whole. Give a node range (--nodes 2:4) or drop max_restarts"
            )
        return value

    @field_validator("rdzv_endpoint")
    @classmethod
    def _etcd_needs_an_endpoint(cls, value: str | None, info: ValidationInfo) -> str | None:
        backend = info.data.get("rdzv_backend", "c10d")
        if "min_nodes" in info.data and info.data["min_nodes"] is None and (value or backend != "c10d"):
            raise ValueError(
                f"rdzv_backend={backend!r} and rdzv_endpoint apply to elastic jobs only (nodes MIN:MAX); a "
                "fixed-size job meets at its first node. Give a node range (--nodes 2:4) or drop them"
            )
        if backend == "etcd-v2" and not value:
            raise ValueError("rdzv_backend etcd-v2 needs the etcd server's HOST:PORT here")
        return value

    @field_validator("environment")
    @classmethod
    def _variable_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [(name, problem) for name, text in value.items() if (problem := variable_problem(name, text))]
        if bad:
            raise field_errors("variable_name", bad)
        return value

    @field_validator("hyperparameters")
    @classmethod
    def _hyperparameter_names(cls, value: dict[str, Scalar]) -> dict[str, Scalar]:
        bad = [(name, problem) for name, setting in value.items() if (problem := hyperparameter_problem(name, setting))]
        if bad:
            raise field_errors("hyperparameter_name", bad)
        return value

    @model_validator(mode="after")
    def _entry_point_in_source_dir(self) -> JobSpecBase:
        # Here, not in one door: the CLI, a YAML spec and the Estimator must all send the nodes the same path.
        try:
            if self.module:
                require_module_name(self.entry_point)
            else:
                self.entry_point = within_source_dir(self.entry_point, self.source_dir)
        except ValueError as exc:
            raise field_errors("entry_point", [(self.entry_point, str(exc))], ("entry_point",)) from None
        return self

    def entry_path(self) -> Path:
        return Path(self.source_dir) / self.entry_point

    def require_source(self) -> None:
        """The script and its folder exist here (checked before anything is uploaded or started)."""
        if not self.module and not self.entry_path().is_file():
            what = "is a folder, not a script" if self.entry_path().is_dir() else "does not exist"
            raise CloudDDPError(
                f"entry_point {self.entry_point!r}: the training script {str(self.entry_path())!r} {what} "
                f"(source_dir={self.source_dir!r})."
            )
        if not Path(self.source_dir).is_dir():
            raise CloudDDPError(f"source_dir {self.source_dir!r} is not a folder.")

    @typing.overload
    def runtime_limit(self, platform_default: int) -> int: ...
    @typing.overload
    def runtime_limit(self, platform_default: None) -> int | None: ...
    def runtime_limit(self, platform_default: int | None) -> int | None:
        """The one rule for run-time limits: the job's max_runtime where it gives one, else the platform's own
        default, passed by each provider (None: the platform's own limit applies, cloudddp sends none)."""
        return self.max_runtime if self.max_runtime is not None else platform_default

    def script_args(self) -> list[str]:
        """The script's arguments: `args`, then hyperparameters as --key value."""
        extra: list[str] = []
        for key, value in self.hyperparameters.items():
            extra += [f"--{key}", str(value)]
        return [*self.args, *extra]


def field_errors(kind: LiteralString, bad: list[tuple[Any, str]], location: tuple[str, ...] = ()) -> ValidationError:
    """One error per (offending value, message), shown as `field: message (got value)`.

    Raised in a validator, pydantic adds them to the spec's errors at the field being validated (`location` ()) or,
    from a model validator, at `location`; the value shown is the one at fault, not the whole field."""
    details = [
        InitErrorDetails(type=PydanticCustomError(kind, "{message}", {"message": message}), loc=location, input=got)
        for got, message in bad
    ]
    return ValidationError.from_exception_data("JobSpec", details)


def name_problem(name: str) -> str | None:
    """What keeps `name` from being a variable's (or a --option's) name anywhere: "empty", "equals" or "nul".

    Only what no platform takes: POSIX gives the environment as `name=value` strings whose names "shall not
    contain the character '='" and no string holds a NUL (IEEE Std 1003.1-2017, XBD chapter 8.1), and
    CPython's os.putenv refuses an empty name as well. Kubernetes' relaxed rule (any printable ASCII but '=',
    IsRelaxedEnvVarName in k8s.io/apimachinery) and SageMaker's ([a-zA-Z_][a-zA-Z0-9_]*) are stricter; their
    providers check their own."""
    if not name:
        return "empty"
    if "=" in name:
        return "equals"
    return "nul" if "\0" in name else None


VARIABLE_PROBLEMS = {
    "empty": "a variable's name is empty: no process can be given a variable without one",
    "equals": "a variable's name holds '=', which the environment reads as the end of the name (NAME=value): no "
    "process can be given it",
    "nul": "a variable's name holds a NUL character, which ends a string in the environment: no process can be "
    "given it",
}
HYPERPARAMETER_PROBLEMS = {
    "empty": "a hyperparameter's name is empty: the script would be given '--' (which ends its options) and the "
    "value as an argument",
    "equals": "a hyperparameter's name holds '=': the script would read --NAME=... as that option's value, and "
    "SageMaker's SM_HP_<NAME> variable cannot be named so; give the value as the value (lr: 0.1)",
    "nul": "a hyperparameter's name holds a NUL character, which no command line can carry",
}


def variable_problem(name: str, value: str) -> str | None:
    """Why the environment cannot carry the variable `name`=`value`, else None (the value is never shown)."""
    problem = name_problem(name)
    if problem:
        return VARIABLE_PROBLEMS[problem]
    if "\0" in value:
        return "this variable's value holds a NUL character, which ends a string in the environment"
    return None


def hyperparameter_problem(name: str, value: Scalar) -> str | None:
    """Why the script cannot be given `--name value`, else None (the value is never shown)."""
    problem = name_problem(name)
    if problem:
        return HYPERPARAMETER_PROBLEMS[problem]
    if "\0" in str(value):
        return "this hyperparameter's value holds a NUL character, which no command line can carry"
    return None


def require_module_name(module: str) -> None:
    """`python -m` takes a module's name: `train.py` is a file's, and python runs train as a module, then fails."""
    if module.endswith(".py"):
        name = module.removesuffix(".py").replace("/", ".")
        raise ValueError(
            f"with module true (-m) it names a module, and {module!r} is a file's name: python -m takes a module "
            f"name ({name!r}), not a file. Give the module's name, or run the file without -m / module: true"
        )


def within_source_dir(entry_point: str, source_dir: str) -> str:
    """The script's path within source_dir, the one rule of the CLI, a YAML spec and the Estimator.

    A script named from here (absolute, or relative to this folder, in whatever spelling) that lies in source_dir
    becomes its path within it; any other name is one within source_dir already, as SageMaker takes `entry_point`
    within `source_dir`. A script outside source_dir is a ValueError: only source_dir is shipped to the nodes,
    which run the script from there (this machine's absolute path does not exist in a container)."""
    path = Path(entry_point)
    if path.is_absolute() or path.is_file():
        inside = relative_within(path, Path(source_dir))
        if inside is not None:
            return inside
    if path.is_absolute() or Path(os.path.normpath(entry_point)).parts[:1] == (os.pardir,):
        where = Path(os.path.abspath(Path(source_dir) / entry_point))
        raise ValueError(
            f"the script {str(where)!r} is outside source_dir {source_dir!r} ({os.path.abspath(source_dir)}): only "
            f"source_dir is shipped with the job, and its nodes run the script from there. Move the script into "
            f"source_dir, or give the folder holding it as source_dir ({str(where.parent)!r})"
        )
    return entry_point


def relative_within(path: Path, folder: Path) -> str | None:
    """`path` as a path inside `folder`, compared as spelled and then with links resolved; None when outside."""
    spelled = (Path(os.path.abspath(path)), Path(os.path.abspath(folder)))
    for there, base in (spelled, (path.resolve(), folder.resolve())):
        try:
            return there.relative_to(base).as_posix()
        except ValueError:
            continue
    return None


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` wins; nested dicts (the provider sections) merge key by key."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and key not in ("environment", "inputs"):
            merged[key] = deep_merge(merged[key], value)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def describe_errors(error: ValidationError, origin: str, model: type[BaseModel] | None = None) -> str:
    """A job spec's errors as one paragraph naming where the spec came from."""
    return f"invalid job spec in {origin}: {describe_fields(error, model)}."


def fields_at(model: type[BaseModel] | None, path: Sequence[Any]) -> list[str]:
    """The field names of the (nested) model at `path` under `model`; [] where that is not a model."""
    for part in path:
        if isinstance(part, int):  # an item of a list (`targets.0`): the list's model holds on
            continue
        field = model.model_fields.get(str(part)) if model else None
        model = model_in(field.annotation) if field else None
        if model is None:
            return []
    return list(model.model_fields) if model else []


def model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds: itself, or the one in its list or Optional (`list[Target]`, `Settings | None`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((found for arg in typing.get_args(annotation) if (found := model_in(arg))), None)


def describe_fields(error: ValidationError | Sequence[Any], model: type[BaseModel] | None = None) -> str:
    """Pydantic's errors as `field.path: message (got value)`, joined by "; " (the one translator:
    the job spec and the ADS train.yaml models both render their errors with it). With `model`, an unknown
    field gets a did-you-mean from the fields at its place."""
    parts = []
    for item in error.errors() if isinstance(error, ValidationError) else error:
        location = ".".join(str(p) for p in item["loc"]) or "(top level)"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(item["loc"][-1]), fields_at(model, item["loc"][:-1]), n=1)
            hint = f", did you mean {close[0]!r}? (see" if close else " (check the spelling; see"
            message = f"unknown field{hint} `cloudddp launch --help`)"
        shown = "" if item["type"] == "missing" else f" (got {shown_value(item)})"
        parts.append(f"{location}: {message}{shown}")
    return "; ".join(parts)


# Errors whose value must not be shown: a validator raises PydanticCustomError(SECRET_VALUE, ...) when the value
# belongs to a secret-looking name that is not in the error's location (ADS's `env: [{name, value}]`).
SECRET_VALUE = "secret_value"


# Fields that name their values: given in another shape (`environment: [HF_TOKEN=abc]`, or a list of
# `{name, value}` as docker-compose, Kubernetes and ADS write one), the error shows each entry's name, not its
# value when the name looks secret; neither that name nor the field's is in the error's location.
NAMED_VALUE_FIELDS = ("environment", "hyperparameters")


def shown_value(item: Any) -> str:
    """The offending value as an error shows it: *** under a secret-looking name, URL passwords hidden."""
    location = [str(part) for part in item["loc"]]
    if item["type"] == SECRET_VALUE or any(is_secret_name(part) for part in location):
        return REDACTED
    if item["type"] == "dict_type" or next(iter(location), "") in NAMED_VALUE_FIELDS:
        return repr(redact_entries(item.get("input")))
    return repr(redact(item.get("input")))


class SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's core schema for booleans, integers and floats.

    PyYAML follows YAML 1.1, where yes/no/on/off/y/n are booleans too: an environment variable or a
    channel named `on` became the key True, and `DEBUG: off` the value False. YAML 1.1 also reads
    digits separated by colons as base 60 (`walltime: 36:00:00` became 129600, refused as no walltime;
    an environment value `05:30` became 330), a leading zero as octal (`seed: 0700` became 448, where
    the script given `--seed 0700` reads 700) and drops underscores (`1_000` became 1000). YAML 1.2's
    core schema (yaml.org/spec/1.2.2 section 10.3.2) has none of these: `0700` is 700, `0o700` is
    octal, `0x1F` hex, `1e3` a float, and `36:00:00`, `on` and `1_000` are the words written.

    A key given twice in one mapping is an error, as YAML requires keys to be unique (section 3.2.1.1);
    PyYAML kept the last silently, so a second `hyperparameters:` block dropped the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *base` merges keys that the mapping's own may override
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first_line.get(key)
            except TypeError:  # an unhashable key: the constructor below refuses it
                continue
            if seen is not None:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found the key {key!r} a second time (first on line {seen + 1})", key_node.start_mark,
                )  # fmt: skip
            first_line[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


BOOL_TAG, INT_TAG, FLOAT_TAG = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in (BOOL_TAG, INT_TAG, FLOAT_TAG)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
# The core schema's regular expressions (section 10.3.2), in its order: int before float.
SpecLoader.add_implicit_resolver(BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
SpecLoader.add_implicit_resolver(
    INT_TAG, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
SpecLoader.add_implicit_resolver(
    FLOAT_TAG,
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def construct_core_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """An integer as YAML 1.2 reads it: decimal even with leading zeros, 0o octal, 0x hex.

    PyYAML's constructor reads `0700` as octal and cannot read `0o700`; an explicit `!!int` in
    another form (`!!int 0b101`) is still PyYAML's."""
    text = str(loader.construct_scalar(node))
    if re.fullmatch(r"[-+]?[0-9]+", text):
        return int(text, 10)
    if re.fullmatch(r"0o[0-7]+|0x[0-9a-fA-F]+", text):
        return int(text, 0)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


SpecLoader.add_constructor(INT_TAG, construct_core_int)


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's error in one line: the problem and where (its own text spans several, quoting the file)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if problem and mark is not None:
        context = getattr(exc, "context", None)
        return f"{problem}, at line {mark.line + 1}, column {mark.column + 1}" + (f" ({context})." if context else ".")
    return " ".join(str(exc).split())


def undecodable(path: Path, exc: yaml.reader.ReaderError) -> CloudDDPError:
    """A file PyYAML's reader refused, in one paragraph: which byte (or character) and where."""
    if exc.encoding == "unicode":  # decoded, but it holds a character YAML does not allow
        where = f"character U+{exc.character:04X} at character {exc.position} ({exc.reason})"
    else:
        where = f"byte 0x{exc.character:02x} at byte offset {exc.position} is not {exc.encoding} ({exc.reason})"
    return CloudDDPError(
        f"the job spec file {str(path)!r} cannot be read as YAML text: {where}. A YAML file must be UTF-8, "
        "or UTF-16 with a byte-order mark, as PyYAML and Oracle ADS read it; save it as UTF-8 "
        "(PowerShell: `Set-Content -Encoding utf8`, or `Out-File -Encoding utf8`)."
    )


def read_yaml(path: Path, loader: type[yaml.SafeLoader] = SpecLoader) -> dict[str, Any]:
    try:
        # Bytes: PyYAML's reader decodes them as ADS has it do (UTF-8, or UTF-16 with a byte-order mark).
        data = yaml.load(path.read_bytes(), Loader=loader)  # a safe loader: SafeLoader or SpecLoader
    except FileNotFoundError:
        raise CloudDDPError(f"the job spec file {str(path)!r} does not exist.") from None
    except OSError as exc:  # a folder, no permission, an unreadable disk
        raise CloudDDPError(f"the job spec file {str(path)!r} cannot be read: {exc.strerror or exc}.") from None
    except yaml.reader.ReaderError as exc:
        raise undecodable(path, exc) from None
    except yaml.YAMLError as exc:
        raise CloudDDPError(f"the job spec file {str(path)!r} is not valid YAML: {yaml_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CloudDDPError(
            f"the job spec file {str(path)!r} must hold a mapping of fields, got {type(data).__name__}."
        )
    return data
