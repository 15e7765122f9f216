"""Per-node directories and variables for each emulated platform: a thin caller of `cloudddp.cluster`.

Each platform module writes its own contract (`emulate`) beside the reader that the job-side
launcher uses (`plan`), so the emulation and the platform's reader cannot drift apart. This module
only turns a job spec into the `EmulatedCluster` they take.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cloudddp.cluster import EMULATIONS
from cloudddp.cluster.environment import EmulatedCluster, EmulatedNode

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec


def node_layouts(spec: JobSpec, run_dir: Path, job_name: str) -> list[EmulatedNode]:
    hyperparameters: dict[str, object] = dict(spec.hyperparameters)
    if spec.local.emulate == "sagemaker":
        # As the SDK adds them to every job (the drop-in's local mode and the SageMaker provider do too): the
        # toolkit's SM_USER_ENTRY_POINT, SM_MODULE_NAME and SM_MODULE_DIR come from them (sagemaker_toolkit_env).
        hyperparameters.setdefault("sagemaker_program", spec.entry_point)
        hyperparameters.setdefault("sagemaker_submit_directory", str(Path(spec.source_dir).resolve()))
        hyperparameters.setdefault("sagemaker_job_name", job_name)  # SAGEMAKER_JOB_NAME, SM_TRAINING_ENV's job_name
    cluster = EmulatedCluster(
        nodes=spec.nodes,
        job_name=job_name,
        run_dir=run_dir,
        channels=tuple(sorted(spec.inputs)),
        hyperparameters=hyperparameters,
        nproc_per_node=spec.nproc_per_node if spec.nproc_per_node is not None else 1,
        checkpoint_path=spec.sagemaker.checkpoint_local_path,
    )
    return EMULATIONS[spec.local.emulate].emulate(cluster)
