"""Per-node directories and variables for each emulated platform: a thin caller of `cloudddp.cluster`.

Each platform module writes its own contract (`emulate`) beside the reader that the job-side
launcher uses (`plan`), so the emulation and the platform's reader cannot drift apart. This module
only turns a job spec into the `EmulatedCluster` they take.
"""

from __future__ import annotations

from pathlib import Path

from cloudddp.cluster import EMULATIONS
from cloudddp.cluster.environment import EmulatedCluster, EmulatedNode
from cloudddp.spec import JobSpec


def node_layouts(spec: JobSpec, run_dir: Path, job_name: str) -> list[EmulatedNode]:
    cluster = EmulatedCluster(
        nodes=spec.nodes,
        job_name=job_name,
        run_dir=run_dir,
        channels=tuple(sorted(spec.inputs)),
        hyperparameters=dict(spec.hyperparameters),
        nproc_per_node=spec.nproc_per_node if spec.nproc_per_node is not None else 1,
        checkpoint_path=spec.sagemaker.checkpoint_local_path,
    )
    return EMULATIONS[spec.local.emulate].emulate(cluster)
