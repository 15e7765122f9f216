"""The provider registry: every provider declares itself once, everything else is derived.

A provider is ONE folder. To add `--provider slurm`:

1. Create the sub-package `cloudddp/providers/slurm/`. Its `__init__.py` declares the provider
   and imports nothing heavy (no SDK: boto3, oci, kubernetes are imported inside the provider's
   own modules, only when the provider is created)::

       from cloudddp.providers.registry import Option, ProviderInfo
       from cloudddp.spec import Section

       class SlurmSettings(Section):
           '''The `slurm:` section of the job spec.'''
           partition: str | None = None
           time_limit: str | None = None

       PROVIDER = ProviderInfo(
           name="slurm",                                   # --provider slurm, spec section `slurm:`
           summary="Slurm batch jobs submitted with sbatch",  # one line for --help
           settings=SlurmSettings,
           options=(
               Option("--partition", "partition", help="Slurm partition"),
               Option("--time-limit", "time_limit", help="sbatch --time"),
           ),
           interrupt_stops_job=False,                      # Ctrl-C asks before stopping the job
           factory="cloudddp.providers.slurm.provider:SlurmProvider",  # imported only when used
       )

2. Put the `Provider` subclass (render / submit / status / logs / cancel, see
   `cloudddp.providers.base`) in `cloudddp/providers/slurm/provider.py`. The factory is called with the
   options (`runs_dir=` for a provider whose runs are on this machine): the class itself, or a function.

That is all: the job spec gets a `slurm:` section (`JobSpec.slurm`), `cloudddp launch --help`
shows a "Slurm options" group with `--partition` and `--time-limit`, `--provider slurm` and
`Estimator(provider="slurm", partition=...)` work, and a flag of another provider is refused.

What its request carries in clear (a manifest, a batch script, the job's environment) is declared too, as
`in_clear=InClear(fields=..., where=..., by_reference=...)` (cloudddp/secrets_policy.py): a secret there is
refused before rendering, by every door; without it nothing is refused and every secret is masked.

A provider outside this package registers the same `ProviderInfo` through the entry point
group `cloudddp.providers`, e.g. in its pyproject.toml::

    [project.entry-points."cloudddp.providers"]
    myslurm = "my_package.cloudddp_provider:PROVIDER"

Built-ins come first ("local", the default, then by name), then entry points by name; two
providers with one name are an error, as is a declaration that does not fit its settings.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.metadata
import importlib.util
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cloudddp.elastic import is_elastic, node_range
from cloudddp.errors import CloudDDPError
from cloudddp.secrets_policy import NOTHING_IN_CLEAR, SPEC_FIELDS, InClear

if TYPE_CHECKING:
    from pydantic import BaseModel

    from cloudddp.providers.base import Provider
    from cloudddp.spec import JobSpecBase

ENTRY_POINT_GROUP = "cloudddp.providers"
DEFAULT_PROVIDER = "local"
OPTION_TYPES = (str, int, float, bool)


@dataclass(frozen=True)
class Option:
    """One command-line flag of a provider, mapped to one field of its settings section.

    `Option("--instance-type", "instance_type")` makes `--instance-type X` set
    `spec.<provider>.instance_type = X`. `multiple`: repeatable, the field is a list.
    `key_value`: repeatable `K=V`, the field is a dict. `off_flag`: for a bool, the flag that
    sets False (`Option("--spot", "spot", type=bool, off_flag="--on-demand")`; default
    `--no-<flag>`). A flag left out leaves the field to the job spec file or its default.
    """

    flag: str
    field: str
    help: str = ""
    type: type = str
    multiple: bool = False
    key_value: bool = False
    off_flag: str | None = None
    short: str | None = None  # `-i` beside `--input`
    metavar: str | None = None  # what --help shows for the value (`CHANNEL=PATH_OR_URI`)

    @property
    def off_flags(self) -> str:
        """A bool's off switch: `off_flag`, else `--no-<flag>`."""
        return self.off_flag or f"--no-{self.flag.lstrip('-')}"

    @property
    def param_name(self) -> str:
        """The Python name of the flag (`--instance-type` -> `instance_type`)."""
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class ProviderInfo:
    """What a provider says about itself; see the module docstring for the recipe."""

    name: str
    summary: str
    settings: type[BaseModel]
    options: tuple[Option, ...] = ()
    interrupt_stops_job: bool = False
    factory: str | Callable[..., Provider] = ""
    supports_elastic: bool = False
    # The --help group's title ("SageMaker options"); default: the name, capitalised.
    title: str = ""
    # `render --compose`: "module:function" turning a job spec into a docker-compose file that runs the job's nodes
    # as containers on this machine (OCI: the Oracle ADS local test); "" where the provider has none.
    compose: str = ""
    # Its jobs are run folders on this machine, found again with `status/logs/cancel --runs-dir DIR` (its factory
    # takes runs_dir=).
    runs_on_this_machine: bool = False
    # What its request carries in clear, where the service stores or shows it (a manifest, a batch script, the
    # job's environment...): a secret there is refused, with `in_clear.by_reference` as the advice; anywhere else
    # it is only masked where cloudddp shows it (cloudddp/secrets_policy.py, applied in session.render).
    in_clear: InClear = NOTHING_IN_CLEAR
    # Its service applies the job spec's metric definitions itself (SageMaker's MetricDefinitions): the job side is
    # not asked to keep a metrics history (cloudddp/metrics.py, `with_history_asked`, in session.render).
    applies_metric_definitions: bool = False
    # The pip extra that installs the provider's SDK, for the "missing package" hint
    # (built-ins: the provider's name; third parties: their own distribution).
    install_hint: str = field(default="", compare=False)

    @property
    def display_title(self) -> str:
        return self.title or self.name.capitalize()

    def create(self, **options: Any) -> Provider:
        """The provider object; its SDK is imported here, with a clear error if it is missing."""
        try:
            factory = load_factory(self.factory) if isinstance(self.factory, str) else self.factory
            return factory(**options)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] != "cloudddp":
                hint = self.install_hint or f"pip install 'cloudddp[{self.name}]'"
                raise CloudDDPError(
                    f"the {self.name} provider needs the Python package {exc.name!r}: {hint}."
                ) from None
            raise


def load_factory(reference: str) -> Callable[..., Provider]:
    """`"package.module:create"` -> the callable."""
    module_name, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module_name), attribute or "create")  # type: ignore[no-any-return]


def check_declaration(info: Any, origin: str) -> ProviderInfo:
    """A declaration that does not fit is the provider author's error: say where and what."""
    from cloudddp.spec import Section

    if not isinstance(info, ProviderInfo):
        raise CloudDDPError(f"{origin}: expected a cloudddp ProviderInfo, got {type(info).__name__}.")
    if not isinstance(info.settings, type) or not issubclass(info.settings, Section):
        raise CloudDDPError(f"{origin}: ProviderInfo.settings must be a subclass of cloudddp.spec.Section.")
    if not info.name.isidentifier() or info.name != info.name.lower():
        raise CloudDDPError(f"{origin}: provider name {info.name!r} must be a lower-case Python identifier.")
    for option in info.options:
        if option.field not in info.settings.model_fields:
            raise CloudDDPError(
                f"{origin}: option {option.flag} sets {option.field!r}, which {info.settings.__name__} does not have."
            )
        if option.type not in OPTION_TYPES or not option.flag.startswith("--"):
            raise CloudDDPError(f"{origin}: option {option.flag}: a --flag of type str, int, float or bool.")
    if not info.factory:
        raise CloudDDPError(f"{origin}: ProviderInfo.factory is empty.")
    for path in info.in_clear.fields:
        section, _, name = path.partition(".")
        if path not in SPEC_FIELDS and (section != info.name or name not in info.settings.model_fields):
            raise CloudDDPError(
                f"{origin}: ProviderInfo.in_clear names {path!r}: one of {', '.join(SPEC_FIELDS)} or "
                f"'{info.name}.<a field of {info.settings.__name__}>'."
            )
    return info


def builtin_declarations() -> list[ProviderInfo]:
    """Every sub-package of cloudddp.providers that declares `PROVIDER` (adding a folder is enough)."""
    package = __name__.rpartition(".")[0]  # cloudddp.providers, imported before this module (no import back up)
    found = []
    for module in sorted(pkgutil.iter_modules(sys.modules[package].__path__), key=lambda m: m.name):
        if not module.ispkg or module.name.startswith("_"):
            continue
        origin = f"cloudddp/providers/{module.name}/__init__.py"
        declared = getattr(importlib.import_module(f"{package}.{module.name}"), "PROVIDER", None)
        if declared is None:
            # A folder being written: skipped here, named in the "unknown provider" error (see get).
            continue
        found.append(check_declaration(declared, origin))
        if declared.name != module.name:
            raise CloudDDPError(f"{origin}: PROVIDER.name is {declared.name!r}; it must be the folder's name.")
    return sorted(found, key=lambda info: (info.name != DEFAULT_PROVIDER, info.name))


def entry_point_declarations() -> list[ProviderInfo]:
    """Third-party providers: each entry point of the group `cloudddp.providers` loads a ProviderInfo."""
    found = []
    for entry in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        origin = f"entry point {entry.name} = {entry.value} (group {ENTRY_POINT_GROUP})"
        info = check_declaration(entry.load(), origin)
        if info.name != entry.name:
            raise CloudDDPError(f"{origin}: it declares the provider {info.name!r}; name the entry point the same.")
        found.append(info)
    return found


@functools.cache
def providers() -> dict[str, ProviderInfo]:
    """Every provider by name: built-ins first, then entry points (read once per process)."""
    registered: dict[str, ProviderInfo] = {}
    for info in [*builtin_declarations(), *entry_point_declarations()]:
        if info.name in registered:
            raise CloudDDPError(f"two providers are named {info.name!r}; uninstall or rename one.")
        registered[info.name] = info
    return registered


def refresh() -> None:
    """Forget what was found (tests that install a provider while the process runs)."""
    providers.cache_clear()  # the job spec's model follows (job_spec.job_spec_model is per set of providers)


def names() -> list[str]:
    return list(providers())


def get(name: str) -> ProviderInfo:
    """The declaration of `name`, or an error listing the providers there are."""
    registered = providers()
    if name not in registered:
        undeclared = ""
        folder = f"cloudddp.providers.{name}"
        # A provider being written; not shared code, which says `PROVIDER = None` (providers/batch).
        if (
            name.isidentifier()
            and importlib.util.find_spec(folder)
            and not hasattr(importlib.import_module(folder), "PROVIDER")
        ):
            undeclared = f" (cloudddp/providers/{name}/__init__.py declares no PROVIDER = ProviderInfo(...))"
        close = difflib.get_close_matches(name.lower(), list(registered), n=1, cutoff=0.6)
        guess = f" Did you mean {close[0]!r}?" if close else ""
        raise CloudDDPError(f"unknown provider {name!r}{undeclared}; choose one of: {', '.join(registered)}.{guess}")
    return registered[name]


def require_elastic_support(provider: str, spec: JobSpecBase) -> None:
    """An elastic spec on a provider that cannot run it is refused with the reason (its declaration says)."""
    if not is_elastic(spec) or get(provider).supports_elastic:
        return
    able = ", ".join(name for name, info in sorted(providers().items()) if info.supports_elastic)
    raise CloudDDPError(
        f"min_nodes={spec.min_nodes} (nodes {node_range(spec)}) asks for elastic training, which the {provider} "
        f"provider cannot run: its platform starts a fixed set of {spec.nodes} hosts and never adds one back. "
        f"Give a fixed node count (--nodes {spec.nodes}, no min_nodes) and resume from checkpoints after a "
        f"failure, or run elastic jobs with a provider that supports them ({able})."
    )
