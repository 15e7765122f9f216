"""`cloudddp`: launch, watch and stop DDP jobs on any provider from one command line.

Every bad input ends here as one paragraph on stderr and exit code 2 (`CloudDDPError`),
never a traceback. `launch` and `Estimator.fit` share `cloudddp.session.run_job`.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

from cloudddp import job_index, metrics_plot, providers, stage_cli, terminal
from cloudddp.demo_data import write_demo_dataset
from cloudddp.elastic import is_count, parse_nodes
from cloudddp.errors import CloudDDPError, print_error
from cloudddp.job_list import attempts_lines, job_table, refresh
from cloudddp.json_output import list_json, request_json, status_json, submitted_json
from cloudddp.metrics import DEFAULT_METRICS, FORMATS, definition_problem, job_samples, render
from cloudddp.providers import registry
from cloudddp.providers.registry import Option
from cloudddp.redact import redact, redact_log_line, redact_named_value, secret_values
from cloudddp.session import JobRecord, run_job
from cloudddp.tensorboard import log_location
from cloudddp.tensorboard import serve as serve_tensorboard
from cloudddp.terminal import APP_SETTINGS, CONTEXT

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

app = typer.Typer(
    help="Run a PyTorch DDP training script on SageMaker, OCI Data Science, Kubernetes (Kubeflow), Slurm, PBS or a local multi-node emulation.",
    add_completion=True,  # --install-completion / --show-completion: bash, zsh, fish, PowerShell
    **APP_SETTINGS,
)
err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


def version() -> str:
    """The installed distribution's version (importlib.metadata), else the package's own `__version__`."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("cloudddp")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        from cloudddp import __version__

        return __version__


def print_version(value: bool) -> None:
    if value:
        print(f"cloudddp {version()}")
        raise typer.Exit(0)


@app.callback()
def root(
    show_version: Annotated[
        bool | None,
        typer.Option("--version", "-V", help="print the version and exit", callback=print_version, is_eager=True),
    ] = None,
) -> None:
    pass


def shows_providers(argv: list[str]) -> bool:
    """False when this process is `cloudddp stage ...` or the top-level help, which show no provider option.

    Reading every provider's declaration (their settings models, pydantic) costs ~0.17 s of imports,
    a large part of a no-op `cloudddp stage`. Only the console script's own command line counts
    (argv[0] `cloudddp`, or `-c` as in `python -c "from cloudddp.console import main; main()" --help`):
    code importing this module for `app` (tests, notebooks) always gets every provider's options."""
    program = Path(argv[0]).name if argv else ""
    if program not in ("cloudddp", "-c") or COMPLETING in os.environ:  # a shell asking completions: all of them
        return True
    args = argv[1:]
    top_level = (["--help"], ["-h"], ["--version"], ["-V"])
    return not (args[:1] == ["stage"] or args in top_level or (program == "cloudddp" and not args))


COMPLETING = "_CLOUDDDP_COMPLETE"  # click's variable for the `cloudddp` program's shell completion
PROVIDERS_SHOWN = shows_providers(sys.argv)


def provider_help() -> str:
    if not PROVIDERS_SHOWN:
        return "the provider's name"
    try:
        return "one of: " + ", ".join(registry.names())
    except CloudDDPError:
        return "the provider's name"  # the registry's own error is shown by main()


def providers_epilog() -> str:
    """`launch --help` ends with each provider's one-line summary, from its declaration."""
    if not PROVIDERS_SHOWN:
        return ""
    try:
        lines = [f"  [bold]{name}[/bold]: {info.summary}" for name, info in registry.providers().items()]
    except CloudDDPError:
        return ""
    return "[bold]Providers[/bold]\n\n" + "\n\n".join(lines)


ProviderOpt = Annotated[str, typer.Option("--provider", "-p", help=provider_help())]
RunsDirOpt = Annotated[
    str | None,
    typer.Option("--runs-dir", help="local: the runs folder the job was launched with (default ./cloudddp-runs)"),
]


FormatOpt = Annotated[
    str, typer.Option("--format", help="text, or json: one document for programs (its schema: the CLI reference)")
]


def wants_json(format: str) -> bool:
    if format not in ("text", "json"):
        raise CloudDDPError(f"--format {format!r}: choose text or json.")
    return format == "json"


ContextOpt = Annotated[
    str | None,
    typer.Option("--context", help="settings from this context of ~/.config/cloudddp/config.yaml (or "
                                   "CLOUDDDP_CONTEXT; default: the context named default)"),
]  # fmt: skip


# Without a metavar, typer's usage line names an argument by its parameter (`{job}`); help texts say JOB, SCRIPT.
JobArg = Annotated[
    str, typer.Argument(metavar="JOB", help="job id, run folder or 'latest' (the newest launched from here)")
]
FollowUpProviderOpt = Annotated[
    str | None,
    typer.Option("--provider", "-p", help="the job's provider (default: the one it was launched on, from the job "
                                          "index; else local)"),
]  # fmt: skip


def find_job(job: str, provider: str | None, runs_dir: str | None) -> tuple[Any, str]:
    """The provider and job id that status/logs/cancel JOB mean: JOB as the job index knows it (an id, a name, or
    `latest`: the newest job launched, `-p` narrowing it), else as the provider (local by default) takes it."""
    if runs_dir is None:
        entry = job_index.find(job, provider)
        if entry is not None:
            return provider_for(entry.provider, None), entry.job_id
    return provider_for(provider or registry.DEFAULT_PROVIDER, runs_dir), job


def provider_for(provider: str, runs_dir: str | None) -> Any:
    """The provider for status/logs/cancel; a local run launched with --runs-dir is found in that folder."""
    if runs_dir is None:
        return providers.get_provider(provider)
    if not registry.get(provider).runs_on_this_machine:
        keeps = [name for name, info in registry.providers().items() if info.runs_on_this_machine]
        raise CloudDDPError(f"--runs-dir {runs_dir!r}: only the {' and '.join(keeps)} provider keeps its runs in a "
                            "folder here.")  # fmt: skip
    return providers.get_provider(provider, runs_dir=runs_dir)


def pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    """`["a=1", "b=2"]` -> {"a": "1", "b": "2"}, with an error naming the flag and item."""
    result: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:  # `HF_TOKEN:abc` is shown as `HF_TOKEN:***`: a mistyped separator is no reason to leak
            raise CloudDDPError(f"{flag} {redact_named_value(item)!r}: expected KEY=VALUE.")
        if key in result and result[key] != value:  # one of the two would be dropped without a word
            raise CloudDDPError(f"{flag} {key}=... is given twice, with different values; give it once.")
        result[key] = value
    return result


def split_entry_point(script: str, source_dir: str | None) -> tuple[str, str]:
    """`sources/train.py` -> ("sources", "train.py") unless --source-dir says otherwise.

    With --source-dir, the script is placed within that folder by the spec (`spec.within_source_dir`), as a YAML
    spec's and the Estimator's are: a file inside it, named from here in whatever spelling, becomes its path within
    it, and a script outside it is refused."""
    if source_dir is None:
        path = Path(script)
        return (str(path.parent) if str(path.parent) else "."), path.name
    return source_dir, script


def drop_none(values: dict[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict):
            value = drop_none(value)
            if not value:
                continue
        if value is None or value == []:
            continue
        cleaned[key] = value
    return cleaned


# -- provider options: one click option per distinct flag of the registered providers ----------


@dataclass
class ProviderFlag:
    """A flag as the CLI sees it: declared by one or more providers, each mapping it to a field."""

    option: Option
    fields: dict[str, str]  # provider -> settings field
    panel: str
    helps: dict[str, str]

    def parameter(self) -> inspect.Parameter:
        if len(self.helps) == 1:
            text = next(iter(self.helps.values()))
        else:
            text = "; ".join(f"{name}: {help_ or self.option.field}" for name, help_ in self.helps.items())
        return option_parameter(self.option, text, self.panel)


def option_parameter(option: Option, text: str, panel: str | None = None) -> inspect.Parameter:
    """The keyword parameter typer reads `option` from (a bool: `--flag/--no-flag`; key_value: repeatable K=V)."""
    decls = [f"{option.flag}/{option.off_flags}" if option.type is bool else option.flag]
    if option.short:
        decls.append(option.short)
    annotation: Any = list[str] | None if option.multiple or option.key_value else option.type | None
    info = typer.Option(None, *decls, help=text, metavar=option.metavar, rich_help_panel=panel, show_default=False)
    return inspect.Parameter(option.param_name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


# The spec's own fields as launch's options. The help is the field's description, so `cloudddp schema`, the docs and
# --help say one thing; `help` is given only where the command line reads the value differently.
SPEC_OPTIONS = (
    Option("--name", "name"),
    Option("--source-dir", "source_dir", help="folder shipped with the job (default: the script's)"),
    Option("--nodes", "nodes", help="number of nodes, or MIN:MAX (elastic)"),
    Option("--min-nodes", "min_nodes", type=int, help="elastic: start with this many nodes (--nodes is the most)"),
    Option("--max-restarts", "max_restarts", type=int),
    Option("--rdzv-backend", "rdzv_backend"),
    Option("--rdzv-endpoint", "rdzv_endpoint"),
    Option("--nproc-per-node", "nproc_per_node"),
    Option("--input", "inputs", key_value=True, short="-i", metavar="CHANNEL=URI"),
    Option("--output", "output"),
    Option("--checkpoint", "checkpoint"),
    Option("--env", "environment", key_value=True, short="-e", metavar="NAME=VALUE"),
    # Kept as typed (`-H version=1.10` stays "1.10", `run_id=007` stays "007"): the script parses its arguments.
    Option("--hyperparameter", "hyperparameters", key_value=True, short="-H", metavar="KEY=VALUE"),
    Option("--metric", "metrics", key_value=True, metavar="NAME=REGEX", help="read from the logs: the first group"),
    Option("--max-runtime", "max_runtime", type=int),
)


def spec_option_parameters() -> list[inspect.Parameter]:
    from cloudddp.spec import JobSpecBase  # pydantic's models: not for `cloudddp --help` or `stage` (shows_providers)

    def text(option: Option) -> str:
        said = option.help or JobSpecBase.model_fields[option.field].description or ""
        return said + (" (repeatable)" if option.key_value or option.multiple else "")

    return [option_parameter(option, text(option)) for option in SPEC_OPTIONS]


def spec_overrides(given: dict[str, Any]) -> dict[str, Any]:
    """The spec fields that launch's SPEC_OPTIONS set, taken out of `given`, as the spec reads them."""
    overrides: dict[str, Any] = {}
    for option in SPEC_OPTIONS:
        value = given.pop(option.param_name, None)
        overrides[option.field] = pairs(value, option.flag) if option.key_value else value
    overrides["nproc_per_node"] = read_nproc(overrides["nproc_per_node"])
    return {**overrides, **parse_nodes(overrides["nodes"], overrides["min_nodes"])}  # --nodes 2:3: min 2, most 3


def provider_flags() -> dict[str, ProviderFlag]:
    """Every provider's options, by parameter name; a flag shared by providers (--region) is one option."""
    flags: dict[str, ProviderFlag] = {}
    for info in registry.providers().values():
        for option in info.options:
            known = flags.get(option.param_name)
            if known is None:
                panel = f"{info.display_title} options"
                flags[option.param_name] = ProviderFlag(option, {info.name: option.field}, panel, {})
            elif (known.option.type, known.option.multiple, known.option.key_value) != (
                option.type, option.multiple, option.key_value
            ):  # fmt: skip
                raise CloudDDPError(
                    f"the providers {', '.join(known.fields)} and {info.name} declare {option.flag} differently "
                    "(type, multiple or key_value); one flag must mean one kind of value."
                )
            else:
                known.fields[info.name] = option.field
                known.panel = "Options of several providers"
            flags[option.param_name].helps[info.name] = option.help
    return flags


def with_options(command: Callable[..., Any], after: str, *added: list[inspect.Parameter]) -> Callable[..., Any]:
    """`command` with the `added` keyword parameters after its parameter `after`, typer reading them into `**given`."""
    signature = inspect.signature(command, eval_str=True)
    fixed = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    names = [p.name for group in added for p in group]
    clash = sorted({name for name in names if names.count(name) > 1} | (set(names) & {p.name for p in fixed}))
    if clash:
        raise CloudDDPError(f"a provider declares an option that `cloudddp launch` has already: {', '.join(clash)}.")
    at = [p.name for p in fixed].index(after) + 1
    among = [p.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD) for group in added for p in group]
    command.__signature__ = signature.replace(parameters=[*fixed[:at], *among, *fixed[at:]])  # type: ignore[attr-defined]
    return command


def provider_section(provider: str, given: dict[str, Any], flags: dict[str, ProviderFlag]) -> dict[str, Any]:
    """The `--provider` section from its flags; a flag of another provider only is an error, not ignored."""
    section: dict[str, Any] = {}
    for name, value in given.items():
        if value is None or value == []:
            continue
        flag = flags[name]
        if provider not in flag.fields:
            raise CloudDDPError(
                f"{flag.option.flag} is an option of {' and '.join(flag.fields)}, not of --provider {provider}."
            )
        section[flag.fields[provider]] = pairs(value, flag.option.flag) if flag.option.key_value else value
    return section


def named_provider(args: list[str]) -> str | None:
    """The provider the command line names (`-p X`, `-pX`, `--provider X`, `--provider=X`), before any `--`."""
    for index, arg in enumerate(args):
        if arg == "--":
            return None
        if arg in ("-p", "--provider"):
            return args[index + 1] if index + 1 < len(args) else None
        if arg.startswith("--provider="):
            return arg.partition("=")[2]
        if arg.startswith("-p") and not arg.startswith("--"):
            return arg[2:]
    return None


class ProviderCommand(TyperCommand):
    """`launch`/`render` whose --help and shell completion show only the named provider's options with the
    common ones (`launch -p oci --help`); without `-p`, every provider's. Parsing always sees every option, so
    another provider's flag gets provider_section's error naming its provider, not click's "no such option"."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        ctx.meta["cloudddp.provider"] = named_provider(args)  # before --help's eager callback reads it
        return super().parse_args(ctx, args)

    def get_help(self, ctx: typer.Context) -> str:
        with self.only_provider(ctx, ctx.meta.get("cloudddp.provider")):
            return super().get_help(ctx)

    def shell_complete(self, ctx: typer.Context, incomplete: str) -> list[Any]:
        source = ctx.get_parameter_source("provider")  # typer's own copy of click's ParameterSource: by name
        given = source is not None and source.name == "COMMANDLINE"
        with self.only_provider(ctx, ctx.params.get("provider") if given else None):
            return super().shell_complete(ctx, incomplete)

    @contextlib.contextmanager
    def only_provider(self, ctx: typer.Context, provider: str | None) -> Iterator[None]:
        ctx.meta["cloudddp.only"] = provider if provider in registry.names() else None
        try:
            yield
        finally:
            ctx.meta["cloudddp.only"] = None

    def get_params(self, ctx: typer.Context) -> list[Any]:
        params = super().get_params(ctx)
        only = ctx.meta.get("cloudddp.only")
        if not only:
            return params
        return [p for p in params if p.name not in PROVIDER_FLAGS or only in PROVIDER_FLAGS[p.name].fields]


# -- launch / render --------------------------------------------------------------------------


def script_overrides(script: str | None, module: bool, source_dir: str | None, args: list[str] | None) -> dict:
    """What the positional arguments say: the script (or module), its folder and its arguments."""
    overrides: dict[str, Any] = {}
    if script:
        overrides["source_dir"], overrides["entry_point"] = (
            split_entry_point(script, source_dir) if not module else (source_dir or ".", script)
        )
        overrides["module"] = module or None
    elif source_dir:
        overrides["source_dir"] = source_dir
    if args:
        overrides["args"] = list(args)
    return overrides


def read_nproc(value: str | None) -> int | str | None:
    """`--nproc-per-node 2` is the number 2; gpu, cpu and auto stay words (and anything else is the spec's error)."""
    return int(value) if value and is_count(value) else value


def check_spec_file(file: Path | None) -> None:
    if file is not None and file.suffix not in (".yaml", ".yml", ".json"):
        raise CloudDDPError(f"--file {str(file)!r}: expected a .yaml job spec.")


def load_launch_spec(provider: str, file: Path | None, overrides: dict[str, Any], context: str | None) -> JobSpec:
    """The job spec: the flags over --file, over the context, project file and variables (cloudddp/config.py)."""
    from cloudddp.config import job_spec

    if file is None and "entry_point" not in overrides:
        raise CloudDDPError("no training script: give one (cloudddp launch SCRIPT) or a job spec (-f job.yaml).")
    check_spec_file(file)
    return job_spec(provider, file, overrides, context=context)


def print_compose(provider: str, spec: JobSpec) -> None:
    """`render --compose`: the provider's docker-compose local test (its declaration names the function)."""
    writer = registry.get(provider).compose
    if not writer:
        able = [name for name, info in registry.providers().items() if info.compose]
        raise CloudDDPError(f"render --compose writes a provider's docker-compose local test; {provider} has none "
                            f"(use it with --provider {' or '.join(able) or 'one that has'}).")  # fmt: skip
    print(registry.load_factory(writer)(spec), end="")


# Long only because typer reads the command line from this signature (one parameter per flag, the spec's and the
# providers' added to it: with_options); the body is five steps, each a function above.
@app.command(cls=ProviderCommand, context_settings=CONTEXT, epilog=providers_epilog())
def launch(
    ctx: typer.Context,
    script: Annotated[
        str | None, typer.Argument(metavar="SCRIPT", help="training script (or module with -m)", show_default=False)
    ] = None,
    script_args: Annotated[
        list[str] | None, typer.Argument(metavar="ARGS...", help="arguments for the script, after --")
    ] = None,
    provider: ProviderOpt = registry.DEFAULT_PROVIDER,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="job spec YAML (flags override it)")] = None,
    context: ContextOpt = None,
    module: Annotated[bool, typer.Option("--module", "-m", help="SCRIPT is a Python module")] = False,
    # Here typer reads the spec's fields (SPEC_OPTIONS), then these, then the providers' (PROVIDER_FLAGS).
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the exact request as YAML; submit nothing")] = False,
    wait: Annotated[bool, typer.Option(help="wait for the job to finish")] = True,
    logs: Annotated[bool, typer.Option(help="stream the job's logs while waiting")] = True,
    stop_on_interrupt: Annotated[bool, typer.Option(help="Ctrl-C stops the job without asking")] = False,
    compose: Annotated[
        bool, typer.Option("--compose", help="OCI: print a docker-compose file (the ADS local test)")
    ] = False,
    format: Annotated[
        str, typer.Option("--format", help="json: the request (--dry-run, render) or the submitted job (--no-wait)")
    ] = "text",
    target: Annotated[
        str | None, typer.Option("--target", help="with targets: in the spec, run on this one only (N from 1, or NAME)")
    ] = None,
    **given: Any,  # the spec's fields (SPEC_OPTIONS) and the providers' own options (PROVIDER_FLAGS)
) -> None:
    """Launch a training job.

    [bold]Examples[/bold]

      cloudddp demo-data demo-data && cloudddp launch --provider local --nodes 2 -i train=demo-data sources/train_ddp.py -- --epochs 2

      cloudddp launch -p sagemaker --instance-type ml.g5.12xlarge --nodes 2 -i train=./data sources/train_ddp.py

      cloudddp launch -p oci -f train.yaml --dry-run
    """
    overrides = spec_overrides(given)
    overrides.update(script_overrides(script, module, overrides.pop("source_dir"), script_args))
    registry.get(provider)  # an unknown --provider is the first error, before the spec is read
    overrides[provider] = provider_section(provider, given, PROVIDER_FLAGS)
    spec = load_launch_spec(provider, file, drop_none(overrides), context)
    dry_run = dry_run or ctx.info_name == "render"
    if spec.targets or target:
        from cloudddp.failover import launch_targets

        follow = {"wait": wait, "logs": logs, "stop_on_interrupt": stop_on_interrupt}
        raise typer.Exit(launch_targets(spec, file, drop_none(overrides), context, target, dry_run, follow))
    if compose:
        print_compose(provider, spec)
        raise typer.Exit(0)
    if wants_json(format):
        raise typer.Exit(launch_json(provider, spec, dry_run, wait))
    code = run_job(provider, spec, dry_run=dry_run, wait=wait, logs=logs, stop_on_interrupt=stop_on_interrupt)
    raise typer.Exit(code)


def launch_json(provider: str, spec: Any, dry_run: bool, wait: bool) -> int:
    """`launch --format json`: the request (a dry run) or the submitted job (--no-wait), one JSON document."""
    if not dry_run and wait:
        raise CloudDDPError("--format json prints one document: use it with --dry-run (or render) or --no-wait; a "
                            "launch that waits prints the job's logs.")  # fmt: skip
    record = JobRecord()
    run_job(provider, spec, dry_run=dry_run, wait=False, say=lambda _: None, record=record)
    assert record.request is not None
    print(request_json(record.request) if dry_run else submitted_json(record.handle, spec.name), end="")  # type: ignore[arg-type]
    return 0


# A broken provider declaration must not break `cloudddp` at import: main() reports it.
REGISTRY_ERROR: CloudDDPError | None = None
try:
    PROVIDER_FLAGS = provider_flags() if PROVIDERS_SHOWN else {}
except CloudDDPError as exc:
    REGISTRY_ERROR, PROVIDER_FLAGS = exc, {}
SPEC_PARAMETERS = spec_option_parameters() if PROVIDERS_SHOWN else []
with_options(launch, "module", SPEC_PARAMETERS, [flag.parameter() for flag in PROVIDER_FLAGS.values()])


RENDER_HELP = """Print what `launch` would send, submitting nothing (launch's --dry-run); takes every launch option.

  cloudddp render -p oci -f train.yaml

  cloudddp render -p oci --compose -f train.yaml > docker-compose.yaml   (the Oracle ADS local test)
"""
app.command("render", cls=ProviderCommand, help=RENDER_HELP, context_settings=CONTEXT, epilog=providers_epilog())(
    launch
)


@app.command()
def status(
    job: JobArg = "latest",
    provider: FollowUpProviderOpt = None,
    runs_dir: RunsDirOpt = None,
    format: FormatOpt = "text",
) -> None:
    """Show a job's state, per node where the platform says.

    [bold]Examples[/bold]

      cloudddp status latest

      cloudddp status cloudddp-runs/cloudddp-job-20261122-101500

      cloudddp status -p sagemaker my-training-job-20261122-101500
    """
    as_json = wants_json(format)
    chosen, job = find_job(job, provider, runs_dir)
    current = chosen.status(job)
    if as_json:
        print(status_json(chosen.name, current), end="")
        raise typer.Exit(0)
    # The reason may quote the job's own output (`[rank1]: ValueError: ...`): text, not rich markup.
    reason = f" ({escape(current.reason)})" if current.reason else ""
    out.print(f"{escape(current.job_id)}: [bold]{current.state}[/bold]{reason}")
    for node, state in current.nodes.items():
        out.print(f"  {escape(node)}: {escape(state)}")
    if current.artifacts:
        out.print(f"  artifacts: {escape(current.artifacts)}")
    entry = job_index.find(job, provider) if runs_dir is None else None
    if entry is not None and entry.run:  # a job with targets: each target it tried (docs/guides/failover.md)
        out.print("attempts:")
        for line in attempts_lines(entry.run):
            out.print(f"  {escape(line)}")
    raise typer.Exit(0)


@app.command()
def logs(
    job: JobArg = "latest",
    provider: FollowUpProviderOpt = None,
    # -f as tail, kubectl and docker logs take it; -F, the first spelling, still works.
    follow: Annotated[bool, typer.Option("--follow", "-f", "-F", help="keep streaming until the job ends")] = False,
    runs_dir: RunsDirOpt = None,
) -> None:
    """Print a job's logs, every line prefixed with its node (none yet: says so, with the job's state).

    [bold]Examples[/bold]

      cloudddp logs latest -f

      cloudddp logs -p oci ocid1.datasciencejobrun.oc1.iad.xxxx
    """
    # A local run's logs were masked as they were written (providers/local/log_pump.py). Elsewhere (Slurm, PBS) the
    # job's secret values are stored nowhere cloudddp can read them back; they usually come from the user's shell
    # (`-e HF_TOKEN=$HF_TOKEN`; Slurm and PBS pass them by name from the submitting one): hide this shell's too.
    secrets = secret_values(os.environ)
    (chosen, job), printed = find_job(job, provider, runs_dir), False
    for line in chosen.logs(job, follow=follow):
        print(redact_log_line(line, secrets), flush=True)
        printed = True
    if not printed:  # say so, rather than print nothing and exit 0
        try:
            state = f" (the job is {chosen.status(job).state})"
        except CloudDDPError:
            state = ""
        print(f"cloudddp: no log lines for {job} yet{state}.", file=sys.stderr, flush=True)


@app.command()
def metrics(
    job: JobArg = "latest",
    provider: FollowUpProviderOpt = None,
    metric: Annotated[
        list[str] | None, typer.Option("--metric", help="NAME=REGEX instead of the defaults (repeatable)")
    ] = None,
    runs_dir: RunsDirOpt = None,
    format: Annotated[str, typer.Option("--format", help="text: a table; json or csv: every value found")] = "text",
    plot: Annotated[
        Path | None, typer.Option("--plot", help="also draw a chart per metric into FILE.png (the plot extra)")
    ] = None,
) -> None:
    """A job's metrics, read from its logs as SageMaker's metric definitions read them (first group: the value).

    Without --metric: the job's own (launch --metric, the spec's `metrics`), else the epoch lines of
    sources/train_ddp.py (loss, train_acc, val_acc, images_per_sec).

    [bold]Examples[/bold]

      cloudddp metrics latest

      cloudddp metrics latest --metric "loss=loss: ([0-9.]+)" --format csv

      cloudddp metrics latest --plot metrics.png
    """
    if format not in FORMATS:
        raise CloudDDPError(f"--format {format!r} is not one of {', '.join(FORMATS)}.")
    if plot is not None:
        metrics_plot.require_matplotlib()  # before the logs are read: exit 2, naming the extra
    given = pairs(metric, "--metric")
    for name, regex in given.items():
        if problem := definition_problem(name, regex):
            raise CloudDDPError(f"--metric {name}=...: {problem}.")
    indexed = job_index.find(job, provider) if runs_dir is None else None
    definitions = given or (indexed.metrics if indexed else None) or DEFAULT_METRICS  # the job's own, as launched
    chosen, job = find_job(job, provider, runs_dir)
    found = job_samples(chosen, job, definitions)  # the job side's history where reachable here, else the logs
    if plot is not None:
        drawn = metrics_plot.plot(found, plot, job)
        print(f"cloudddp: {drawn} chart(s) in {plot}", file=sys.stderr, flush=True)
    if not found and format == "text":
        print(f"cloudddp: no values of {', '.join(definitions)} in the logs of {job}.", file=sys.stderr, flush=True)
        raise typer.Exit(0)
    print(render(found, format), end="", flush=True)


@app.command()
def tensorboard(
    job: JobArg = "latest",
    provider: FollowUpProviderOpt = None,
    runs_dir: RunsDirOpt = None,
    serve: Annotated[bool, typer.Option("--serve", help="start TensorBoard on them (needs tensorboard)")] = False,
) -> None:
    """Where a job's TensorBoard logs are (a local run's event files, SageMaker's TensorBoardOutputConfig).

    [bold]Examples[/bold]

      cloudddp tensorboard latest

      cloudddp tensorboard latest --serve
    """
    chosen, job = find_job(job, provider, runs_dir)
    where = log_location(chosen, job)
    if where is None:
        print(f"cloudddp: no TensorBoard logs known for {job} (no event files in its run here, no "
              f"TensorBoardOutputConfig).", file=sys.stderr, flush=True)  # fmt: skip
        raise typer.Exit(1)
    print(where, flush=True)
    if serve:
        raise typer.Exit(serve_tensorboard(where))


@app.command()
def cancel(
    job: Annotated[str, typer.Argument(metavar="JOB", help="job id, run folder or 'latest'")],
    provider: FollowUpProviderOpt = None,
    runs_dir: RunsDirOpt = None,
) -> None:
    """Stop a running job (the training script gets SIGTERM and can checkpoint).

    [bold]Examples[/bold]

      cloudddp cancel latest

      cloudddp cancel -p sagemaker my-training-job-20261122-101500
    """
    chosen, job = find_job(job, provider, runs_dir)
    chosen.cancel(job)
    out.print(f"asked {chosen.name} to stop {job}")


@app.command("list")
def list_jobs(
    provider: Annotated[str | None, typer.Option("--provider", "-p", help="only this provider's jobs")] = None,
    limit: Annotated[int, typer.Option(help="the newest LIMIT jobs")] = 20,
    every: Annotated[bool, typer.Option("--all", help="every job the index holds")] = False,
    deadline: Annotated[float, typer.Option(help="seconds to wait for the providers' states")] = 3.0,
    format: FormatOpt = "text",
) -> None:
    """List the jobs launched from here, newest first, with their state now (`ps` is the same).

    States come from each job's provider, asked in parallel; one that does not answer within the deadline shows
    the state last seen. The index is $XDG_STATE_HOME/cloudddp/jobs.sqlite3 (default ~/.local/state/cloudddp).

    [bold]Examples[/bold]

      cloudddp list

      cloudddp list -p sagemaker --all
    """
    as_json = wants_json(format)
    entries = job_index.entries(provider, None if every else limit)
    answered = refresh(entries, deadline)
    print(list_json(entries, answered) if as_json else job_table(entries, answered), end="")

    # Threads may still wait on a provider that never answered: tearing the interpreter down around them (and the
    # SDK clients they hold) took ~0.9 s more (benchmarks/list_jobs.py). The index is closed; nothing is left to do.
    terminal.exit_now()


app.command("ps", help="The same as `list`.", hidden=True)(list_jobs)


@app.command("schema")
def schema() -> None:
    """Print the job spec's JSON Schema, for an editor that completes and checks job YAML files.

    [bold]Examples[/bold]

      cloudddp schema > cloudddp-job.schema.json

      (VS Code's YAML extension: `# yaml-language-server: $schema=cloudddp-job.schema.json` atop the job file)
    """
    import json

    from cloudddp.job_spec import job_spec_model

    document = {"$schema": "https://json-schema.org/draft/2020-12/schema", **job_spec_model().model_json_schema()}
    print(json.dumps(document, indent=2))


config_app = typer.Typer(help="Where launch's settings come from.", no_args_is_help=True, context_settings=CONTEXT)
app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show(
    provider: ProviderOpt = registry.DEFAULT_PROVIDER,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="a job spec YAML, as launch -f reads it")] = None,
    context: ContextOpt = None,
) -> None:
    """Print each setting launch would use, and where it came from.

    Layers, the higher winning: flags > the job spec file (-f) > CLOUDDDP_<PROVIDER>_<FIELD> variables > the
    project file ./cloudddp.yaml > the context (~/.config/cloudddp/config.yaml) > built-in defaults.

    [bold]Examples[/bold]

      cloudddp config show -p sagemaker

      cloudddp config show -p slurm --context hpc -f job.yaml
    """
    from cloudddp.config import Layer, config_path, layers, provenance, spec_from

    registry.get(provider)
    check_spec_file(file)
    # launch's positional argument, under every layer: a stand-in, shown as one where no layer names a script
    script = Layer("launch's SCRIPT argument", {"entry_point": "SCRIPT"})
    below = [script, *layers(provider, file, context)]
    rows = provenance(provider, spec_from(below, {}, None), below, {})
    masked = redact(dict((name, value) for name, value, _ in rows))  # the one policy: secret-looking names
    out.print(f"config file: {escape(str(config_path()))}")
    width = max(len(name) for name, _, _ in rows)
    for name, _, origin in rows:
        out.print(f"  {escape(name.ljust(width))}  {escape(repr(masked[name]))}  [dim]({escape(origin)})[/dim]")


@app.command("demo-data")
def demo_data(
    directory: Annotated[Path, typer.Argument(metavar="DIRECTORY", help="where to write train/ and val/")],
    train_per_class: Annotated[int, typer.Option(help="training images per class", min=1)] = 160,
    val_per_class: Annotated[int, typer.Option(help="validation images per class", min=1)] = 32,
    seed: Annotated[int, typer.Option(help="random seed (same seed, same bytes)")] = 0,
) -> None:
    """Write a small deterministic two-class image dataset (ImageFolder layout). No download."""
    counts = write_demo_dataset(directory, train_per_class=train_per_class, val_per_class=val_per_class, seed=seed)
    out.print(f"wrote {counts['train']} training and {counts['val']} validation images to {directory}")


stage_cli.register(app)  # console.py runs `cloudddp stage` on an app of its own: the same command, lighter start


@app.command()
def ui(
    host: Annotated[
        str, typer.Option(help="address to serve on; another than 127.0.0.1 lets others on the network in")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port (0: a free one)")] = 0,
    open_browser: Annotated[bool, typer.Option("--open/--no-open", help="open the page in a browser")] = True,
) -> None:
    """A dashboard of the jobs launched from here, on every provider: states, training curves, log tails, cancel.

    Served on this machine; the URL it prints holds a token that lets a browser in (keep it to yourself). Ctrl-C stops it.
    """
    from cloudddp.ui.server import serve

    def say(url: str) -> None:
        print(f"cloudddp ui: {url}", flush=True)  # on the terminal only: the server logs nothing
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    serve(host, port, say)


def __getattr__(name: str) -> Any:
    """`click_command`: the app as a click command, for mkdocs-click (docs/reference/cli.md); built on first use."""
    if name == "click_command":
        return typer.main.get_command(app)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """The console script: usage errors are click's (exit 2); ours are one paragraph, exit 2."""
    try:
        if REGISTRY_ERROR is not None:
            raise REGISTRY_ERROR
        app()
    except CloudDDPError as exc:
        print_error(exc)
        sys.exit(exc.exit_code)
