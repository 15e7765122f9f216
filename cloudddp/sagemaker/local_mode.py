"""`instance_type="local"` / `"local_gpu"`: the training job on this machine, no Docker.

What SageMaker does around the container, done around cloudddp's local provider (which
lays out each emulated node like /opt/ml and runs cloudddp's launcher there). Behaviour
follows the SageMaker SDK v2's own (Docker) local mode, aws/sagemaker-python-sdk tag
v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0):

- channels: an S3 URI is fetched once as `sagemaker.utils.download_folder` does (the URI as one
  object first, else every object under the prefix, relative paths kept, folder markers skipped,
  nothing written outside the target); `file://` folders are used in place. The local provider
  then puts each channel into every node's `input/data/<channel>`.
- checkpoints: objects under `checkpoint_s3_uri` are restored into the folder every node's
  checkpoint path points at, and the folder is synced back to it after the job, failed or not
  (SageMaker syncs it during the job).
- artifacts (`local/image.py: retrieve_artifacts`): every node's model folder merged (a later
  host's file wins, "as the official SageMaker Training Service"), tarred into `model.tar.gz`;
  the nodes' `output/data` into `output.tar.gz`; both uploaded to `{output_path}/{job}/output/`,
  or, for a `file://` output_path, copied into that folder (`local/utils.py: move_to_destination`).
  As in v2 (`_SageMakerContainer.train` calls `retrieve_artifacts` in a `finally:`), a failed job's
  artifacts are uploaded too.
- TensorBoard (`tensorboard_output_config`, a cloudddp addition: v2's local mode leaves it out): the script
  writes to the config's LocalPath, which each emulated host has under its own folder as it has /opt/ml
  (the default /opt/ml/output/tensorboard is `$SM_OUTPUT_DIR/tensorboard`); when the job ends, failed or
  not, every host's folder is uploaded to `{S3OutputPath}/{job}/tensorboard-output/`, where SageMaker puts it
  (v2's `latest_job_tensorboard_artifacts_path`).
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker.tensorboard import DEFAULT_LOCAL_PATH as DEFAULT_TENSORBOARD_PATH

NODE = re.compile(r"algo-(\d+)")
OPT_ML = "/opt/ml/"
DOWNLOAD_THREADS = 8


# The distribution keys v2 adds for each strategy cloudddp takes (pytorch/estimator.py
# `_pytorch_distribution_configuration`; pytorchddp is first rewritten to smdistributed dataparallel,
# whose keys come from estimator.py `Framework._distribution_configuration`).
DISTRIBUTION_KEYS: dict[str, dict[str, Any]] = {
    "torch_distributed": {"sagemaker_torch_distributed_enabled": True},
    "pytorchddp": {"sagemaker_distributed_dataparallel_enabled": True,
                   "sagemaker_distributed_dataparallel_custom_mpi_options": ""},
}  # fmt: skip


def container_hyperparameters(
    hyperparameters: dict[str, Any], *, entry_point: str, source_dir: str, region: str, job_name: str,
    distribution: str | None, instance_type: str,
) -> dict[str, Any]:  # fmt: skip
    """hyperparameters.json as the SDK v2's local-mode containers get it, values decoded (the emulation encodes).

    The request v2 hands its LocalSagemakerClient (recorded: sdk2_requests/.../local*.json) carries the
    user's values plus `Framework._script_mode_hyperparam_update`'s keys and the distribution's; its
    `_SageMakerContainer` writes them to every host, with a `file://` submit directory replaced by the
    folder the code is mounted at (`local/image.py: _update_local_src_path`, /opt/ml/code). Here the code
    runs from `source_dir` itself, so that is the folder named. `sagemaker_job_name` is replaced by the
    local job's own name when the nodes are laid out (cloudddp.cluster.sagemaker.emulate).
    """
    keys: dict[str, Any] = {
        "sagemaker_submit_directory": str(Path(source_dir).resolve()),
        "sagemaker_program": entry_point,
        "sagemaker_container_log_level": 20,
        "sagemaker_job_name": job_name,
        "sagemaker_region": region,
    }
    if distribution:
        keys.update(DISTRIBUTION_KEYS[distribution], sagemaker_instance_type=instance_type)
    return {**hyperparameters, **keys}


def split_s3(uri: str, what: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or len(uri) <= 5:
        raise CloudDDPError(f"{what}={uri!r} is not an s3:// URI.")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def _inside(target: Path, relative: str, key: str) -> Path:
    path = (target / relative).resolve()
    if path != target.resolve() and target.resolve() not in path.parents:
        raise CloudDDPError(f"the S3 object {key!r} would land outside {target} (its key has '..' in it).")
    return path


def download_prefix(s3: Any, uri: str, target: Path, what: str) -> int:
    """The object `uri` itself, else every object under it; returns how many files were written."""
    bucket, prefix = split_s3(uri, what)
    prefix = prefix.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    if prefix and not prefix.endswith("/"):
        try:
            s3.head_object(Bucket=bucket, Key=prefix)
        except s3.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                raise
        else:
            s3.download_file(bucket, prefix, str(_inside(target, os.path.basename(prefix), prefix)))
            return 1
    wanted: list[tuple[str, Path]] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            key = item["Key"]
            if not key.endswith("/"):
                wanted.append((key, _inside(target, key[len(prefix) :].lstrip("/"), key)))
    for _, path in wanted:
        path.parent.mkdir(parents=True, exist_ok=True)
    # Many small files (images) are latency-bound: several requests in flight (boto3 clients are thread-safe).
    with ThreadPoolExecutor(max_workers=DOWNLOAD_THREADS) as pool:
        list(pool.map(lambda item: s3.download_file(bucket, item[0], str(item[1])), wanted))
    return len(wanted)


def channel_folder(uri: str, channel: str) -> Path | None:
    """A file:// channel's folder (used in place), or None for S3."""
    if uri.startswith("file://"):
        folder = Path(uri[len("file://") :])
        if not folder.exists():
            raise CloudDDPError(f"fit(inputs={{{channel!r}: {uri!r}}}): {folder} does not exist.")
        return folder
    if not uri.startswith("s3://"):
        raise CloudDDPError(
            f"fit(inputs={{{channel!r}: {uri!r}}}): a channel is an s3:// or file:// URI (as in the SageMaker SDK)."
        )
    return None


def fetch_channels(s3: Any, inputs: dict[str, str], work: Path, say: Any) -> dict[str, str]:
    """Each channel as a local folder the local provider can lay out on every node."""
    folders: dict[str, str] = {}
    for channel, uri in inputs.items():
        local = channel_folder(uri, channel)
        if local is None:
            local = work / "input" / channel
            count = download_prefix(s3, uri, local, f"fit(inputs={{{channel!r}: ...}})")
            if count == 0:
                raise CloudDDPError(
                    f"fit(inputs={{{channel!r}: {uri!r}}}): no S3 objects under that URI (SageMaker fails such a "
                    f"job too). Check the URI, or upload the data first."
                )
            say(f"cloudddp: local mode: channel {channel}: {count} files from {uri}")
        folders[channel] = str(local)
    return folders


def upload_folder(s3: Any, folder: Path, uri: str, what: str = "checkpoint_s3_uri") -> int:
    bucket, prefix = split_s3(uri, what)
    count = 0
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = "/".join(p for p in (prefix.rstrip("/"), file.relative_to(folder).as_posix()) if p)
        s3.upload_file(str(file), bucket, key)
        count += 1
    return count


def node_folders(run_dir: Path) -> list[Path]:
    """The emulated hosts' /opt/ml folders in host order (algo-1, algo-2, ..., algo-10)."""
    nodes = [p for p in (run_dir / "nodes").iterdir() if NODE.fullmatch(p.name)]
    return sorted(nodes, key=lambda p: int(NODE.fullmatch(p.name).group(1)))  # type: ignore[union-attr]


def tar_merged(folders: list[Path], target: Path) -> int:
    """One tar.gz of the folders' files, paths relative to each folder; a later folder's file wins."""
    members: dict[str, Path] = {}
    for folder in folders:
        if folder.is_dir():
            for file in sorted(p for p in folder.rglob("*") if p.is_file()):
                members[file.relative_to(folder).as_posix()] = file
    with tarfile.open(target, "w:gz") as tar:
        for name, file in sorted(members.items()):
            tar.add(file, arcname=name)
    return len(members)


@dataclass
class LocalJob:
    """What local mode prepared for one job, and what it uploads when the job is done."""

    work: Path
    inputs: dict[str, str]
    output_path: str
    checkpoint_s3_uri: str | None = None
    checkpoint_dir: Path | None = None
    tensorboard: dict[str, str] | None = None  # the request's TensorBoardOutputConfig (S3OutputPath, LocalPath)

    @classmethod
    def prepare(
        cls, s3: Any, work: Path, inputs: dict[str, str], output_path: str, checkpoint_s3_uri: str | None, say: Any
    ) -> LocalJob:
        if not output_path.startswith("file://"):
            split_s3(output_path, "output_path")
        job = cls(work=work, inputs=fetch_channels(s3, inputs, work, say), output_path=output_path)
        if checkpoint_s3_uri:
            job.checkpoint_s3_uri, job.checkpoint_dir = checkpoint_s3_uri, work / "checkpoints"
            restored = download_prefix(s3, checkpoint_s3_uri.rstrip("/") + "/", job.checkpoint_dir, "checkpoint_s3_uri")
            if restored:
                say(f"cloudddp: local mode: restored {restored} checkpoint files from {checkpoint_s3_uri}")
        return job

    def model_uri(self, job_name: str) -> str:
        if self.output_path.startswith("file://"):  # v2's local mode copies the archives into the folder itself
            return f"{self.output_path.rstrip('/')}/model.tar.gz"
        return f"{self.output_path.rstrip('/')}/{job_name}/output/model.tar.gz"

    def finish(self, s3: Any, run_dir: Path, job_name: str, say: Any) -> str:
        """Upload the checkpoints, model.tar.gz and output.tar.gz as SageMaker does, whether the job succeeded or
        failed (v2's local mode: `retrieve_artifacts` in a `finally:`); returns the model's URI.

        The checkpoints go first: SageMaker syncs them during the job, so they are there even if the rest fails."""
        if self.checkpoint_s3_uri and self.checkpoint_dir and self.checkpoint_dir.is_dir():
            synced = upload_folder(s3, self.checkpoint_dir, self.checkpoint_s3_uri)
            say(f"cloudddp: local mode: {synced} checkpoint files -> {self.checkpoint_s3_uri}")
        nodes = node_folders(run_dir)
        self.upload_tensorboard(s3, nodes, job_name, say)
        packed = self.work / "artifacts"
        packed.mkdir(parents=True, exist_ok=True)
        model_uri = self.model_uri(job_name)
        files = tar_merged([n / "model" for n in nodes], packed / "model.tar.gz")
        tar_merged([n / "output" / "data" for n in nodes], packed / "output.tar.gz")
        if model_uri.startswith("file://"):
            folder = Path(self.output_path[len("file://") :])
            folder.mkdir(parents=True, exist_ok=True)
            for name in ("model.tar.gz", "output.tar.gz"):
                shutil.copy2(packed / name, folder / name)
        else:
            bucket, model_key = split_s3(model_uri, "output_path")
            s3.upload_file(str(packed / "model.tar.gz"), bucket, model_key)
            s3.upload_file(str(packed / "output.tar.gz"), bucket, model_key.replace("model.tar.gz", "output.tar.gz"))
        say(f"cloudddp: local mode: model.tar.gz ({files} files from {len(nodes)} nodes) -> {model_uri}")
        return model_uri

    def upload_tensorboard(self, s3: Any, nodes: list[Path], job_name: str, say: Any) -> None:
        """Every host's TensorBoard folder (LocalPath under its /opt/ml) to {S3OutputPath}/{job}/tensorboard-output/."""
        if not self.tensorboard:
            return
        local = self.tensorboard.get("LocalPath") or DEFAULT_TENSORBOARD_PATH
        relative = local[len(OPT_ML) :] if local.startswith(OPT_ML) else local.lstrip("/")
        if ".." in Path(relative).parts:  # each host's folder only
            return
        uri = f"{self.tensorboard['S3OutputPath'].rstrip('/')}/{job_name}/tensorboard-output"
        count = sum(upload_folder(s3, node / relative, uri, "tensorboard_output_config") for node in nodes
                    if (node / relative).is_dir())  # fmt: skip
        say(f"cloudddp: local mode: TensorBoard: {count} files from {local} -> {uri}/")

    def clean(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
