"""Training job names as the SageMaker SDK v2 makes them (used by sdk_provider.SDKv2SageMaker).

v2 (aws/sagemaker-python-sdk tag v2.257.6, `src/sagemaker/utils.py`): `fit(job_name=X)` uses X
exactly; otherwise `name_from_base(base)`: the base trimmed so that `<base>-<YYYY-mm-dd-HH-MM-SS-mmm>`
fits 63 characters.
"""

from __future__ import annotations

import time

MAX_LENGTH = 63


def name_from_base(base: str, moment: float | None = None) -> str:
    """v2's `name_from_base`, its timestamp v2's `sagemaker_timestamp()`: UTC, millisecond precision."""
    moment = time.time() if moment is None else moment
    milliseconds = f"{int(moment * 1000) % 1000:03d}"
    timestamp = time.strftime(f"%Y-%m-%d-%H-%M-%S-{milliseconds}", time.gmtime(moment))
    return f"{base[: MAX_LENGTH - len(timestamp) - 1]}-{timestamp}"
