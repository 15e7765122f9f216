"""The job spec as launched: the common fields (cloudddp.spec) plus one section per registered provider.

Above the providers (it reads their registry), below the session and the CLI. `JobSpec` is the model built from
the registry at run time; the type checker sees the built-in sections through the class under TYPE_CHECKING.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, create_model

from cloudddp.errors import CloudDDPError
from cloudddp.providers import registry
from cloudddp.spec import JobSpecBase, TargetBase, deep_merge, describe_errors, read_yaml

if TYPE_CHECKING:
    from cloudddp.providers.kubernetes.settings import KubernetesSettings
    from cloudddp.providers.local import LocalSettings
    from cloudddp.providers.oci import OCISettings
    from cloudddp.providers.pbs.settings import PBSSettings
    from cloudddp.providers.sagemaker import SageMakerSettings
    from cloudddp.providers.slurm.settings import SlurmSettings

    class JobSpec(JobSpecBase):
        """What the type checker sees of `job_spec_model()`: the built-in providers' sections, typed (a third
        party's section is an attribute of the model at run time only). tests/test_registry.py checks that
        these are the registry's built-ins and their settings classes."""

        local: LocalSettings
        sagemaker: SageMakerSettings
        oci: OCISettings
        kubernetes: KubernetesSettings
        slurm: SlurmSettings
        pbs: PBSSettings


def job_spec_model() -> type[JobSpecBase]:
    """`JobSpecBase` plus a `<name>: <settings>` section for every registered provider (one model per set of
    providers: registry.refresh() after installing one gives a new model)."""
    return model_for(tuple((name, info.settings) for name, info in registry.providers().items()))


@functools.cache
def model_for(sections: tuple[tuple[str, type[BaseModel]], ...]) -> type[JobSpecBase]:
    fields: dict[str, Any] = {name: (settings, Field(default_factory=settings)) for name, settings in sections}
    targets = list[target_model(sections)]  # type: ignore[misc]  # a model built at run time
    fields["targets"] = (
        targets,
        Field(default_factory=list, description=JobSpecBase.model_fields["targets"].description),
    )
    return create_model("JobSpec", __base__=JobSpecBase, __module__=__name__, **fields)


def target_model(sections: tuple[tuple[str, type[BaseModel]], ...]) -> type[TargetBase]:
    """A `targets:` entry: `provider` one of the registered, and each provider's section, partial (the fields it
    sets are merged over the job's: `TargetBase.overrides`)."""
    names = tuple(name for name, _ in sections)
    fields: dict[str, Any] = {name: (settings | None, None) for name, settings in sections}
    fields["provider"] = (Literal[names], ...)  # type: ignore[valid-type]
    model = create_model("Target", __base__=TargetBase, __module__=__name__, **fields)
    model.sections = names
    return model


def __getattr__(name: str) -> Any:
    """`JobSpec` at run time: the model of the providers registered now."""
    if name == "JobSpec":
        return job_spec_model()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_spec(data: dict[str, Any], origin: str = "the job spec") -> JobSpec:
    try:
        return job_spec_model().model_validate(data)  # type: ignore[return-value]  # the model JobSpec describes
    except ValidationError as exc:
        raise CloudDDPError(describe_errors(exc, origin, job_spec_model())) from None


def load_spec_file(path: str | Path) -> dict[str, Any]:
    """A job spec file's fields: cloudddp's own YAML, or an Oracle ADS `kind: distributed` train.yaml."""
    base = read_yaml(Path(path))
    if base.get("kind") == "distributed":
        # Oracle ADS `opctl` train.yaml: users migrate without rewriting their spec. Read with YAML 1.1's
        # booleans, as ADS reads it (yaml.load(.., yaml.SafeLoader): oracle/accelerated-data-science
        # ads/opctl/distributed/cmds.py at 0e785b9f).
        from cloudddp.providers.oci.ads import spec_dict_from_ads

        base = spec_dict_from_ads(read_yaml(Path(path), yaml.SafeLoader), str(path))
    return base


def load_spec(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> JobSpec:
    """A spec from a YAML file (optional) with command-line/Python overrides applied on top (no other layer:
    `cloudddp.config.job_spec` adds the context, project file and variables)."""
    base: dict[str, Any] = load_spec_file(path) if path else {}
    origin = f"{path} and the command line" if path else "the command line"
    if path and overrides is None:
        origin = str(path)
    return build_spec(deep_merge(base, overrides or {}), origin)
