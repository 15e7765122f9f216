"""`ProfilerConfig` and `DebugHookConfig` as the SageMaker SDK v2 sends them for `disable_profiler` and
`debugger_hook_config` (the only values cloudddp takes: `disable_profiler` True/False, `debugger_hook_config`
None or False; configured debugger hooks, rules and profiler configs are refused by name).

From aws/sagemaker-python-sdk v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0), checked
against the requests sagemaker 2.257.7 sends (tests/providers/sagemaker_sdk/sdk2_requests):

- profiler (`estimator.py`: `EstimatorBase.__init__`, `_prepare_profiler_for_training`;
  `debugger/profiler_config.py: ProfilerConfig._to_request_dict`): turned off by `disable_profiler=True`, in
  `fw_utils.PROFILER_UNSUPPORTED_REGIONS`, or on Trainium (`_instance_type_supports_profiler`), then
  `{"DisableProfiler": True}`; otherwise `{"S3OutputPath": <output_path>, "DisableProfiler": False}`.
- debugger hook (`Framework._validate_and_set_debugger_configs`): `debugger_hook_config=None` becomes
  `{"S3OutputPath": <output_path>, "CollectionConfigurations": []}` unless the region is in
  `fw_utils.DEBUGGER_UNSUPPORTED_REGIONS`, or both `checkpoint_s3_uri` and `checkpoint_local_path` are set
  (SMDebug does not support distributed jobs with checkpoints: the PyTorch estimator always counts as
  distributed there, its `distribution` being `{}` rather than None); `False` sends nothing.
"""

from __future__ import annotations

import re
from typing import Any

# fw_utils.DEBUGGER_UNSUPPORTED_REGIONS and PROFILER_UNSUPPORTED_REGIONS (equal in v2.257.6)
UNSUPPORTED_REGIONS = frozenset({
    "us-iso-east-1", "us-isob-east-1", "ap-southeast-3", "ap-southeast-4", "eu-south-2", "me-central-1",
    "ap-south-2", "eu-central-2", "us-gov-east-1",
})  # fmt: skip
TRAINIUM = re.compile(r"^ml[\._]trn[a-z\d\-]*\.?\w*$")  # fw_utils._instance_type_supports_profiler


def debugger_request(
    *,
    output_path: str,
    region: str,
    instance_type: str | None,
    disable_profiler: bool,
    debugger_hook: bool,
    checkpoint_s3_uri: str | None,
    checkpoint_local_path: str | None,
) -> dict[str, Any]:
    """The ProfilerConfig (always) and DebugHookConfig (when on) fields of the SDK v2's CreateTrainingJob."""
    supported = region.lower() not in UNSUPPORTED_REGIONS
    profiler_off = disable_profiler or not supported or bool(instance_type and TRAINIUM.match(instance_type))
    fields: dict[str, Any] = {
        "ProfilerConfig": {"DisableProfiler": True}
        if profiler_off
        else {"S3OutputPath": output_path, "DisableProfiler": False}
    }
    if debugger_hook and supported and not (checkpoint_s3_uri and checkpoint_local_path):
        fields["DebugHookConfig"] = {"S3OutputPath": output_path, "CollectionConfigurations": []}
    return fields
