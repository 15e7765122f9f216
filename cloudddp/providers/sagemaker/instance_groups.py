"""Heterogeneous clusters: `ResourceConfig.InstanceGroups` of CreateTrainingJob, checked as SageMaker would.

Rules from botocore's SageMaker service model (API 2017-07-24; a test reads them there):
`InstanceGroups` holds at most 5 `InstanceGroup`s, each with `InstanceGroupName` (1-64
characters), `InstanceType` (the `TrainingInstanceType` enum) and `InstanceCount`
(`TrainingInstanceCount`, at least 0). The SageMaker SDK v2 refuses `instance_count` /
`instance_type` beside `instance_groups` (aws/sagemaker-python-sdk v2.257.6,
`src/sagemaker/job.py: _Job._prepare_resource_config`): the request carries one or the other.

Which groups join the distributed job (`distribution_groups`) reaches cloudddp's launcher as
`--instance-groups` in `cloudddp_job.json`; hosts of other groups sit the job out. That list is
comma-separated, so a group name holding a comma is refused, and at least one chosen group must
have an instance (else no host would run the script, after the others were billed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cloudddp.errors import CloudDDPError
from cloudddp.providers.sagemaker.service_model import check_shape, maximum

GROUPS, GROUP_NAME = "ResourceConfig.InstanceGroups", "ResourceConfig.InstanceGroups.member.InstanceGroupName"


class InstanceGroupSetting(BaseModel):
    """One instance group of a heterogeneous cluster (`sagemaker.instance_groups` in a job spec)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    instance_type: str
    count: int = Field(default=1)

    def to_request(self) -> dict[str, Any]:
        """The `InstanceGroup` shape, keys in the order the SDK v2's `InstanceGroup._to_request_dict` uses."""
        return {"InstanceGroupName": self.name, "InstanceType": self.instance_type, "InstanceCount": self.count}


def check_instance_groups(
    groups: Sequence[InstanceGroupSetting],
    distribution_groups: Sequence[str] | None,
    known_types: frozenset[str],
    *,
    instance_type_set: bool,
    nodes_set: bool,
) -> None:
    """Raise for anything CreateTrainingJob (or the SDK v2 before it) would refuse."""
    if not groups:
        if distribution_groups:
            raise CloudDDPError(
                f"sagemaker.distribution_groups {list(distribution_groups)!r} names instance groups, but "
                f"sagemaker.instance_groups is empty: give the groups, or drop distribution_groups."
            )
        return
    if instance_type_set or nodes_set:
        given = " and ".join(n for n, s in (("--instance-type", instance_type_set), ("--nodes", nodes_set)) if s)
        raise CloudDDPError(
            f"sagemaker.instance_groups is set, so {given} must not be: a heterogeneous cluster's types and "
            f"counts are its groups' (SageMaker takes ResourceConfig.InstanceGroups or InstanceType/InstanceCount, "
            f"not both)."
        )
    if len(groups) > maximum(GROUPS):
        raise CloudDDPError(
            f"sagemaker.instance_groups has {len(groups)} groups; SageMaker takes at most {maximum(GROUPS)}."
        )
    seen: set[str] = set()
    for group in groups:
        check_group(group, seen, known_types)
        seen.add(group.name)
    if sum(g.count for g in groups) < 1:
        raise CloudDDPError("sagemaker.instance_groups has no instance at all: give at least one group a count >= 1.")
    check_distribution_groups(groups, distribution_groups)


def check_group(group: InstanceGroupSetting, seen: set[str], known_types: frozenset[str]) -> None:
    """One group's name, type and count (`seen`: the names of the groups before it)."""
    what = f"sagemaker.instance_groups[{group.name!r}]"
    if not 1 <= len(group.name) <= maximum(GROUP_NAME):
        raise CloudDDPError(
            f"sagemaker.instance_groups: the group name {group.name!r} is {len(group.name)} characters; "
            f"SageMaker takes 1-{maximum(GROUP_NAME)}."
        )
    if check_shape(GROUP_NAME, group.name):  # its pattern `.+` takes no line break (Java's ".")
        raise CloudDDPError(f"sagemaker.instance_groups: the group name {group.name!r} holds a line break.")
    if "," in group.name:
        # SageMaker takes it (InstanceGroupName is `.+`), but the launcher splits --instance-groups on ",".
        raise CloudDDPError(
            f"sagemaker.instance_groups: the group name {group.name!r} holds a comma; the groups reach cloudddp's "
            f"launcher as one comma-separated --instance-groups list, so a name cannot hold one. Rename the group."
        )
    if group.name in seen:
        raise CloudDDPError(
            f"sagemaker.instance_groups names the group {group.name!r} twice; each group needs its own name "
            f"(hosts find their group by it)."
        )
    if group.instance_type not in known_types:
        raise CloudDDPError(
            f"{what}.instance_type {group.instance_type!r} is not a SageMaker training instance type (not in "
            f"the TrainingInstanceType list of botocore's SageMaker service model)."
        )
    if isinstance(group.count, bool) or group.count < 0:
        raise CloudDDPError(f"{what}.count is {group.count}; SageMaker takes 0 or more instances per group.")


def check_distribution_groups(
    groups: Sequence[InstanceGroupSetting], distribution_groups: Sequence[str] | None
) -> None:
    """The groups chosen for distribution exist, and at least one of them has an instance to run the script."""
    counts = {g.name: g.count for g in groups}
    unknown = [name for name in distribution_groups or [] if name not in counts]
    if unknown:
        raise CloudDDPError(
            f"sagemaker.distribution_groups names {', '.join(map(repr, unknown))}, which is not among "
            f"sagemaker.instance_groups ({', '.join(sorted(counts))})."
        )
    if distribution_groups and not any(counts[name] for name in distribution_groups):
        # The job side would find no host to run on (the group missing from resourceconfig.json, or with no
        # hosts), after the other groups' instances were started and billed.
        raise CloudDDPError(
            f"sagemaker.distribution_groups {list(distribution_groups)!r} names only groups with count 0, so no "
            f"instance would run the script: give one of them a count >= 1, or choose a group that has instances."
        )


def image_instance_type(groups: Sequence[InstanceGroupSetting]) -> str:
    """The instance type the framework image is chosen for: the first GPU group's, else the first group's.

    As the SDK v2's `EstimatorBase._get_instance_type` (families starting with g or p are GPU).
    """
    for group in groups:
        family = group.instance_type.split(".")[1] if group.instance_type.count(".") >= 2 else ""
        if family[:1] in ("g", "p"):
            return group.instance_type
    return groups[0].instance_type
