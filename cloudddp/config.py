"""Where a job's settings come from: layers, each a partial job spec, merged with the higher one winning.

    flags (or the Estimator's arguments)  >  the job spec file (-f)  >  CLOUDDDP_<PROVIDER>_<FIELD> variables
    >  the project file (./cloudddp.yaml)  >  the context  >  the built-in defaults

A context is a named partial job spec in the user's config file, `$XDG_CONFIG_HOME/cloudddp/config.yaml`
(default `~/.config/cloudddp/config.yaml`):

    contexts:
      default: {sagemaker: {role: arn:aws:iam::123456789012:role/SageMakerRole, region: eu-west-1}}
      hpc: {nodes: 4, slurm: {partition: gpu}}

`--context NAME` (or CLOUDDDP_CONTEXT) selects one; `default` applies when none is selected. A variable names one
scalar setting of the chosen provider's section (CLOUDDDP_SAGEMAKER_ROLE is `sagemaker.role`); list and mapping
settings are not read from variables. Unknown keys in any layer are errors naming the layer, with a did-you-mean.
`cloudddp config show` prints each effective value and the layer it came from.
"""

from __future__ import annotations

import difflib
import os
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec, job_spec_model, load_spec_file
from cloudddp.providers import registry
from cloudddp.spec import deep_merge, describe_fields, read_yaml

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

CONTEXT_VARIABLE = "CLOUDDDP_CONTEXT"
DEFAULT_CONTEXT = "default"
PROJECT_FILE = "cloudddp.yaml"
CONFIG_KEYS = ("contexts",)


@dataclass(frozen=True)
class Layer:
    origin: str  # as errors and `config show` name it: "context 'hpc' (~/.config/cloudddp/config.yaml)"
    values: dict[str, Any]


def config_path() -> Path:
    config_home = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config_home) / "cloudddp" / "config.yaml"


def read_contexts() -> dict[str, dict[str, Any]]:
    """The config file's contexts ({} where there is no file)."""
    path = config_path()
    if not path.exists():
        return {}
    data = read_yaml(path)
    for key in data:
        if key not in CONFIG_KEYS:
            close = difflib.get_close_matches(str(key), CONFIG_KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"it holds only {', '.join(CONFIG_KEYS)}."
            raise CloudDDPError(f"{path}: unknown key {key!r}; {hint}")
    contexts = data.get("contexts") or {}
    if not isinstance(contexts, dict):
        raise CloudDDPError(f"{path}: `contexts` must map a context's name to its settings, got {contexts!r}.")
    for name, values in contexts.items():
        if not isinstance(values, dict):
            raise CloudDDPError(f"{path}: context {name!r} must be a mapping of job spec fields, got {values!r}.")
    return {str(name): values for name, values in contexts.items()}


def selected_context(flag: str | None, environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The context's name and what chose it (`--context`, the variable, or none given: `default` if it exists)."""
    if flag:
        return flag, "--context"
    if environ.get(CONTEXT_VARIABLE):
        return environ[CONTEXT_VARIABLE], CONTEXT_VARIABLE
    return None, ""


def context_layer(flag: str | None, environ: Mapping[str, str]) -> Layer | None:
    name, chosen_by = selected_context(flag, environ)
    contexts = read_contexts()
    if name is None:
        name = DEFAULT_CONTEXT
        if name not in contexts:
            return None
    elif name not in contexts:
        close = difflib.get_close_matches(name, list(contexts), n=1)
        known = f"did you mean {close[0]!r}? " if close else ""
        raise CloudDDPError(
            f"{chosen_by} {name!r}: no such context in {config_path()}; {known}"
            f"it has {', '.join(map(repr, contexts)) or 'none'}."
        )
    return Layer(f"context {name!r} ({config_path()})", contexts[name])


def project_layer(spec_file: Path | None) -> Layer | None:
    """`cloudddp.yaml` in the current folder, unless it is the job spec file itself (-f cloudddp.yaml)."""
    path = Path(PROJECT_FILE)
    if not path.is_file() or (spec_file is not None and spec_file.resolve() == path.resolve()):
        return None
    return Layer(f"the project file {path.resolve()}", read_yaml(path))


def is_scalar(annotation: Any) -> bool:
    """A str/int/float/bool setting (optional, or a Literal of them): one a variable's text can hold."""
    if typing.get_origin(annotation) is Literal:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return all(is_scalar(arg) for arg in typing.get_args(annotation))
    return annotation in (str, int, float, bool, type(None))


def variable_names(provider: str) -> dict[str, str]:
    """CLOUDDDP_<PROVIDER>_<FIELD> -> field, for the provider's scalar settings."""
    fields = registry.get(provider).settings.model_fields
    return {
        f"CLOUDDDP_{provider}_{name}".upper(): name for name, field in fields.items() if is_scalar(field.annotation)
    }


def environment_layer(provider: str, environ: Mapping[str, str]) -> Layer | None:
    found = {field: environ[variable] for variable, field in variable_names(provider).items() if environ.get(variable)}
    if not found:
        return None
    names = ", ".join(sorted(variable for variable, field in variable_names(provider).items() if field in found))
    return Layer(f"the environment ({names})", {provider: found})


def layers(
    provider: str, spec_file: Path | None, context: str | None, environ: Mapping[str, str] | None = None
) -> list[Layer]:
    """The layers under the flags, lowest first; each checked for unknown keys."""
    environ = os.environ if environ is None else environ
    found = [
        context_layer(context, environ),
        project_layer(spec_file),
        environment_layer(provider, environ),
        Layer(str(spec_file), load_spec_file(spec_file)) if spec_file else None,
    ]
    chosen = [layer for layer in found if layer is not None]
    for layer in chosen:
        check_keys(layer)
    return chosen


def check_keys(layer: Layer) -> None:
    """Unknown fields in a partial spec are errors naming its layer (the full spec's own check would name none)."""
    model = job_spec_model()
    try:
        model.model_validate(layer.values)
    except ValidationError as exc:
        unknown = [item for item in exc.errors() if item["type"] == "extra_forbidden"]
        if unknown:
            raise CloudDDPError(f"invalid settings in {layer.origin}: {describe_fields(unknown, model)}.") from None


def job_spec(
    provider: str,
    spec_file: Path | None,
    overrides: dict[str, Any],
    *,
    context: str | None = None,
    origin: str = "the command line",
) -> JobSpec:
    """The job spec every door launches: the layers with `overrides` (flags, or the Estimator's arguments) on top."""
    return spec_from(layers(provider, spec_file, context), overrides, origin)


def spec_from(below: list[Layer], overrides: dict[str, Any], origin: str | None) -> JobSpec:
    """`below` merged, lowest first, with `overrides` (from `origin`) on top; errors name every layer."""
    data: dict[str, Any] = {}
    for layer in below:
        data = deep_merge(data, layer.values)
    origins = [layer.origin for layer in below] + ([origin] if origin else [])
    return build_spec(deep_merge(data, overrides), " and ".join(origins))


def target_specs(
    spec: JobSpec,
    spec_file: Path | None,
    overrides: dict[str, Any],
    *,
    context: str | None = None,
    origin: str = "the command line",
) -> list[tuple[str, str, JobSpec]]:
    """(name, provider, job spec) for each of `spec.targets`, in order: the layers of the target's provider (its
    CLOUDDDP_<PROVIDER>_* variables), `overrides`, then what the target sets, on top (docs/guides/failover.md)."""
    found = []
    for index, target in enumerate(spec.targets):
        on_top = {**deep_merge(overrides, target.overrides()), "targets": []}
        where = f"{origin} and targets[{index}] ({target.label})"
        found.append(
            (target.label, target.provider, spec_from(layers(target.provider, spec_file, context), on_top, where))
        )
    return found


def leaves(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """`{"sagemaker": {"role": x}}` -> ("sagemaker.role", x): every setting's dotted name and value."""
    for key, value in values.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def provenance(
    provider: str, spec: BaseModel, below: list[Layer], overrides: dict[str, Any]
) -> list[tuple[str, Any, str]]:
    """(setting, effective value, where it came from) for the common fields and `provider`'s section."""
    source: dict[str, str] = {}
    for layer in [*below, Layer("the command line", overrides)]:
        for name, _ in leaves(layer.values):
            source[name] = layer.origin
    others = set(registry.names()) - {provider}
    shown = {key: value for key, value in spec.model_dump().items() if key not in others}
    return [(name, value, source.get(name, "default")) for name, value in leaves(shown)]
