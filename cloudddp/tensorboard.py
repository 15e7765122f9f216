"""`cloudddp tensorboard JOB`: where a job's TensorBoard logs are, and TensorBoard started on them (`--serve`).

Where: a run kept on this machine (the local provider's run folder, `find_run`) is searched for TensorBoard event
files (`events.out.tfevents.*`, wherever the script wrote them: `$SM_OUTPUT_DIR/tensorboard`, the model folder...),
and the folder that holds them all is the log folder; a SageMaker job that was sent a TensorBoardOutputConfig
(the SDK v2 drop-in's `tensorboard_output_config`) has them where SageMaker uploads them,
`{S3OutputPath}/{job}/tensorboard-output` (aws/sagemaker-python-sdk v2.257.7, src/sagemaker/estimator.py
`latest_job_tensorboard_artifacts_path`). TensorBoard itself is not a dependency: `--serve` runs the `tensorboard`
command where it is installed and says how to install it where it is not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError

EVENT_FILES = "events.out.tfevents.*"
NOT_INSTALLED = (
    "TensorBoard is not installed here: `pip install tensorboard`, then run this again (or run "
    "`tensorboard --logdir {where}` wherever it is installed)."
)


def event_folder(run: Path) -> Path | None:
    """The deepest folder under `run` that holds every TensorBoard event file in it, or None where there is none."""
    folders = sorted({file.parent for file in run.rglob(EVENT_FILES) if file.is_file()})
    return Path(os.path.commonpath(folders)) if folders else None


def log_location(provider: Any, job_id: str) -> str | None:
    """Where the job's TensorBoard logs are (a folder here, or an s3:// prefix), None where it has none."""
    find_run = getattr(provider, "find_run", None)
    if callable(find_run):
        return str(found) if (found := event_folder(Path(str(find_run(job_id))))) else None
    describe: Any = getattr(provider, "describe", None)
    if describe is not None:
        described: dict[str, Any] = describe(Path(job_id).name)
        config: dict[str, str] = described.get("TensorBoardOutputConfig") or {}
        if config.get("S3OutputPath"):
            return f"{config['S3OutputPath'].rstrip('/')}/{described['TrainingJobName']}/tensorboard-output"
    return None


def serve(where: str, run: Callable[[list[str]], int] | None = None) -> int:
    """TensorBoard on `where` until it is stopped (Ctrl-C); its exit code. Exit 2, saying so, where it is not
    installed."""
    program = shutil.which("tensorboard")
    if program is None:
        raise CloudDDPError(NOT_INSTALLED.format(where=where))
    command = [program, "--logdir", where]
    if run is not None:
        return run(command)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:
        return 130
