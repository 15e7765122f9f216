"""`--interrupt-after SECONDS`: the local SageMaker emulation interrupts a job as managed spot does.

SageMaker managed spot training, when capacity is reclaimed: every host's container gets SIGTERM
(the script may checkpoint), the job is "Interrupted"; SageMaker has been uploading each host's
`/opt/ml/checkpoints` to `CheckpointConfig.S3Uri`, and when capacity returns it starts every host
again with that prefix copied back into `/opt/ml/checkpoints` ("Managed Spot Training" and
"Use Checkpoints" in the SageMaker developer guide). Here the S3 prefix is the job's `checkpoint`
folder when the nodes share one (they then write straight into it), else `<run>/checkpoint-store/`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

STORE = "checkpoint-store"


def node_checkpoint_dirs(job: dict[str, Any]) -> list[Path]:
    return [Path(node["checkpoint_dir"]) for node in job["nodes"] if node.get("checkpoint_dir")]


def sync_up(job: dict[str, Any], run_dir: Path) -> Path | None:
    """Each host's checkpoint folder into the store (a later host's file of the same name wins, as in S3)."""
    folders = [f for f in node_checkpoint_dirs(job) if f.is_dir() and not f.is_symlink()]
    if not folders:
        return None  # the nodes share the job's checkpoint folder: nothing to upload
    store = run_dir / STORE
    store.mkdir(exist_ok=True)
    for folder in folders:
        shutil.copytree(folder, store, dirs_exist_ok=True)
    return store


def sync_down(job: dict[str, Any], store: Path | None) -> None:
    """The store into every host's checkpoint folder before the hosts start again."""
    if store is None:
        return
    for folder in node_checkpoint_dirs(job):
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(store, folder, dirs_exist_ok=True)
