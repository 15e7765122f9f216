"""`--provider sagemaker`: Amazon SageMaker training jobs through boto3.

`render` validates the spec and builds the exact CreateTrainingJob request without an
AWS call (the dry run); `submit` checks the credentials and the staging bucket, packs
and uploads the source with the job side bundled, stages local inputs, then creates
the job. `status`, `logs` and `cancel` work on any training job name. boto3 is
imported only here and in the modules beside it, never by the CLI or the launcher.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import botocore.session
from botocore.exceptions import BotoCoreError, ClientError
from botocore.loaders import create_loader
from botocore.regions import EndpointResolver
from rich.filesize import decimal

from cloudddp.errors import CloudDDPError
from cloudddp.providers.base import JobEvent, JobHandle, JobRequest, JobStatus, Provider
from cloudddp.providers.sagemaker import service_model
from cloudddp.providers.sagemaker import validation as check
from cloudddp.providers.sagemaker.aws import CREDENTIALS_HELP, make_client, open_session, translate
from cloudddp.providers.sagemaker.images import training_image
from cloudddp.providers.sagemaker.instance_groups import image_instance_type
from cloudddp.providers.sagemaker.logs import LogTail
from cloudddp.providers.sagemaker.request import (
    CodeUpload,
    SageMakerStaging,
    Upload,
    build_request,
    default_bucket,
    job_name_for,
    validate_spec,
)
from cloudddp.redact import secret_values
from cloudddp.staging.archive import pack_source, source_files
from cloudddp.staging.engine import StageResult, copy_folder, counted, stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.s3_bucket import StagingBucket, split_uri
from cloudddp.staging.s3_store import S3Store
from cloudddp.terminal import emit

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

PENDING_SECONDARY = {
    "Starting", "Pending", "LaunchingMLInstances", "PreparingTrainingStack", "Downloading",
    "DownloadingTrainingImage", "Restarting", "Interrupted",
}  # fmt: skip
JOB_STATE_OF_SAGEMAKER_STATUS = {
    "Completed": "SUCCEEDED",
    "Failed": "FAILED",
    "Stopping": "STOPPING",
    "Stopped": "STOPPED",
}
__all__ = ["CREDENTIALS_HELP", "SageMakerProvider", "translate"]


def role_of(spec: JobSpec) -> str | None:
    """The role: the spec's, else CLOUDDDP_SAGEMAKER_ROLE's. Launch and the Estimator put the variable in the spec
    (cloudddp/config.py); a spec built in Python (`build_spec`) is read as it was before contexts."""
    return spec.sagemaker.role or os.environ.get(check.ROLE_VARIABLE)


class SageMakerProvider(Provider):
    name = "sagemaker"
    interrupt_stops = False  # Ctrl-C asks before stopping a job that bills by the second
    poll_interval = 5.0
    final_grace = 3.0  # CloudWatch lags the job's end by a little
    log_page_size: int | None = None  # GetLogEvents/DescribeLogStreams page size (None: the service's)

    def __init__(self, region: str | None = None, session: Any = None, say: Callable[[str], None] = emit) -> None:
        self.region_override = region
        self.session_override = session
        self.say = say
        self._sessions: dict[str, Any] = {}

    # -- AWS plumbing -------------------------------------------------------------------
    def region(self, spec: JobSpec | None = None) -> str:
        return check.check_region(self.chosen_region(spec), known_regions())

    def chosen_region(self, spec: JobSpec | None = None) -> str | None:
        """The region as given (the spec, this provider's session, AWS_REGION, botocore's config), unchecked."""
        chosen = (spec.sagemaker.region if spec else None) or self.region_override
        if not chosen and self.session_override is not None:
            chosen = self.session_override.region_name
        if self.session_override is None:
            # Read the profile even when the region is given: a misspelt AWS_PROFILE fails the dry run
            # too, rather than the real launch later.
            try:
                session = botocore.session.get_session()
                session.get_scoped_config()  # raises ProfileNotFound even where variables make it unneeded
                configured = session.get_config_variable("region")
            except BotoCoreError as exc:
                raise translate(exc, "read the AWS configuration") from None
            # botocore reads AWS_DEFAULT_REGION and the profile; AWS_REGION is what the other AWS SDKs read.
            chosen = chosen or os.environ.get("AWS_REGION") or configured
        return chosen or None

    def missing_settings(self, spec: JobSpec) -> list[str]:
        missing = [] if role_of(spec) else [check.NO_ROLE]
        return missing + ([] if self.chosen_region(spec) else [check.NO_REGION])

    def session(self, region: str) -> Any:
        if self.session_override is not None:
            return self.session_override
        if region not in self._sessions:
            self._sessions[region] = open_session(region)
        return self._sessions[region]

    def client(self, service: str, region: str | None = None) -> Any:
        """A client with bounded timeouts and retries (see aws.py)."""
        region = region or self.region()
        return make_client(self.session(region), service, region)

    def call(self, action: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except CloudDDPError:
            raise
        except (ClientError, BotoCoreError) as exc:
            raise translate(exc, action) from None

    # -- render -------------------------------------------------------------------------
    def job_name(self, spec: JobSpec) -> str:
        """`<name>-<time stamp>`; cloudddp.sagemaker overrides it for the SDK v2's fit(job_name=...)."""
        return job_name_for(spec)

    def render(self, spec: JobSpec, account: str | None = None) -> JobRequest:
        validate_spec(spec)
        role = check.check_role(role_of(spec))
        region = self.region(spec)
        job_name = self.job_name(spec)
        size = sum(path.stat().st_size for path, _ in source_files(Path(spec.source_dir)))
        warning = check.check_source_size(size, spec.source_dir)
        sm = spec.sagemaker
        image_for = image_instance_type(sm.instance_groups) if sm.instance_groups else sm.instance_type
        image = training_image(sm.image, region, sm.framework_version, sm.py_version, image_for)
        bucket = sm.bucket or default_bucket(account or check.account_of_role(role), region)
        rendered = build_request(spec, job_name=job_name, region=region, role=role, image=image, bucket=bucket)
        rendered.staging.bucket_is_default = sm.bucket is None
        if warning:
            rendered.staging.warnings.insert(0, warning)
        # The request is CreateTrainingJob's parameters as boto3 takes them; before_submit the typed staging.
        return JobRequest(provider=self.name, name=job_name, spec=spec, request=rendered.payload,
                          before_submit=rendered.staging)  # fmt: skip

    # -- submit -------------------------------------------------------------------------
    def caller_account(self, region: str) -> str:
        session = self.session(region)
        try:
            credentials = session.get_credentials()
        except BotoCoreError as exc:  # a profile that names a missing source profile or SSO session
            raise translate(exc, "load your AWS credentials") from None
        if credentials is None:
            raise CloudDDPError(f"no AWS credentials found. {CREDENTIALS_HELP}")
        sts = self.client("sts", region)
        return str(self.call("check your AWS credentials", sts.get_caller_identity)["Account"])

    def submit(self, request: JobRequest[dict[str, Any]]) -> JobHandle:
        plan: SageMakerStaging = request.before_submit
        region = plan.region
        account = self.caller_account(region)
        if plan.bucket_is_default and plan.bucket != default_bucket(account, region):
            # The role lives in another account than the credentials: stage in the caller's own bucket. The one
            # case where what is sent differs from the dry run (it cannot know the account), so say so.
            request = self.render(request.spec, account=account)
            self.say(
                f"cloudddp: your credentials are for account {account}, not the role's: staging in "
                f"s3://{request.before_submit.bucket} instead of s3://{plan.bucket} (the dry run's)"
            )
            plan = request.before_submit
        payload, kms_key = request.request, request.spec.sagemaker.kms_key
        stager = StagingBucket(self.client("s3", region), plan.bucket, kms_key=kms_key, account=account)
        created = self.call("check the staging bucket", stager.ensure_bucket, create=plan.bucket_is_default,
                            region=region)  # fmt: skip
        if created:
            self.say(f"cloudddp: created the staging bucket s3://{plan.bucket} (public access blocked)")
        for warning in plan.warnings:
            self.say(f"cloudddp: warning: {warning}")
        self.upload_code(stager, request)
        staged: list[Upload] = []  # the inputs this launch staged, for the error should a later step fail
        try:
            payload = self.stage_uploads(stager, plan, payload, staged)
            sagemaker = self.client("sagemaker", region)
            response = self.call(f"create the training job {request.name}", sagemaker.create_training_job, **payload)
        except CloudDDPError as exc:
            raise CloudDDPError(f"{exc} {self.remove_staged(stager, plan, staged)}") from None
        return JobHandle(
            provider=self.name, job_id=request.name,
            # As sent: staged channels read the published version, not the dry run's placeholder.
            details={"arn": response.get("TrainingJobArn"), "region": region,
                     "request": dataclasses.replace(request, request=payload)},
        )  # fmt: skip

    def store(self, stager: StagingBucket, uri: str) -> S3Store:
        """The staging engine's adapter for `uri` in the staging bucket, with the job's KMS key.

        With the session's credentials, files up to 64 MiB go through cloudddp's own PUT client, aimed
        where the S3 client sends (staging/s3_store.py `aimed_puts`)."""
        region = stager.s3.meta.region_name
        credentials = self.session(region).get_credentials()
        return S3Store(stager.s3, parse_location(uri), region, kms_key=stager.kms_key, credentials=credentials)

    def upload_code(self, stager: StagingBucket, request: JobRequest) -> None:
        code: CodeUpload = request.before_submit.code
        spec = request.spec
        folder = code.target.rsplit("/", 1)[0]
        with tempfile.TemporaryDirectory(prefix="cloudddp-") as tmp:
            archive = pack_source(spec.source_dir, Path(tmp) / code.target.rsplit("/", 1)[1], code.job_config)
            self.call("upload the source archive", copy_folder, local=archive.path, store=self.store(stager, folder))
        self.say(
            f"cloudddp: uploaded the source ({len(archive.files)} files, {decimal(archive.size)}) -> {code.target}"
        )

    def stage_uploads(
        self, stager: StagingBucket, plan: SageMakerStaging, payload: dict[str, Any], staged: list[Upload]
    ) -> dict[str, Any]:
        """Stage local input folders (each channel then reads the published version; each one staged is added to
        `staged`), then copy a local checkpoint folder to resume from. Returns the request with the channels'
        version URIs."""
        versions: dict[str, str] = {}
        for item in plan.inputs:
            result: StageResult = self.call(f"stage {item.source}", stage, local=item.source,
                                            store=self.store(stager, item.target))  # fmt: skip
            staged.append(item)
            versions[str(item.channel)] = result.uri
            files = counted(result.files, "file")
            self.say(f"cloudddp: staged {item.channel}: {files}, {result.changes()} -> {result.uri}")
        if plan.checkpoint:
            item = plan.checkpoint
            result = self.call(f"upload {item.source}", copy_folder, local=item.source,
                               store=self.store(stager, item.target))  # fmt: skip
            self.say(f"cloudddp: staged checkpoint: {len(result.uploaded)} uploaded "
                     f"({decimal(result.bytes_uploaded)}) -> {item.target}")  # fmt: skip
        return with_channel_uris(payload, versions)

    def remove_staged(self, stager: StagingBucket, plan: SageMakerStaging, staged: list[Upload]) -> str:
        """After a failed staging step or a refused CreateTrainingJob: delete what only this job would have used; say
        which staged inputs stay (`staged`: those staged in full, never one that failed or was not reached)."""
        removed: list[str] = []
        prefixes = [plan.code.target, *([plan.checkpoint.target] if plan.checkpoint else [])]
        try:
            for uri in prefixes:
                for key in stager.listing(split_uri(uri)[1]):  # every page: a checkpoint folder may be large
                    stager.s3.delete_object(Bucket=stager.bucket, Key=key)
                    removed.append(f"s3://{stager.bucket}/{key}")
        except (ClientError, BotoCoreError, CloudDDPError) as exc:
            reason = exc if isinstance(exc, CloudDDPError) else translate(exc, "delete objects")
            return f"Removing this launch's uploads failed too ({reason}); remove {prefixes} by hand."
        kept = (
            f" The staged inputs stay ({', '.join(i.target for i in staged)}): the next launch reuses them."
            if staged
            else ""
        )
        return f"Removed what this launch uploaded for the job: {', '.join(removed) or 'nothing'}.{kept}"

    # -- follow-up calls ----------------------------------------------------------------
    def on_job(self, job_id: str, operation: str, missing: tuple[str, ...], missing_code: str = "") -> Any:
        """SageMaker's `operation` (describe_training_job, stop_training_job) on the job. A job that does not exist (a
        ValidationException whose message holds one of `missing`, or the error `missing_code`) is named in one
        paragraph; any other AWS failure is translated."""
        sagemaker = self.client("sagemaker")
        action = f"{operation.removesuffix('_training_job')} the training job {job_id}"
        try:
            return getattr(sagemaker, operation)(TrainingJobName=job_id)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = error.get("Code"), str(error.get("Message", "")).lower()
            if (missing_code and code == missing_code) or (
                code == "ValidationException" and any(words in message for words in missing)
            ):
                raise CloudDDPError(
                    f"no SageMaker training job named {job_id!r} in {sagemaker.meta.region_name} "
                    f"(set AWS_REGION if it runs in another region)."
                ) from None
            raise translate(exc, action) from None
        except BotoCoreError as exc:
            raise translate(exc, action) from None

    def describe(self, job_id: str) -> dict[str, Any]:
        return dict(self.on_job(job_id, "describe_training_job", missing=("not found", "could not find")))

    @staticmethod
    def to_status(job_id: str, described: dict[str, Any]) -> JobStatus:
        status = described.get("TrainingJobStatus", "InProgress")
        secondary = described.get("SecondaryStatus", "")
        state = JOB_STATE_OF_SAGEMAKER_STATUS.get(status) or (
            "PENDING" if secondary in PENDING_SECONDARY else "RUNNING"
        )
        transitions = described.get("SecondaryStatusTransitions") or []
        reason = described.get("FailureReason") or ""
        if not reason and transitions:
            reason = transitions[-1].get("StatusMessage", "")
        nodes = {f"algo-{i + 1}": secondary or status for i in range(instance_count(described))}
        artifacts = (described.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
        return JobStatus(job_id=job_id, state=state, reason=reason, nodes=nodes, artifacts=artifacts)

    def status(self, job_id: str) -> JobStatus:
        return self.to_status(job_id, self.describe(job_id))

    def events(self, job_id: str) -> list[JobEvent]:
        """CreationTime, then DescribeTrainingJob's SecondaryStatusTransitions (Starting, Downloading, Training,
        Stopping, ...), each at its StartTime with its StatusMessage, and the job's end."""
        described = self.describe(job_id)
        events = (
            [JobEvent(described["CreationTime"].timestamp(), "", "submitted")] if "CreationTime" in described else []
        )
        for step in described.get("SecondaryStatusTransitions", []):
            message = f": {step['StatusMessage']}" if step.get("StatusMessage") else ""
            events.append(JobEvent(step["StartTime"].timestamp(), "", f"{step['Status']}{message}"))
        if "TrainingEndTime" in described:
            events.append(
                JobEvent(described["TrainingEndTime"].timestamp(), "", described["TrainingJobStatus"].lower())
            )
        return sorted(events, key=lambda event: event.time)

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        described = self.describe(job_id)
        secrets = described_secrets(described)
        tail = LogTail(self.client("logs"), job_id, page_size=self.log_page_size)
        last = ""
        while True:
            current = self.to_status(job_id, described)
            progress = f"{described.get('TrainingJobStatus')} - {described.get('SecondaryStatus', '')}"
            if follow and progress != last:
                yield f"[sagemaker] {job_id}: {progress}" + (f" ({current.reason})" if current.reason else "")
                last = progress
            for event in self.call(f"read the logs of {job_id}", tail.poll):
                yield event.line(secrets)
            if not follow:
                return
            if current.done:
                time.sleep(self.final_grace)
                for event in self.call(f"read the logs of {job_id}", tail.poll):
                    yield event.line(secrets)
                return
            time.sleep(self.poll_interval)
            described = self.describe(job_id)

    def cancel(self, job_id: str) -> None:
        # ResourceNotFound is StopTrainingJob's documented error (botocore's model); describe says ValidationException.
        self.on_job(job_id, "stop_training_job", missing=("could not find",), missing_code="ResourceNotFound")


@functools.cache
def known_regions() -> list[str]:
    """SageMaker's regions from botocore's bundled endpoint data (no AWS config is read)."""
    resolver = EndpointResolver(create_loader().load_data("endpoints"))
    prefix = service_model.model().endpoint_prefix  # "api.sagemaker"; the model read once, as the limits read it
    regions: list[str] = []
    for partition in ("aws", "aws-cn", "aws-us-gov"):
        regions += resolver.get_available_endpoints(prefix, partition_name=partition)
    return regions


def described_secrets(described: dict[str, Any]) -> list[str]:
    """The values of the job's own secret-named variables and hyperparameters, from its description: a token it
    prints (the toolkit logs every hyperparameter: "Training Env", SM_HPS, `--api_key VALUE`) is hidden on its own,
    as `launch` hides `secret_values(environment, hyperparameters)`. HyperParameters are JSON-encoded strings."""
    hyperparameters: dict[str, Any] = {}
    for key, value in (described.get("HyperParameters") or {}).items():
        try:
            hyperparameters[key] = json.loads(value)
        except (TypeError, ValueError):  # a value not sent by cloudddp: as it is
            hyperparameters[key] = value
    return secret_values(described.get("Environment") or {}, hyperparameters)


def instance_count(described: dict[str, Any]) -> int:
    """The job's instances: InstanceCount, or the sum of a heterogeneous cluster's InstanceGroups (SageMaker names
    the hosts algo-1..algo-N over all groups, as resourceconfig.json lists them)."""
    resources = described.get("ResourceConfig") or {}
    groups = resources.get("InstanceGroups") or []
    if groups:
        return sum(int(group.get("InstanceCount") or 0) for group in groups)
    return int(resources.get("InstanceCount") or 0)


def with_channel_uris(payload: dict[str, Any], uris: dict[str, str]) -> dict[str, Any]:
    """The request with each staged channel's S3Uri set to the version staging published."""
    channels = []
    for channel in payload.get("InputDataConfig", []):
        if channel["ChannelName"] in uris:
            source = {**channel["DataSource"]["S3DataSource"], "S3Uri": uris[channel["ChannelName"]]}
            channel = {**channel, "DataSource": {**channel["DataSource"], "S3DataSource": source}}
        channels.append(channel)
    return {**payload, "InputDataConfig": channels} if channels else payload
