"""cloudddp's SageMaker provider as the SageMaker SDK v2 drives it: v2's job names, profiler and debugger fields.

Everything else in the request is the provider's own (cloudddp.providers.sagemaker.request); what
this adds is rendered in `render`, so the dry run is what `submit` sends.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cloudddp.job_spec import JobSpec
from cloudddp.providers.base import JobRequest
from cloudddp.providers.sagemaker import validation
from cloudddp.providers.sagemaker.provider import SageMakerProvider
from cloudddp.sagemaker.debugger import debugger_request
from cloudddp.sagemaker.naming import name_from_base


@dataclasses.dataclass(frozen=True)
class DebuggerChoice:
    """The estimator's `disable_profiler` and `debugger_hook_config` (None: on, False: off)."""

    disable_profiler: bool = False
    debugger_hook: bool = True
    tensorboard: dict[str, str] | None = (
        None  # TensorBoardOutputConfig as v2 sends it (cloudddp/sagemaker/tensorboard.py)
    )


class SDKv2SageMaker(SageMakerProvider):
    """`exact` as the job name, else base + v2 timestamp; ProfilerConfig/DebugHookConfig and v2's distribution
    hyperparameters that cloudddp's job side also reads, as v2 sends them."""

    def __init__(
        self,
        exact: str | None = None,
        debugger: DebuggerChoice | None = None,
        hyperparameters: dict[str, str] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.exact = exact
        self.debugger = debugger or DebuggerChoice()
        self.extra_hyperparameters = dict(hyperparameters or {})  # v2's own keys, already encoded

    def job_name(self, spec: JobSpec) -> str:
        return validation.check_job_name(self.exact or name_from_base(spec.name))

    def render(self, spec: JobSpec, account: str | None = None) -> JobRequest:
        request = super().render(spec, account)
        payload = dict(request.request)
        if self.extra_hyperparameters:
            payload["HyperParameters"] = {**payload["HyperParameters"], **self.extra_hyperparameters}
            validation.check_hyperparameters(payload["HyperParameters"])
        sm = spec.sagemaker
        payload.update(
            debugger_request(
                output_path=payload["OutputDataConfig"]["S3OutputPath"], region=self.region(spec),
                instance_type=None if sm.instance_groups else sm.instance_type,
                disable_profiler=self.debugger.disable_profiler, debugger_hook=self.debugger.debugger_hook,
                checkpoint_s3_uri=sm.checkpoint_s3, checkpoint_local_path=sm.checkpoint_local_path,
            )
        )  # fmt: skip
        if self.debugger.tensorboard:
            payload["TensorBoardOutputConfig"] = dict(self.debugger.tensorboard)
        return dataclasses.replace(request, request=payload)
