"""`PyTorch`: the SageMaker SDK v2 estimator's constructor and `fit`, running cloudddp.

    from cloudddp.sagemaker import PyTorch          # instead of: from sagemaker.pytorch import PyTorch
    est = PyTorch(entry_point="train.py", source_dir="src", role=ROLE, framework_version="2.5",
                  py_version="py311", instance_count=2, instance_type="ml.g5.12xlarge")
    est.fit({"train": "s3://bucket/data/train"})     # CreateTrainingJob through boto3 only
    est.model_data                                   # s3://.../output/model.tar.gz

The entry point runs under cloudddp's launcher (torchrun on every host, one process per GPU),
so `launcher.py` helpers that start torch.distributed.run themselves are not needed.
`instance_type="local"` trains on this machine with the same layout and no Docker
(`local_mode.py`); as in v2's local mode, fit() returns once the job has ended, `wait=False` or not.
Everything goes through `cloudddp.session.run_job`, like `cloudddp launch`.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.estimator import channels
from cloudddp.job_spec import JobSpec, build_spec
from cloudddp.providers import JobHandle, Provider, get_provider
from cloudddp.providers.local import LocalSettings
from cloudddp.providers.sagemaker.image_uris import training_image_uri
from cloudddp.providers.sagemaker.instance_groups import check_instance_groups, image_instance_type
from cloudddp.providers.sagemaker.validation import ROLE_VARIABLE, training_instance_types
from cloudddp.redact import redact_log_line, secret_values
from cloudddp.sagemaker import arguments
from cloudddp.sagemaker.analytics import NotAssociated, TrainingJobAnalytics
from cloudddp.sagemaker.arguments import NOT_SUPPORTED_METHODS, Arguments
from cloudddp.sagemaker.local_mode import LocalJob, container_hyperparameters
from cloudddp.sagemaker.session import Session, aws_errors
from cloudddp.session import JobRecord, run_job
from cloudddp.terminal import emit

DEFAULT_BASE_NAME = "pytorch-training"  # v2: base_name_from_image(<the PyTorch image>)
IMAGE_REPOSITORY = re.compile(r"^(?:.+/)?([^:/@]+)(?:[:@].+)?$")  # v2's base_name_from_image regex, digest too
PY_VERSION = re.compile(r"py(\d)(\d+)")
NVIDIA_DEVICES = "/dev/nvidia[0-9]*"  # what the SDK's local_gpu (nvidia-docker) would hand the container
OLDEST_IMAGE_PYTHON = (3, 8)  # the bundled job side imports on 3.8 and newer
SAGEMAKER_STATUS_OF_JOB_STATE = {
    "SUCCEEDED": "Completed",
    "FAILED": "Failed",
    "STOPPED": "Stopped",
    "STOPPING": "Stopping",
}
TROUBLESHOOTING = "https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-python-sdk-troubleshooting.html"


class UnexpectedStatusException(CloudDDPError, ValueError):
    """v2's `sagemaker.exceptions.UnexpectedStatusException` (a ValueError, with `allowed_statuses` and
    `actual_status`), raised where v2 raises it: `logs()` of a job that did not complete (aws/sagemaker-python-sdk
    v2.257.6, commit fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/exceptions.py; session.py
    `_check_job_status`). A CloudDDPError too, so the CLIs report it in one paragraph."""

    def __init__(self, message: str, allowed_statuses: list[str], actual_status: str, *, exit_code: int = 1) -> None:
        super().__init__(message, exit_code=exit_code)
        self.allowed_statuses, self.actual_status = allowed_statuses, actual_status


class CapacityError(UnexpectedStatusException):
    """v2's `sagemaker.exceptions.CapacityError`: a job that failed for a lack of capacity (its reason says so)."""


def check_job_status(described: dict[str, Any], secrets: list[str], exit_code: int = 1) -> None:
    """v2's `_check_job_status(job, desc, "TrainingJobStatus")` (session.py, v2.257.6 fc582aaa): Completed passes,
    Stopped is only warned about, anything else raises with v2's message (the job's secrets hidden in it).
    v2 calls it after `logs()`, `wait()` and `fit(wait=True)` alike (`_TrainingJob.wait` -> `logs_for_job(wait=True)`
    or `wait_for_job`); `exit_code` is the one the CLIs end with."""
    name, status = described.get("TrainingJobName", ""), str(described.get("TrainingJobStatus", ""))
    if status == "Completed":
        return
    if status == "Stopped":
        emit(
            "cloudddp: warning: Job ended with status 'Stopped' rather than 'Completed'. This could mean the job "
            "timed out or stopped early for some other reason: Consider checking whether it completed as you expect."
        )
        return
    reason = redact_log_line(str(described.get("FailureReason", "(No reason provided)")), secrets)
    message = (
        f"Error for Training job {name}: {status}. Reason: {reason}. "
        f"Check troubleshooting guide for common errors: {TROUBLESHOOTING}"
    )
    kind = CapacityError if "CapacityError" in reason else UnexpectedStatusException
    raise kind(message, allowed_statuses=["Completed", "Stopped"], actual_status=status, exit_code=exit_code or 1)


def base_name(args: Arguments, image: str | None) -> str:
    if args.base_job_name:
        return args.base_job_name
    match = IMAGE_REPOSITORY.match(image or "")
    return match.group(1) if match else DEFAULT_BASE_NAME


def check_image_python(py_version: str | None, image: str) -> None:
    """Refuse images whose Python cannot run the bundled launcher, before anything is uploaded."""
    found = PY_VERSION.search(py_version or "") or PY_VERSION.search(image.rsplit(":", 1)[-1])
    if found and (int(found.group(1)), int(found.group(2))) < OLDEST_IMAGE_PYTHON:
        raise CloudDDPError(
            f"the training image {image} runs Python {found.group(1)}.{found.group(2)}; cloudddp's launcher needs "
            f"Python {'.'.join(map(str, OLDEST_IMAGE_PYTHON))} or newer in the image. Pick a newer framework_version "
            f"and py_version, or pass image_uri=."
        )


def channels_of(inputs: Any) -> dict[str, str]:
    """v2's fit(inputs): a URI string (the channel "training") or a dict of channel -> URI, as Estimator.fit
    reads them (`cloudddp.estimator.channels`), with v2's own objects named where they are not supported."""
    if isinstance(inputs, dict):
        for channel, uri in inputs.items():
            if not isinstance(uri, str):
                raise CloudDDPError(
                    f"fit(inputs={{{channel!r}: {type(uri).__name__}(...)}}): cloudddp takes channel URIs as strings "
                    f"(s3:// or file://); TrainingInput and FileSystemInput options are not supported."
                )
    elif inputs is not None and not isinstance(inputs, str):
        raise CloudDDPError(
            f"fit(inputs={type(inputs).__name__}(...)): pass an s3:// URI or a dict of channel name -> URI; "
            f"TrainingInput and FileSystemInput are not supported."
        )
    return channels(inputs)


def merged_source(args: Arguments, into: Path) -> tuple[str, str]:
    """(source_dir, entry_point) holding what v2 packs: source_dir's files, or with no source_dir the entry point
    file alone; `dependencies` copied to the top of it.

    aws/sagemaker-python-sdk v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0), src/sagemaker/fw_utils.py:
    `_list_files_to_compress(script, directory)`: `if directory is None: return [script]`, plus the dependencies;
    `tar_and_upload_dir`: `script_name = script if directory else os.path.basename(script)`. (The entry point's
    folder is used only with the `local.local_code` config, which cloudddp does not read.)
    """
    if args.source_dir is not None and not args.dependencies:
        return args.source_dir, args.entry_point
    target = into / "source"
    if args.source_dir is None:
        script = Path(args.entry_point)
        if not script.is_file():
            raise CloudDDPError(
                f"PyTorch(entry_point={args.entry_point!r}): {script} is not a file (with no source_dir, the entry "
                f"point is a path to the training script)."
            )
        target.mkdir(parents=True)
        shutil.copy2(script, target / script.name)
        entry = script.name
    else:  # a source_dir that holds `into` itself (source_dir="."; the work folder is under ./cloudddp-runs) skips it
        shutil.copytree(args.source_dir, target, symlinks=True, ignore=_skipping(into))
        entry = args.entry_point
    for dependency in args.dependencies:
        path = Path(dependency)
        if not path.exists():
            raise CloudDDPError(f"PyTorch(dependencies=[..., {dependency!r}, ...]): {dependency} does not exist.")
        if path.is_dir():
            shutil.copytree(path, target / path.name, symlinks=True, dirs_exist_ok=True, ignore=_skipping(into))
        else:
            shutil.copy2(path, target / path.name)
    return str(target), entry


def _skipping(folder: Path) -> Callable[[str, list[str]], set[str]]:
    """A copytree `ignore` that leaves out `folder` (a copy must not copy itself into itself)."""
    resolved = folder.resolve()

    def ignore(directory: str, names: list[str]) -> set[str]:
        return {name for name in names if (Path(directory) / name).resolve() == resolved}

    return ignore


def local_failure(job_name: str, run_dir: str, code: int) -> str:
    """A failed local job's message in v2's shape, "Failed to run: WHAT. Process exited with code: N" with nothing
    after the code (aws/sagemaker-python-sdk v2.257.6, commit fc582aaa46faf7b7e16ab1e13840869712174cd0, the same file
    in the 2.257.7 tests record against: src/sagemaker/local/image.py `_stream_output` raises
    RuntimeError(f"Failed to run: {process.args}. Process exited with code: {exit_code}"), which
    `_SageMakerContainer.train` lets through, its `finally:` retrieving the artifacts). v2 names its docker compose
    command; here WHAT is the local job and its run folder, where its logs are."""
    return f"Failed to run: local training job {job_name} in {run_dir}. Process exited with code: {code}"


class LocalJobFailed(CloudDDPError, RuntimeError):
    """A local-mode fit() whose job failed: a RuntimeError, as v2's local mode raises, its message in v2's shape
    (local_failure)."""


class TrainingJob:
    """`estimator.latest_training_job`: the job's name, `describe()`, `wait()`, `stop()`."""

    def __init__(self, estimator: PyTorch, provider: Provider, handle: JobHandle, name: str) -> None:
        self.estimator, self.provider, self.handle, self.name = estimator, provider, handle, name
        self.job_name = name
        self.model_uri: str | None = None  # a local job's model.tar.gz, once uploaded (succeeded jobs only)

    def describe(self) -> dict[str, Any]:
        if self.provider.name == "sagemaker":
            return dict(self.provider.describe(self.name))  # type: ignore[attr-defined]
        current = self.provider.status(self.handle.job_id)
        described: dict[str, Any] = {
            "TrainingJobName": self.name,
            "TrainingJobStatus": SAGEMAKER_STATUS_OF_JOB_STATE.get(current.state, "InProgress"),
        }
        if current.reason:
            described["FailureReason"] = current.reason
        if self.model_uri:
            described["ModelArtifacts"] = {"S3ModelArtifacts": self.model_uri}
        return described

    def wait(self, logs: bool | str = "All") -> None:
        self.estimator._follow(self, logs)

    def stop(self) -> None:
        self.provider.cancel(self.handle.job_id)


def _not_supported(name: str) -> CloudDDPError:
    return CloudDDPError(
        f"PyTorch.{name} is not supported by cloudddp's drop-in (training only): use the SageMaker SDK with "
        f"the model at estimator.model_data for it."
    )


class _RefusingMethods(type):
    """The v2 methods cloudddp leaves out, refused by name on the class too: `attach` is a classmethod in v2
    (aws/sagemaker-python-sdk v2.257.6, commit fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/estimator.py
    `EstimatorBase.attach`), called as `PyTorch.attach("job")`."""

    def __getattr__(cls, name: str) -> Any:
        if name in NOT_SUPPORTED_METHODS:
            raise _not_supported(name)
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")


class PyTorch(metaclass=_RefusingMethods):
    """The SDK v2 `sagemaker.pytorch.PyTorch` training estimator on cloudddp (see the module docstring)."""

    def __init__(
        self,
        entry_point: str | None = None,
        framework_version: str | None = None,
        py_version: str | None = None,
        source_dir: str | None = None,
        hyperparameters: dict[str, Any] | None = None,
        image_uri: str | None = None,
        distribution: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # The pre-2.0 names (train_instance_count, train_volume_kms_key, ...) set these under the new names, as v2's
        # `renamed_kwargs` hands `EstimatorBase.__init__` the old name's value (same tag, src/sagemaker/estimator.py).
        given = arguments.take_renamed(kwargs)
        self.args, self.sagemaker_session = arguments.parse(
            {
                "entry_point": entry_point, "framework_version": framework_version, "py_version": py_version,
                "source_dir": source_dir, "hyperparameters": hyperparameters, "image_uri": image_uri,
                "distribution": distribution, **given,
            }
        )  # fmt: skip
        # v2 keeps these as passed (estimator.py, v2.257.6 fc582aaa: `self.instance_count = instance_count`):
        # beside instance_groups, instance_count and instance_type read None, not the groups' total.
        self._as_passed = {name: given.get(name) for name in ("instance_count", "instance_type", "instance_groups")}
        # The v2 attributes stored as v2 stores them (aws/sagemaker-python-sdk v2.257.6, commit
        # fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/estimator.py `EstimatorBase.__init__`:
        # `self.output_kms_key = resolve_value_from_config(output_kms_key, ...)`, `self.volume_kms_key`,
        # `self.debugger_hook_config = resolve_value_from_config(direct_input=debugger_hook_config, ...)`, all as
        # passed with no SageMaker config file; `self.tags = format_tags(tags)`; pytorch/estimator.py:
        # `self.distribution = distribution or {}`). cloudddp's own reading of them is in self.args.
        self.distribution = arguments.v2_distribution(distribution, self.args.distribution_groups)
        self.tags = arguments.v2_tags(given.get("tags"))
        self.output_kms_key: str | None = given.get("output_kms_key")
        self.volume_kms_key: str | None = given.get("volume_kms_key")
        self.debugger_hook_config: Any = given.get("debugger_hook_config")
        # Created here as the SDK v2 does: a missing region fails at construction, not at fit().
        self.sagemaker_session = self.sagemaker_session or Session()
        self.latest_training_job: TrainingJob | None = None
        self._output_from_default = False  # v2's _is_output_path_set_from_default_bucket_and_prefix

    # -- v2 attributes a notebook reads ---------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        if name in NOT_SUPPORTED_METHODS:
            raise _not_supported(name)
        as_passed = self.__dict__.get("_as_passed", {})
        if name in as_passed and self.args.instance_groups:
            return as_passed[name]
        if name in Arguments.__dataclass_fields__:
            return getattr(self.args, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def training_image_uri(self, region: str | None = None) -> str:
        """The training image: image_uri, else v2's PyTorch image for the instance type (aws/sagemaker-python-sdk
        v2.257.6, commit fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/estimator.py
        `Framework.training_image_uri(region=None)`: the session's region unless one is given)."""
        a = self.args
        if a.image_uri:
            return a.image_uri
        image_for = image_instance_type(a.instance_groups) if a.instance_groups else a.instance_type
        region = region or str(self.sagemaker_session.boto_region_name)
        return training_image_uri(a.framework_version or "", a.py_version or "", image_for, region)

    def enable_network_isolation(self) -> bool:
        """v2's method (src/sagemaker/estimator.py `EstimatorBase.enable_network_isolation`, v2.257.6 fc582aaa):
        whether the job runs with network isolation."""
        return self.args.network_isolation

    def hyperparameters(self) -> dict[str, str]:
        """The user's hyperparameters JSON-encoded, as v2's `hyperparameters()` returns (and the job receives) them."""
        return {key: json.dumps(value) for key, value in self.args.hyperparameters.items()}

    def set_hyperparameters(self, **kwargs: Any) -> None:
        self.args.hyperparameters.update(arguments.check_hyperparameters(kwargs))

    def s3(self) -> Any:
        """An S3 client of the session's boto3 session (works for an SDK v2 `sagemaker.Session` too)."""
        session = self.sagemaker_session
        return session.boto_session.client("s3", region_name=session.boto_region_name)

    # -- fit --------------------------------------------------------------------------------
    def fit(
        self,
        inputs: Any = None,
        wait: bool = True,
        logs: bool | str = "All",
        job_name: str | None = None,
        experiment_config: dict[str, str] | None = None,
    ) -> None:
        if experiment_config:
            raise CloudDDPError("fit(experiment_config=...): SageMaker Experiments are not supported by cloudddp.")
        channels = channels_of(inputs)
        with tempfile.TemporaryDirectory(prefix="cloudddp-sdk2-") as scratch:
            if self.args.local:  # trains before it returns, as v2's local mode does (see _fit_local)
                self._fit_local(channels, logs, job_name, Path(scratch))
            else:
                self._fit_sagemaker(inputs, channels, wait, logs, job_name, Path(scratch))

    def _common(self, source: str, entry: str, name: str, channels: dict[str, str]) -> dict[str, Any]:
        a = self.args
        return {
            "name": name, "entry_point": entry, "source_dir": source, "nodes": a.instance_count,
            "hyperparameters": a.hyperparameters, "environment": a.environment, "inputs": channels,
            "max_runtime": a.max_run, "metrics": a.metrics,
        }  # fmt: skip

    def sagemaker_spec(self, channels: dict[str, str], job_name: str | None, scratch: Path) -> JobSpec:
        """The JobSpec for a real instance type: what fit() hands to run_job("sagemaker", ...)."""
        a, session = self.args, self.sagemaker_session
        region = session.boto_region_name
        image = self.training_image_uri(region)
        check_image_python(a.py_version, image)
        if a.instance_groups:  # before the default bucket is made: nothing happens for a refused cluster
            check_instance_groups(a.instance_groups, a.distribution_groups, training_instance_types(),
                                  instance_type_set=False, nodes_set=False)  # fmt: skip
        if a.output_path and not self._output_from_default:
            bucket, prefix = a.output_path[len("s3://") :].split("/", 1)[0], ""
            output = a.output_path
        else:  # v2: the session's default bucket and prefix, for the output and the code alike
            bucket, prefix, output = self._default_output()
        source, entry = merged_source(a, scratch)
        data = self._common(source, entry, job_name or base_name(a, image), channels)
        data["output"] = output
        data["sagemaker"] = {
            "region": region, "role": a.role or os.environ.get(ROLE_VARIABLE), "image": image, "bucket": bucket,
            "prefix": prefix, "volume_size_gb": a.volume_size, "spot": a.use_spot_instances, "max_wait": a.max_wait,
            "checkpoint_s3": a.checkpoint_s3_uri, "subnets": a.subnets, "security_groups": a.security_group_ids,
            "kms_key": a.kms_key, "network_isolation": a.network_isolation,
            "inter_container_encryption": a.inter_container_encryption, "tags": a.tags,
            "checkpoint_local_path": a.checkpoint_local_path, "input_mode": a.input_mode,
        }  # fmt: skip
        if a.instance_groups:  # ResourceConfig.InstanceGroups instead of InstanceType x InstanceCount
            del data["nodes"]
            data["sagemaker"]["instance_groups"] = [g.model_dump() for g in a.instance_groups]
            data["sagemaker"]["distribution_groups"] = a.distribution_groups
        else:
            data["sagemaker"]["instance_type"] = a.instance_type
        return build_spec(data, "PyTorch(...)")

    def _default_output(self) -> tuple[str, str, str]:
        """(bucket, prefix, output_path) from the session's default bucket and prefix: v2's `_prepare_for_training`
        sets output_path to `s3_path_join("s3://", default_bucket(), default_bucket_prefix, with_end_slash=True)`
        (aws/sagemaker-python-sdk v2.257.6, commit fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/estimator.py)."""
        session = self.sagemaker_session
        with aws_errors("find or create the session's default bucket"):  # an SDK v2 Session's own default_bucket()
            bucket = session.default_bucket()
        prefix = getattr(session, "default_bucket_prefix", None) or ""
        folder = prefix.strip("/")  # a prefix of "/" is none, as the provider's keys drop it
        return bucket, prefix, f"s3://{bucket}/" + (f"{folder}/" if folder else "")

    def _prepare_for_training(self, job_name: str | None, base: str, output: str) -> None:
        """What v2's `_prepare_for_training` stores on the estimator (estimator.py v2.257.6 fc582aaa): with no
        job_name, base_job_name (`_ensure_base_job_name`: as given, else the image's repository name); with no
        output_path, the default one (and the code then goes under the default prefix on every later fit too)."""
        if job_name is None:
            self.args.base_job_name = base
        if not self.args.output_path:
            self.args.output_path, self._output_from_default = output, True

    def _run(self, provider: Provider, spec: JobSpec, wait: bool, logs: bool | str) -> TrainingJob:
        record = JobRecord()
        code = run_job(provider, spec, wait=wait, logs=_follow_logs(logs), say=emit, record=record)
        if record.handle is None:
            raise CloudDDPError(f"the {provider.name} job was not submitted (exit code {code}).", exit_code=code or 1)
        self.latest_training_job = job = TrainingJob(self, provider, record.handle, Path(record.handle.job_id).name)
        if wait and code != 0 and provider.name == "sagemaker" and record.final is not None and record.final.done:
            # v2's fit(wait=True) ends in `_TrainingJob.wait` -> `_check_job_status` (aws/sagemaker-python-sdk
            # v2.257.6, src/sagemaker/estimator.py `EstimatorBase.fit`, session.py `wait_for_job`): a Failed job
            # raises UnexpectedStatusException (CapacityError), a Stopped one is only warned about.
            check_job_status(job.describe(), secret_values(spec.environment, spec.hyperparameters), exit_code=code)
            return job
        if wait and code != 0 and provider.name == "local":
            raise LocalJobFailed(local_failure(job.name, record.handle.job_id, code), exit_code=code)
        if wait and code != 0:  # an interrupted wait
            raise CloudDDPError(
                f"training job {self.latest_training_job.name} did not complete (exit code {code}); see its logs above.",
                exit_code=code,
            )
        return self.latest_training_job

    def _check_output_bucket(self, bucket: str) -> None:
        """output_path's bucket must exist: the source goes there too and it is the user's, so it is not made.
        (v2, aws/sagemaker-python-sdk v2.257.6 fc582aaa, src/sagemaker/estimator.py `_stage_user_code_in_s3`,
        uploads the source to output_path's bucket and fails with S3's NoSuchBucket.) Other errors are the
        provider's to report, when it checks the bucket itself."""
        from botocore.exceptions import ClientError

        try:
            with aws_errors(f"check the output_path bucket {bucket!r}"):
                self.s3().head_bucket(Bucket=bucket)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchBucket", "NotFound"):
                raise CloudDDPError(
                    f"PyTorch(output_path={self.args.output_path!r}): the bucket {bucket!r} does not exist. Create "
                    f"it, or leave output_path out to use the session's default bucket."
                ) from None

    def _fit_sagemaker(
        self,
        inputs: Any,
        channels: dict[str, str],
        wait: bool,
        logs: bool | str,
        job_name: str | None,
        scratch: Path,
    ) -> None:
        from cloudddp.sagemaker.sdk_provider import SDKv2SageMaker  # boto3 only when a job is sent

        arguments.check_channels(inputs, channels)
        spec = self.sagemaker_spec(channels, job_name, scratch)
        if self.args.output_path and not self._output_from_default:
            self._check_output_bucket(spec.sagemaker.bucket or "")
        self._prepare_for_training(job_name, spec.name, spec.output or "")
        # The session's own boto3 session (credentials, profile, region), v2's job names and debugger fields.
        provider = SDKv2SageMaker(self.args, exact=job_name, region=spec.sagemaker.region,
                                  session=self.sagemaker_session.boto_session)  # fmt: skip
        self._run(provider, spec, wait, logs)

    def _fit_local(self, channels: dict[str, str], logs: bool | str, job_name: str | None, scratch: Path) -> None:
        a = self.args
        if a.instance_type == "local_gpu" and not glob.glob(NVIDIA_DEVICES):
            raise CloudDDPError(
                f"PyTorch(instance_type='local_gpu') runs one process per GPU, and this machine shows no NVIDIA GPU "
                f"({NVIDIA_DEVICES} is empty). Use instance_type='local'."
            )
        output = a.output_path or self._default_output()[2]
        self._prepare_for_training(job_name, base_name(a, a.image_uri), output)
        # Downloads live beside the run folders until the artifacts are uploaded.
        runs_dir = Path(LocalSettings().runs_dir)
        runs_dir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".local-mode-", dir=runs_dir))
        before, job = self.latest_training_job, None
        try:
            with aws_errors("download the channels and checkpoints for local mode"):
                job = LocalJob.prepare(self.s3(), work, channels, output, a.checkpoint_s3_uri, emit)
            job.tensorboard = a.tensorboard
            spec = self._local_spec(job, work, job_name)
            # v2's local mode trains inside CreateTrainingJob, so fit() returns once the job has ended and its
            # artifacts are retrieved, whatever `wait` says (aws/sagemaker-python-sdk v2.257.6, commit
            # fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/local/local_session.py
            # `LocalSagemakerClient.create_training_job` -> local/entities.py `_LocalTrainingJob.start` ->
            # local/image.py `_SageMakerContainer.train`). wait=False is ignored here the same way.
            training_job = self._run(get_provider("local"), spec, True, logs)
        except BaseException:
            ran = self.latest_training_job
            if job is not None and ran is not None and ran is not before and ran.provider.name == "local":
                # The job ran and failed: its checkpoints and artifacts are uploaded all the same, as v2's local
                # mode does (src/sagemaker/local/image.py `_SageMakerContainer.train`: `retrieve_artifacts` in a
                # `finally:`).
                self._finish_failed_local(ran, job)
            else:
                shutil.rmtree(work, ignore_errors=True)
            raise
        self._finish_local(training_job, job)

    def _local_spec(self, job: LocalJob, work: Path, job_name: str | None) -> JobSpec:
        """The local provider's JobSpec: the hosts laid out as SageMaker's, with v2 local mode's hyperparameters."""
        a, session = self.args, self.sagemaker_session
        source, entry = merged_source(a, work)
        data = self._common(source, entry, job_name or base_name(a, a.image_uri), job.inputs)
        data["hyperparameters"] = container_hyperparameters(
            a.hyperparameters, entry_point=entry, source_dir=source, region=session.boto_region_name,
            job_name=data["name"], distribution=a.distribution, instance_type=a.instance_type,
        )  # fmt: skip
        # v2's local containers get AWS_REGION too (local/image.py: _SageMakerContainer.train); the user's win.
        data["environment"] = {"AWS_REGION": session.boto_region_name, **a.environment}
        data["checkpoint"] = str(job.checkpoint_dir) if job.checkpoint_dir else None
        # checkpoint_local_path: where each emulated host's checkpoint folder sits under its /opt/ml. input_mode: as
        # v2 hands its LocalSagemakerClient AlgorithmSpecification.TrainingInputMode (recorded: local_fastfile.json);
        # the emulation reads every channel as File whatever it is, as v2's containers do (local/image.py
        # `write_config_files`).
        data["sagemaker"] = {"checkpoint_local_path": a.checkpoint_local_path, "input_mode": a.input_mode}
        # Copied into every node, as each SageMaker host downloads its own (the download is removed after).
        data["local"] = {"emulate": "sagemaker", "link_inputs": False}
        if a.instance_type == "local_gpu":
            data["nproc_per_node"] = "gpu"
        return build_spec(data, "PyTorch(instance_type='local')")

    def _finish_local(self, training_job: TrainingJob, job: LocalJob) -> None:
        """Once the local job has ended, succeeded or not: checkpoints to checkpoint_s3_uri, model.tar.gz and
        output.tar.gz to the output path (v2's local mode retrieves the artifacts in a `finally:`, see
        `_fit_local`), then the downloads are removed. The job's model_uri is set only for a job that succeeded."""
        try:
            current = training_job.provider.status(training_job.handle.job_id)
            if current.done:
                with aws_errors(f"upload the checkpoints and artifacts of {training_job.name}"):
                    uri = job.finish(self.s3(), Path(training_job.handle.job_id), training_job.name, emit)
                training_job.model_uri = uri if current.succeeded else None
        finally:
            job.clean()

    def _finish_failed_local(self, training_job: TrainingJob, job: LocalJob) -> None:
        """_finish_local for a job that failed: an upload error is reported, and the job's own failure raised."""
        try:
            self._finish_local(training_job, job)
        except Exception as error:  # the job's failure is what the caller needs to see
            emit(f"cloudddp: local mode: the failed job's checkpoints and artifacts were not all uploaded: {error}")

    def _secrets(self) -> list[str]:
        """The values of the job's secret-named variables, masked in the logs printed (as cloudddp.session does)."""
        return secret_values(self.args.environment, self.args.hyperparameters)

    def _follow(self, training_job: TrainingJob, logs: bool | str) -> None:
        if _follow_logs(logs):
            secrets = self._secrets()
            for line in training_job.provider.logs(training_job.handle.job_id, follow=True):
                emit(redact_log_line(line, secrets))  # as run_job's follow() and `cloudddp logs` print them
        current = training_job.provider.wait(training_job.handle.job_id, poll=1.0)
        # v2's `_TrainingJob.wait` (aws/sagemaker-python-sdk v2.257.6, src/sagemaker/estimator.py): `logs_for_job(
        # wait=True)` or `wait_for_job`, both ending in session.py `_check_job_status`.
        if not current.succeeded:
            check_job_status(training_job.describe(), self._secrets(), exit_code=current.exit_code or 1)

    def _ended(self, training_job: TrainingJob) -> None:
        """Wait for a local job; raise if it did not succeed (there is no model then)."""
        current = training_job.provider.wait(training_job.handle.job_id, poll=1.0)
        if not current.succeeded:
            raise CloudDDPError(
                f"training job {training_job.name} ended {current.state}: {current.reason or 'see its logs'}",
                exit_code=current.exit_code or 1,
            )

    # -- after fit --------------------------------------------------------------------------
    def _job(self) -> TrainingJob:
        if self.latest_training_job is None:
            raise CloudDDPError("no training job yet: call fit() first.")
        return self.latest_training_job

    @property
    def training_job_analytics(self) -> TrainingJobAnalytics:
        """v2's property (aws/sagemaker-python-sdk v2.257.7, src/sagemaker/estimator.py
        `EstimatorBase.training_job_analytics`): the latest job's metric values in CloudWatch, read as v2 reads them
        (cloudddp/sagemaker/analytics.py); ValueError before fit(), as v2. Only SageMaker publishes them there: a
        local-mode job's values are `cloudddp metrics JOB` and cloudddp.Estimator.metrics()."""
        job = self.latest_training_job
        if job is None:
            raise NotAssociated("Estimator is not associated with a TrainingJob")
        if job.provider.name != "sagemaker":
            raise CloudDDPError(
                f"training_job_analytics reads CloudWatch, where only SageMaker publishes a job's metrics; "
                f"{job.name} ran on the {job.provider.name} provider: `cloudddp metrics {job.handle.job_id}` reads its "
                f"values."
            )
        return TrainingJobAnalytics(job.name, sagemaker_session=self.sagemaker_session)

    @property
    def model_data(self) -> str:
        """The S3 URI of the job's model.tar.gz (v2: ModelArtifacts.S3ModelArtifacts)."""
        job = self._job()
        if job.provider.name == "local":  # fit() uploaded it when the job ended
            if job.model_uri is None:
                self._ended(job)  # raises for a job that did not succeed
                raise CloudDDPError(f"training job {job.name} produced no model.")
            return job.model_uri
        described = job.describe()
        artifacts = (described.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
        if artifacts:
            return str(artifacts)
        output = str(described["OutputDataConfig"]["S3OutputPath"]).rstrip("/")
        return f"{output}/{job.name}/output/model.tar.gz"

    def logs(self) -> None:
        """Print the latest job's logs, following them until it ends; then, as v2's `logs_for_job(name, wait=True)`
        does, raise UnexpectedStatusException for a job that failed (aws/sagemaker-python-sdk v2.257.6, commit
        fc582aaa46faf7b7e16ab1e13840869712174cd0, src/sagemaker/session.py `_logs_for_job` -> `_check_job_status`).
        `cloudddp logs` prints the same lines and does not raise."""
        job, secrets = self._job(), self._secrets()
        for line in job.provider.logs(job.handle.job_id, follow=True):
            emit(redact_log_line(line, secrets))  # as run_job's follow() and `cloudddp logs` print them
        check_job_status(job.describe(), secrets)


def _follow_logs(logs: bool | str) -> bool:
    return bool(logs) and logs != "None"
