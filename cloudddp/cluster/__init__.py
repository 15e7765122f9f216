"""Reading the platform's environment into this node's `ClusterPlan` (and writing it, for the emulation).

One module per environment, each an `Environment` (see `cloudddp.cluster.environment`): `NAME`,
`detect(environ) -> bool`, `plan(environ, options) -> ClusterPlan`, and for the platforms the
local provider emulates `emulate(cluster) -> [EmulatedNode]`. Tried in the fixed order of `ENVIRONMENTS`.
`--provider NAME` / `CLOUDDDP_PROVIDER` skip detection. Two environments detecting at
once is an error (contradictory variables), resolved by naming the provider. Each module also declares
`CLAIMS` (`cloudddp.cluster.claims`): a node with some of a platform's variables belongs to that platform,
and lacking the rest is an error naming one, never a one-node standalone run.
"""

from __future__ import annotations

from collections.abc import Mapping

from cloudddp.cluster import awsbatch, kubeflow, oci, pbs, sagemaker, skypilot, slurm, standalone
from cloudddp.cluster.claims import made_claims, require_whole
from cloudddp.cluster.environment import EmulatedEnvironment, Environment
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import ClusterPlan
from cloudddp.errors import CloudDDPError

# Fixed, documented detection order (most specific contract first).
ENVIRONMENTS: tuple[Environment, ...] = (sagemaker, oci, kubeflow, awsbatch, skypilot, slurm, pbs)
BY_NAME: dict[str, Environment] = {m.NAME: m for m in (*ENVIRONMENTS, standalone)}  # pyright: ignore[reportAssignmentType]  # a module is an Environment
# What `--emulate` / `local.emulate` may name: the platform writes its own contract (`emulate`).
EMULATIONS: dict[str, EmulatedEnvironment] = {
    "sagemaker": sagemaker, "oci": oci, "kubeflow": kubeflow, "slurm": slurm, "none": standalone,
}  # fmt: skip
ALIASES = {"local": "standalone", "none": "standalone", "kubernetes": "kubeflow", "k8s": "kubeflow"}

__all__ = [
    "BY_NAME", "EMULATIONS", "ENVIRONMENTS", "ClusterPlan", "DetectOptions", "detect_provider",
    "platform_torchrun_args", "platform_worker_environment", "resolve_plan",
]  # fmt: skip


def detect_provider(environ: Mapping[str, str], provider: str | None = None) -> Environment:
    """The environment module for this node: named, else the one that detects."""
    name = provider or environ.get("CLOUDDDP_PROVIDER") or ""
    if name:
        name = ALIASES.get(name.lower(), name.lower())
        if name not in BY_NAME:
            raise CloudDDPError(
                f"unknown provider {name!r} (from --provider or CLOUDDDP_PROVIDER); "
                f"choose one of: {', '.join(sorted(BY_NAME))}."
            )
        return BY_NAME[name]
    found = [m for m in ENVIRONMENTS if m.detect(environ)]
    if not found:
        # Some of a platform's variables without the rest: still that platform's node (resolve_plan refuses it,
        # naming what is missing), never a standalone one.
        found = [m for m in ENVIRONMENTS if made_claims(m.CLAIMS, environ)]
    if len(found) > 1:
        names = ", ".join(m.NAME for m in found)
        raise CloudDDPError(
            f"contradictory environment: variables of several platforms are set ({names}). "
            f"Name the one this job runs on with --provider or CLOUDDDP_PROVIDER."
        )
    return found[0] if found else standalone


def platform_torchrun_args(plan: ClusterPlan) -> list[str]:
    """torchrun arguments the node's platform adds (its module's optional `torchrun_args(plan)`)."""
    hook = getattr(BY_NAME.get(plan.provider), "torchrun_args", None)
    return list(hook(plan)) if hook else []


def platform_worker_environment(plan: ClusterPlan, environ: Mapping[str, str], code_dir: str) -> dict[str, str]:
    """The environment the workers start from (the platform module's optional `worker_environment`)."""
    hook = getattr(BY_NAME.get(plan.provider), "worker_environment", None)
    return dict(hook(environ, code_dir)) if hook else dict(environ)


def resolve_plan(
    environ: Mapping[str, str], provider: str | None = None, options: DetectOptions | None = None
) -> ClusterPlan:
    module = detect_provider(environ, provider)
    require_whole(module.CLAIMS, environ)
    return module.plan(environ, options or DetectOptions())
