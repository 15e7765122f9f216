"""cloudddp's SageMaker provider as the SageMaker SDK v2 drives it: v2's job names, profiler and debugger fields.

Everything else in the request is the provider's own (cloudddp.providers.sagemaker.request); what
this adds is rendered in `render`, so the dry run is what `submit` sends.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from cloudddp.cluster.sagemaker import DISTRIBUTION_GROUPS
from cloudddp.job_spec import JobSpec
from cloudddp.providers.base import JobRequest
from cloudddp.providers.sagemaker import validation
from cloudddp.providers.sagemaker.provider import SageMakerProvider
from cloudddp.sagemaker.arguments import Arguments
from cloudddp.sagemaker.debugger import debugger_request
from cloudddp.sagemaker.naming import name_from_base


class SDKv2SageMaker(SageMakerProvider):
    """`exact` as the job name, else base + v2 timestamp; the estimator's ProfilerConfig, DebugHookConfig,
    TensorBoardOutputConfig and v2's distribution hyperparameters that cloudddp's job side also reads, as v2 sends
    them."""

    def __init__(self, args: Arguments, exact: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.args, self.exact = args, exact

    def job_name(self, spec: JobSpec) -> str:
        return validation.check_job_name(self.exact or name_from_base(spec.name))

    def render(self, spec: JobSpec, account: str | None = None) -> JobRequest:
        request = super().render(spec, account)
        payload, a = dict(request.request), self.args
        if extra := distribution_hyperparameters(a):
            payload["HyperParameters"] = {**payload["HyperParameters"], **extra}
            validation.check_hyperparameters(payload["HyperParameters"])
        sm = spec.sagemaker
        payload.update(
            debugger_request(
                output_path=payload["OutputDataConfig"]["S3OutputPath"], region=self.region(spec),
                instance_type=None if sm.instance_groups else sm.instance_type,
                disable_profiler=a.disable_profiler, debugger_hook=a.debugger_hook,
                checkpoint_s3_uri=sm.checkpoint_s3, checkpoint_local_path=sm.checkpoint_local_path,
            )
        )  # fmt: skip
        if a.tensorboard:
            payload["TensorBoardOutputConfig"] = dict(a.tensorboard)
        return dataclasses.replace(request, request=payload)


def distribution_hyperparameters(args: Arguments) -> dict[str, str]:
    """Distribution keys v2 sends that cloudddp's launcher reads too (encoded, as sent).

    v2 sends the distribution's instance groups as `sagemaker_distribution_instance_groups` for pytorchddp
    (rewritten to smdistributed: estimator.py `Framework._distribution_configuration`), but not for
    torch_distributed (pytorch/estimator.py `_pytorch_distribution_configuration`); recorded in
    sdk2_requests/.../instance_groups*.json. The launcher gets the groups from cloudddp_job.json either way.
    """
    if args.distribution == "pytorchddp" and args.distribution_groups:
        return {DISTRIBUTION_GROUPS: json.dumps(args.distribution_groups)}
    return {}
