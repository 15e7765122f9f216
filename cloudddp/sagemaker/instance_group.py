"""`InstanceGroup`: one group of a heterogeneous cluster, as the SageMaker SDK v2 takes it.

    from cloudddp.sagemaker import InstanceGroup   # was: from sagemaker.instance_group import InstanceGroup

Same constructor and request shape as aws/sagemaker-python-sdk v2.257.6 `src/sagemaker/instance_group.py`;
`PyTorch(instance_groups=...)` also takes the SDK's own objects (anything with these three attributes).
"""

from __future__ import annotations

from typing import Any


class InstanceGroup:
    """A named group of `instance_count` instances of `instance_type`."""

    def __init__(
        self,
        instance_group_name: str | None = None,
        instance_type: str | None = None,
        instance_count: int | None = None,
    ) -> None:
        self.instance_group_name = instance_group_name
        self.instance_type = instance_type
        self.instance_count = instance_count

    def _to_request_dict(self) -> dict[str, Any]:
        return {
            "InstanceGroupName": self.instance_group_name,
            "InstanceType": self.instance_type,
            "InstanceCount": self.instance_count,
        }

    def __repr__(self) -> str:
        return f"InstanceGroup({self.instance_group_name!r}, {self.instance_type!r}, {self.instance_count!r})"
