"""`cloudddp`: launch, watch and stop DDP jobs on any provider from one command line.

Every bad input ends here as one paragraph on stderr and exit code 2 (`CloudDDPError`),
never a traceback. `launch` and `Estimator.fit` share `cloudddp.session.run_job`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from cloudddp.errors import CloudDDPError

app = typer.Typer(
    name="cloudddp",
    help="Run a PyTorch DDP training script on SageMaker, OCI Data Science or a local multi-node emulation.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)

ProviderOpt = Annotated[str, typer.Option("--provider", "-p", help="local, sagemaker or oci")]
SAGEMAKER = "SageMaker options"
OCI = "OCI options"
LOCAL = "Local options"


def pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    """`["a=1", "b=2"]` -> {"a": "1", "b": "2"}, with an error naming the flag and item."""
    result: dict[str, str] = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CloudDDPError(f"{flag} {item!r}: expected KEY=VALUE.")
        result[key] = value
    return result


def split_entry_point(script: str, source_dir: str | None) -> tuple[str, str]:
    """`sources/train.py` -> ("sources", "train.py") unless --source-dir says otherwise."""
    if source_dir is None:
        path = Path(script)
        return (str(path.parent) if str(path.parent) else "."), path.name
    try:
        return source_dir, str(Path(script).relative_to(source_dir))
    except ValueError:
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


@app.command(context_settings={"help_option_names": ["-h", "--help"]})
def launch(
    ctx: typer.Context,
    script: Annotated[
        str | None, typer.Argument(help="training script (or module with -m)", show_default=False)
    ] = None,
    script_args: Annotated[list[str] | None, typer.Argument(help="arguments for the script, after --")] = None,
    provider: ProviderOpt = "local",
    file: Annotated[Path | None, typer.Option("--file", "-f", help="job spec YAML (flags override it)")] = None,
    name: Annotated[str | None, typer.Option(help="job name")] = None,
    module: Annotated[bool, typer.Option("--module", "-m", help="SCRIPT is a Python module")] = False,
    source_dir: Annotated[str | None, typer.Option(help="folder shipped with the job (default: the script's)")] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", "--instance-count", help="number of nodes")] = None,
    nproc_per_node: Annotated[str | None, typer.Option(help="processes per node: N, gpu, cpu or auto")] = None,
    input: Annotated[list[str] | None, typer.Option("--input", "-i", help="CHANNEL=PATH_OR_URI (repeatable)")] = None,
    output: Annotated[str | None, typer.Option(help="where the model/artifacts go")] = None,
    checkpoint: Annotated[str | None, typer.Option(help="checkpoint folder or URI (resumes from it)")] = None,
    env: Annotated[list[str] | None, typer.Option("--env", "-e", help="K=V for the job (repeatable)")] = None,
    hyperparameter: Annotated[list[str] | None, typer.Option("--hyperparameter", "-H", help="k=v (repeatable)")] = None,
    max_runtime: Annotated[int | None, typer.Option(help="seconds before the platform stops the job")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the exact request as YAML; submit nothing")] = False,
    wait: Annotated[bool, typer.Option(help="wait for the job to finish")] = True,
    logs: Annotated[bool, typer.Option(help="stream the job's logs while waiting")] = True,
    stop_on_interrupt: Annotated[bool, typer.Option(help="Ctrl-C stops the job without asking")] = False,
    emulate: Annotated[
        str | None, typer.Option(help="sagemaker, oci, kubeflow, slurm or none", rich_help_panel=LOCAL)
    ] = None,
    runs_dir: Annotated[str | None, typer.Option(help="where local runs live", rich_help_panel=LOCAL)] = None,
    region: Annotated[str | None, typer.Option(help="AWS or OCI region", rich_help_panel=SAGEMAKER)] = None,
    instance_type: Annotated[str | None, typer.Option(rich_help_panel=SAGEMAKER)] = None,
    role: Annotated[
        str | None, typer.Option(help="IAM role ARN (or CLOUDDDP_SAGEMAKER_ROLE)", rich_help_panel=SAGEMAKER)
    ] = None,
    image: Annotated[str | None, typer.Option(help="container image URI", rich_help_panel=SAGEMAKER)] = None,
    framework_version: Annotated[str | None, typer.Option(rich_help_panel=SAGEMAKER)] = None,
    py_version: Annotated[str | None, typer.Option(rich_help_panel=SAGEMAKER)] = None,
    bucket: Annotated[str | None, typer.Option(help="staging bucket", rich_help_panel=SAGEMAKER)] = None,
    prefix: Annotated[str | None, typer.Option(help="staging key prefix", rich_help_panel=SAGEMAKER)] = None,
    spot: Annotated[bool | None, typer.Option("--spot/--on-demand", rich_help_panel=SAGEMAKER)] = None,
    max_wait: Annotated[
        int | None, typer.Option(help="spot: seconds to wait for capacity", rich_help_panel=SAGEMAKER)
    ] = None,
    checkpoint_s3: Annotated[str | None, typer.Option(rich_help_panel=SAGEMAKER)] = None,
    subnet: Annotated[list[str] | None, typer.Option(rich_help_panel=SAGEMAKER)] = None,
    security_group: Annotated[list[str] | None, typer.Option(rich_help_panel=SAGEMAKER)] = None,
    kms_key: Annotated[str | None, typer.Option(rich_help_panel=SAGEMAKER)] = None,
    network_isolation: Annotated[bool | None, typer.Option(rich_help_panel=SAGEMAKER)] = None,
    inter_container_encryption: Annotated[bool | None, typer.Option(rich_help_panel=SAGEMAKER)] = None,
    tag: Annotated[list[str] | None, typer.Option(help="K=V (repeatable)", rich_help_panel=SAGEMAKER)] = None,
    compartment: Annotated[str | None, typer.Option(help="compartment OCID", rich_help_panel=OCI)] = None,
    project: Annotated[str | None, typer.Option(help="Data Science project OCID", rich_help_panel=OCI)] = None,
    shape: Annotated[str | None, typer.Option(rich_help_panel=OCI)] = None,
    ocpus: Annotated[float | None, typer.Option(rich_help_panel=OCI)] = None,
    memory_gb: Annotated[float | None, typer.Option(rich_help_panel=OCI)] = None,
    block_storage_gb: Annotated[int | None, typer.Option(rich_help_panel=OCI)] = None,
    subnet_id: Annotated[str | None, typer.Option(rich_help_panel=OCI)] = None,
    log_group: Annotated[str | None, typer.Option(help="log group OCID", rich_help_panel=OCI)] = None,
    log: Annotated[str | None, typer.Option(help="log OCID", rich_help_panel=OCI)] = None,
    work_dir: Annotated[str | None, typer.Option(help="oci://bucket@namespace/prefix", rich_help_panel=OCI)] = None,
    profile: Annotated[str | None, typer.Option(help="~/.oci/config profile", rich_help_panel=OCI)] = None,
    config_file: Annotated[str | None, typer.Option(help="OCI config file", rich_help_panel=OCI)] = None,
    auth: Annotated[
        str | None, typer.Option(help="api_key, resource_principal or instance_principal", rich_help_panel=OCI)
    ] = None,
    compose: Annotated[
        bool, typer.Option("--compose", help="print a docker-compose file (local test)", rich_help_panel=OCI)
    ] = False,
) -> None:
    """Launch a training job.

    [bold]Examples[/bold]

      cloudddp launch --provider local --nodes 2 sources/train_ddp.py -- --epochs 2

      cloudddp launch -p sagemaker --instance-type ml.g5.12xlarge --nodes 2 -i train=./data sources/train_ddp.py

      cloudddp launch -p oci -f train.yaml --dry-run
    """
    from cloudddp.session import run_job
    from cloudddp.spec import load_spec

    overrides: dict[str, Any] = {}
    if script:
        overrides["source_dir"], overrides["entry_point"] = (
            split_entry_point(script, source_dir) if not module else (source_dir or ".", script)
        )
        overrides["module"] = module or None
    elif source_dir:
        overrides["source_dir"] = source_dir
    if script_args:
        overrides["args"] = list(script_args)
    nproc: int | str | None = nproc_per_node
    if nproc_per_node and nproc_per_node.isdigit():
        nproc = int(nproc_per_node)
    overrides.update(
        name=name, nodes=nodes, nproc_per_node=nproc, output=output, checkpoint=checkpoint,
        max_runtime=max_runtime, inputs=pairs(input, "--input"), environment=pairs(env, "--env"),
        # Kept as typed (`-H version=1.10` stays "1.10", `run_id=007` stays "007"): the script parses its arguments.
        hyperparameters=pairs(hyperparameter, "--hyperparameter"),
        local={"emulate": emulate, "runs_dir": runs_dir},
        sagemaker={
            "region": region, "instance_type": instance_type, "role": role, "image": image,
            "framework_version": framework_version, "py_version": py_version, "bucket": bucket, "prefix": prefix,
            "spot": spot, "max_wait": max_wait, "checkpoint_s3": checkpoint_s3, "subnets": subnet,
            "security_groups": security_group, "kms_key": kms_key, "network_isolation": network_isolation,
            "inter_container_encryption": inter_container_encryption, "tags": pairs(tag, "--tag"),
        },
        oci={
            "region": region, "compartment_id": compartment, "project_id": project, "shape": shape, "ocpus": ocpus,
            "memory_in_gbs": memory_gb, "block_storage_gb": block_storage_gb, "subnet_id": subnet_id,
            "log_group_id": log_group, "log_id": log, "work_dir": work_dir, "profile": profile,
            "config_file": config_file, "auth": auth, "image": image,
        },
    )  # fmt: skip
    if provider != "oci":
        overrides.pop("oci")
    if provider != "sagemaker":
        overrides.pop("sagemaker")
    overrides = drop_none(overrides)
    if file is None and "entry_point" not in overrides:
        raise CloudDDPError("launch needs a training script (cloudddp launch SCRIPT) or a job spec (-f job.yaml).")
    spec = load_spec(file, overrides) if file is None or file.suffix in (".yaml", ".yml", ".json") else None
    if spec is None:
        raise CloudDDPError(f"--file {str(file)!r}: expected a .yaml job spec.")
    if compose:
        if provider != "oci":
            raise CloudDDPError("render --compose writes the OCI (Oracle ADS) local test: use it with --provider oci.")
        from cloudddp.providers.oci.compose import compose_yaml

        print(compose_yaml(spec), end="")
        raise typer.Exit(0)
    dry_run = dry_run or ctx.info_name == "render"
    code = run_job(provider, spec, dry_run=dry_run, wait=wait, logs=logs, stop_on_interrupt=stop_on_interrupt)
    raise typer.Exit(code)


RENDER_HELP = """Print what `launch` would send, submitting nothing (launch's --dry-run); takes every launch option.

  cloudddp render -p oci -f train.yaml

  cloudddp render -p oci --compose -f train.yaml > docker-compose.yaml   (the Oracle ADS local test)
"""
app.command("render", help=RENDER_HELP, context_settings={"help_option_names": ["-h", "--help"]})(launch)


@app.command()
def status(
    job: Annotated[str, typer.Argument(help="job id, run folder or 'latest'")], provider: ProviderOpt = "local"
) -> None:
    """Show a job's state, per node where the platform says.

    [bold]Examples[/bold]

      cloudddp status latest

      cloudddp status cloudddp-runs/cloudddp-job-20261122-101500

      cloudddp status -p sagemaker my-training-job-20261122-101500
    """
    from cloudddp.providers import get_provider

    current = get_provider(provider).status(job)
    out.print(f"{current.job_id}: [bold]{current.state}[/bold]" + (f" ({current.reason})" if current.reason else ""))
    for node, state in current.nodes.items():
        out.print(f"  {node}: {state}")
    if current.artifacts:
        out.print(f"  artifacts: {current.artifacts}")
    raise typer.Exit(0)


@app.command()
def logs(
    job: Annotated[str, typer.Argument(help="job id, run folder or 'latest'")],
    provider: ProviderOpt = "local",
    follow: Annotated[bool, typer.Option("--follow", "-F", help="keep streaming until the job ends")] = False,
) -> None:
    """Print a job's logs, every line prefixed with its node.

    [bold]Examples[/bold]

      cloudddp logs latest --follow

      cloudddp logs -p oci ocid1.datasciencejobrun.oc1.iad.xxxx
    """
    from cloudddp.providers import get_provider

    for line in get_provider(provider).logs(job, follow=follow):
        print(line, flush=True)


@app.command()
def cancel(
    job: Annotated[str, typer.Argument(help="job id, run folder or 'latest'")], provider: ProviderOpt = "local"
) -> None:
    """Stop a running job (the training script gets SIGTERM and can checkpoint).

    [bold]Examples[/bold]

      cloudddp cancel latest

      cloudddp cancel -p sagemaker my-training-job-20261122-101500
    """
    from cloudddp.providers import get_provider

    get_provider(provider).cancel(job)
    out.print(f"asked {provider} to stop {job}")


@app.command("demo-data")
def demo_data(
    directory: Annotated[Path, typer.Argument(help="where to write train/ and val/")],
    train_per_class: Annotated[int, typer.Option(help="training images per class")] = 160,
    val_per_class: Annotated[int, typer.Option(help="validation images per class")] = 32,
    seed: Annotated[int, typer.Option(help="random seed (same seed, same bytes)")] = 0,
) -> None:
    """Write a small deterministic two-class image dataset (ImageFolder layout). No download."""
    from cloudddp.demo_data import write_demo_dataset

    counts = write_demo_dataset(directory, train_per_class=train_per_class, val_per_class=val_per_class, seed=seed)
    out.print(f"wrote {counts['train']} training and {counts['val']} validation images to {directory}")


from cloudddp.staging.cli import stage_command  # noqa: E402  (`cloudddp stage`; its options live there)

app.command("stage", context_settings={"help_option_names": ["-h", "--help"]})(stage_command)


def main() -> None:
    """The console script: usage errors are click's (exit 2); ours are one paragraph, exit 2."""
    try:
        app()
    except CloudDDPError as exc:
        # The message may hold brackets (JSON, hostlists): print it as plain text, not markup.
        err.print(Text.assemble(("error: ", "bold red"), str(exc)))
        sys.exit(exc.exit_code)
