"""`Estimator`: the notebook door to the same code as `cloudddp launch`.

    est = Estimator(provider="local", entry_point="train_ddp.py", source_dir="sources",
                    instance_count=2, hyperparameters={"epochs": 3})
    est.fit({"train": "./demo-data"})          # debug locally ...
    est = est.with_provider("sagemaker", role=..., instance_type="ml.g5.12xlarge")  # ... then switch one argument
    est.fit({"train": "s3://bucket/data"})

Provider-specific keyword arguments (role, instance_type, compartment_id, shape, ...)
go to that provider's section of the job spec; which providers and fields exist comes from
the provider registry. `instance_count` is the SageMaker-compatible name of the spec's `nodes`.
Elastic jobs take the CLI's settings: `nodes="2:3"` (or `nodes=3, min_nodes=2`), `max_restarts`,
`rdzv_backend` and `rdzv_endpoint`. `targets=[...]` (and `failover={...}`) run the job on the first target with
capacity, as a spec's `targets:` does at `cloudddp launch` (cloudddp/failover.py).
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any

from cloudddp.config import job_spec, target_specs
from cloudddp.elastic import parse_nodes
from cloudddp.errors import CloudDDPError
from cloudddp.failover import Failover, Target, print_requests, targets_from
from cloudddp.job_spec import JobSpec
from cloudddp.metrics import DEFAULT_METRICS, fields_of, job_samples, sample_rows
from cloudddp.providers import JobHandle, JobStatus, Provider, get_provider, registry
from cloudddp.providers.registry import require_elastic_support
from cloudddp.redact import job_secrets, redact_log_line
from cloudddp.session import JobRecord, render, run_job
from cloudddp.terminal import emit

Inputs = dict[str, str] | str | None


def channels(inputs: Inputs) -> dict[str, str]:
    """fit()'s inputs as channels: a dict of channel -> folder or URI, or one folder or URI, the channel
    "training", as in the SageMaker SDK's fit(inputs) (the drop-in's channels_of reads them through this)."""
    if inputs is None:
        return {}
    if isinstance(inputs, str):
        return {"training": inputs}
    if isinstance(inputs, dict):
        return dict(inputs)
    raise CloudDDPError(
        f"inputs={type(inputs).__name__}(...): pass a dict of channel name -> folder or URI (s3://, oci://), "
        "or one folder or URI for the channel 'training'."
    )


# `nodes` and `min_nodes` as the Estimator's errors name them (the CLI's say --nodes and --min-nodes).
ESTIMATOR_NODE_NAMES = ("nodes={!r}", "min_nodes={}")


def node_settings(nodes: int | str | None, instance_count: int | str | None, min_nodes: int | None) -> dict[str, Any]:
    """The spec's `nodes` and `min_nodes`, read as `cloudddp launch --nodes` reads them: "2:3" is elastic."""
    if nodes is not None and instance_count is not None and nodes != instance_count:
        raise CloudDDPError(
            f"Estimator got nodes={nodes!r} and instance_count={instance_count!r}: they are one setting "
            "(instance_count is the SageMaker SDK's name for nodes); pass one."
        )
    count = nodes if nodes is not None else instance_count
    if isinstance(count, str):  # "3" or "MIN:MAX"; anything else gets the CLI's error
        return {"min_nodes": min_nodes, **parse_nodes(count, min_nodes, ESTIMATOR_NODE_NAMES)}
    return {"nodes": count, "min_nodes": min_nodes}


def unknown_options(provider: str, unknown: list[str], fields: list[str]) -> CloudDDPError:
    """The error for keyword arguments that are neither the Estimator's own nor `provider`'s options, with where
    each one belongs if it belongs somewhere (fit's inputs, another provider, a near spelling)."""
    own = [name for name in inspect.signature(Estimator).parameters if name != "provider_options"]
    hints = [hint for name in unknown if (hint := unknown_option_hint(name, provider, [*own, *fields]))]
    return CloudDDPError(
        f"Estimator(provider={provider!r}) got unknown option(s) {', '.join(unknown)}: neither an Estimator "
        f"argument ({', '.join(own)}) nor an option of the {provider} provider ({', '.join(fields) or 'none'})"
        + "".join(f"; {hint}" for hint in hints)
        + "."
    )


def unknown_option_hint(name: str, provider: str, known: list[str]) -> str | None:
    """Where the unknown keyword `name` belongs, if anywhere this can tell."""
    if name == "inputs":
        return "inputs are fit()'s: est.fit({'train': ...})"
    others = sorted(other for other, info in registry.providers().items()
                    if other != provider and name in info.settings.model_fields)  # fmt: skip
    if others:
        return f"{name} is an option of the {' and '.join(others)} provider (with_provider switches to one)"
    close = difflib.get_close_matches(name, known, n=1)
    return f"did you mean {close[0]} for {name}" if close else None


class Estimator:
    def __init__(
        self,
        provider: str = "local",
        entry_point: str = "train_ddp.py",
        source_dir: str = ".",
        *,
        nodes: int | str | None = None,
        instance_count: int | str | None = None,
        min_nodes: int | None = None,
        max_restarts: int | None = None,
        rdzv_backend: str | None = None,
        rdzv_endpoint: str | None = None,
        nproc_per_node: int | str | None = None,
        hyperparameters: dict[str, Any] | None = None,
        args: list[str] | None = None,
        environment: dict[str, str] | None = None,
        name: str = "cloudddp-job",
        output: str | None = None,
        checkpoint: str | None = None,
        max_runtime: int | None = None,
        module: bool = False,
        metrics: dict[str, str] | None = None,
        targets: list[dict[str, Any]] | None = None,
        failover: dict[str, Any] | None = None,
        **provider_options: Any,
    ) -> None:
        self.provider_name = provider
        self.base: dict[str, Any] = {
            "name": name, "entry_point": entry_point, "source_dir": source_dir, "module": module,
            **node_settings(nodes, instance_count, min_nodes), "max_restarts": max_restarts,
            "rdzv_backend": rdzv_backend, "rdzv_endpoint": rdzv_endpoint,
            "nproc_per_node": nproc_per_node, "hyperparameters": hyperparameters or {},
            "args": args or [], "environment": environment or {}, "output": output, "checkpoint": checkpoint,
            "max_runtime": max_runtime, "metrics": metrics or {}, "targets": targets or [], "failover": failover,
        }  # fmt: skip
        self.provider_options = provider_options
        self.latest_job: JobHandle | None = None
        self._providers: dict[str, Provider] = {}
        self.spec(None)  # validate now: a bad argument fails at construction, not at fit()

    @property
    def origin(self) -> str:
        return f"Estimator(provider={self.provider_name!r})"

    def arguments(self, inputs: Inputs) -> dict[str, Any]:
        """The job spec's fields as this estimator's arguments set them (launch's flags, as it were)."""
        section = registry.get(self.provider_name).settings
        unknown = sorted(set(self.provider_options) - set(section.model_fields))
        if unknown:
            raise unknown_options(self.provider_name, unknown, list(section.model_fields))
        data = {k: v for k, v in self.base.items() if v is not None}
        data["inputs"] = channels(inputs)
        data[self.provider_name] = self.provider_options
        return data

    def spec(self, inputs: Inputs) -> JobSpec:
        # The context, project file and CLOUDDDP_* variables under the arguments, as under launch's flags.
        return job_spec(self.provider_name, None, self.arguments(inputs), origin=self.origin)

    def targets(self, inputs: Inputs) -> list[Target]:
        """With `targets=[...]`: each target's job, as `cloudddp launch` reads a spec's `targets:`."""
        arguments = {k: v for k, v in self.arguments(inputs).items() if k != "targets"}
        return targets_from(target_specs(self.spec(inputs), None, arguments, origin=self.origin))

    def with_provider(self, provider: str, **provider_options: Any) -> Estimator:
        """The same job on another provider."""
        clone = Estimator.__new__(Estimator)
        clone.provider_name, clone.base, clone.provider_options = provider, dict(self.base), provider_options
        clone.latest_job, clone._providers = None, {}
        clone.spec(None)
        return clone

    @property
    def provider(self) -> Provider:
        return self.provider_for(self.provider_name)

    def provider_for(self, name: str) -> Provider:
        """One provider per name for the estimator's life: the one that submitted a job follows, stops and reads it."""
        if name not in self._providers:
            self._providers[name] = get_provider(name)
        return self._providers[name]

    def dry_run(self, inputs: Inputs = None) -> str:
        """The exact request as YAML (with targets: every target's, in order); nothing is uploaded or started."""
        if self.base["targets"]:
            said: list[str] = []
            print_requests(self.targets(inputs), said.append, provider_for=self.provider_for)
            return "\n".join(said) + "\n"
        return render(self.provider, self.spec(inputs)).to_yaml()  # with launch --dry-run's checks

    def fit(self, inputs: Inputs = None, wait: bool = True, logs: bool = True) -> JobStatus | None:
        """Launch the job (the same `run_job` as `cloudddp launch`); with wait, its final status. With targets, each
        in turn until one has capacity, as `cloudddp launch` runs a spec's `targets:` (docs/guides/failover.md)."""
        record = JobRecord()
        try:
            if self.base["targets"]:
                run = Failover(self.targets(inputs), provider_for=self.provider_for, record=record)
                code = run.run(wait=wait, logs=logs)
            else:
                code = run_job(self.provider, self.spec(inputs), wait=wait, logs=logs, record=record)
        finally:
            self.latest_job = record.handle
        if wait and record.final is None and record.handle is not None:  # Ctrl-C, SIGTERM or SIGHUP: 128 + signal
            raise CloudDDPError(f"interrupted while following {record.handle.job_id}.", exit_code=code)
        if not wait:
            return None
        current = record.final
        assert current is not None  # run_job waited
        if not current.succeeded:
            raise CloudDDPError(  # the job's own exit code, as `cloudddp launch` exits with
                f"job {current.job_id} ended {current.state}: {current.reason or 'see its logs'}", exit_code=code or 1
            )
        return current

    def _job(self) -> JobHandle:
        if self.latest_job is None:
            raise CloudDDPError("no job yet: call fit() first.")
        return self.latest_job

    @property
    def job_provider(self) -> Provider:
        """Where the latest job runs: this estimator's provider, or with targets the one that had capacity."""
        return self.provider_for(self._job().provider)

    def status(self) -> JobStatus:
        return self.job_provider.status(self._job().job_id)

    def logs(self, follow: bool = False) -> None:
        """The job's log lines, secrets hidden as `fit()` hides them (the same job_secrets: this estimator's
        secret-named variables, hyperparameters and script options)."""
        secrets = job_secrets(self.base["environment"], self.base["hyperparameters"], self.base["args"])
        for line in self.job_provider.logs(self._job().job_id, follow=follow):
            emit(redact_log_line(line, secrets))

    def stop(self) -> None:
        self.job_provider.cancel(self._job().job_id)

    def metrics(self) -> Any:
        """The latest job's metric values as a pandas DataFrame, one row per value, in the order they came:
        `timestamp, metric, value, node, rank` from the job side's history where it can be read here (a local
        run), else `metric, value, node, line` from the logs (`cloudddp metrics`, docs/guides/metrics.md).
        The definitions are this estimator's `metrics`, else the epoch lines of sources/train_ddp.py."""
        try:
            import pandas
        except ImportError:
            raise CloudDDPError(
                "Estimator.metrics() returns a pandas DataFrame, and pandas is not installed: "
                "pip install pandas (or 'cloudddp[plot]')."
            ) from None
        samples = job_samples(self.job_provider, self._job().job_id, self.base["metrics"] or DEFAULT_METRICS)
        return pandas.DataFrame(sample_rows(samples), columns=list(fields_of(samples)))

    def to_model_trainer(self, inputs: Inputs = None) -> Any:
        """The same job as a SageMaker SDK v3 `ModelTrainer` running cloudddp's launcher (sagemaker only)."""
        from cloudddp.providers.sagemaker.model_trainer import require_sagemaker, to_model_trainer

        require_sagemaker(self.provider_name)
        spec = self.spec(inputs)
        require_elastic_support(self.provider_name, spec)  # SageMaker starts a fixed set of hosts
        return to_model_trainer(spec)

    @property
    def model_data(self) -> str | None:
        """Where the trained model is: a local folder, s3:// or oci:// URI. Only a job that succeeded has one."""
        current = self.status()
        if not current.succeeded:
            raise CloudDDPError(
                f"job {current.job_id} is {current.state}"
                + (f" ({current.reason})" if current.reason else "")
                + ": only a job that succeeded has a trained model; see its logs (Estimator.logs())."
            )
        return current.artifacts
