# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""instance_type="local": channels, checkpoints and artifacts around the local provider, as SageMaker does them.

Behaviour from the SageMaker SDK v2's own Docker local mode, aws/sagemaker-python-sdk tag v2.257.6
(commit fc582aaa46faf7b7e16ab1e13840869712174cd0): `sagemaker.utils.download_folder` for channels,
`sagemaker/local/image.py: retrieve_artifacts` for model.tar.gz/output.tar.gz under
`{output_path}/{job}/output/`, a later host's model file winning over an earlier one's; a failed job's
RuntimeError as `_stream_output` words it ("Failed to run: ... Process exited with code: N"); every channel read as
File whatever input_mode says (`write_config_files`). An entry point in a subfolder of source_dir imports modules
at the top of source_dir, as on SageMaker, where the training toolkit puts the code folder on PYTHONPATH
(aws/sagemaker-training-toolkit commit 33839372, src/sagemaker_training/entry_point.py `install` and
environment.py `write_env_vars`).
"""

from __future__ import annotations

import glob
import io
import json
import re
import tarfile
from pathlib import Path

import pytest
from sdk2_moto import MotoServer, moto  # noqa: F401  (moto is a fixture)

from cloudddp.errors import CloudDDPError
from cloudddp.sagemaker import PyTorch, Session, TensorBoardOutputConfig
from cloudddp.sagemaker.local_mode import download_prefix, tar_merged
from cloudddp.tensorboard import log_location

BUCKET = "local-mode"
SCRIPT = """\
import json, os, pathlib, sys
host = os.environ["SM_CURRENT_HOST"]
config = json.loads(pathlib.Path(os.environ["SM_INPUT_CONFIG_DIR"], "checkpointconfig.json").read_text())
checkpoints = pathlib.Path(config["LocalPath"])
restored = (checkpoints / "step.txt").read_text() if (checkpoints / "step.txt").exists() else "nothing"
rows = pathlib.Path(os.environ["SM_CHANNEL_TRAIN"], "part", "rows.csv").read_text()
notes = pathlib.Path(os.environ["SM_CHANNEL_NOTES"], "notes.txt").read_text()
model = pathlib.Path(os.environ["SM_MODEL_DIR"])
(model / "host.txt").write_text(host)
(model / f"rows-{host}.csv").write_text(rows + notes)
if host == "algo-1":
    (checkpoints / "step.txt").write_text("after " + restored)
pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"], f"{host}.txt").write_text(" ".join(sys.argv[1:]))
pathlib.Path(os.environ["SM_OUTPUT_DIR"], "region.txt").write_text(os.environ["AWS_REGION"])
tensorboard = pathlib.Path(os.environ["SM_OUTPUT_DIR"], "tensorboard")  # TensorBoardOutputConfig's default LocalPath
tensorboard.mkdir(exist_ok=True)
(tensorboard / f"events.out.tfevents.{host}").write_text(host)
sys.exit(int(os.environ.get("EXIT_CODE", "0")))
"""


# The local job's main script in a subfolder of source_dir, importing a module from the top of source_dir.
SUBFOLDER_SCRIPT = "import common  # source_dir/common.py, from source_dir/sub/train.py\n" + SCRIPT.replace(
    '(model / "host.txt").write_text(host)\n',
    '(model / "host.txt").write_text(host)\n(model / "common.txt").write_text(common.VALUE)\n',
)


def members(blob: bytes) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        return {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


@pytest.fixture
def bucket(moto: MotoServer) -> str:
    s3 = moto.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="data/train/part/rows.csv", Body=b"a,b\n1,2\n")
    s3.put_object(Bucket=BUCKET, Key="data/train/", Body=b"")  # a console "folder" marker: skipped
    s3.put_object(Bucket=BUCKET, Key="data/single.csv", Body=b"x\n")
    return BUCKET


def test_a_channel_is_one_object_or_everything_under_the_prefix(bucket: str, moto: MotoServer, tmp_path: Path) -> None:
    s3 = moto.client("s3")
    assert download_prefix(s3, f"s3://{bucket}/data/single.csv", tmp_path / "one", "c") == 1
    assert (tmp_path / "one" / "single.csv").read_text() == "x\n"
    assert download_prefix(s3, f"s3://{bucket}/data/train", tmp_path / "many", "c") == 1
    assert (tmp_path / "many" / "part" / "rows.csv").read_text() == "a,b\n1,2\n"


def test_a_key_that_would_escape_the_channel_folder_is_refused(moto: MotoServer, tmp_path: Path) -> None:
    s3 = moto.client("s3")
    s3.create_bucket(Bucket="evil")
    s3.put_object(Bucket="evil", Key="data/../../escape.txt", Body=b"!")
    with pytest.raises(CloudDDPError, match="outside"):
        download_prefix(s3, "s3://evil/data/", tmp_path / "channel", "c")
    assert not (tmp_path / "escape.txt").exists()


def test_later_hosts_win_when_model_files_share_a_name(tmp_path: Path) -> None:
    for host, text in (("algo-1", "one"), ("algo-2", "two")):
        (tmp_path / host).mkdir()
        (tmp_path / host / "model.pt").write_text(text)
        (tmp_path / host / f"{host}.txt").write_text(text)
    assert tar_merged([tmp_path / "algo-1", tmp_path / "algo-2"], tmp_path / "m.tar.gz") == 3
    assert members((tmp_path / "m.tar.gz").read_bytes()) == {
        "model.pt": "two",
        "algo-1.txt": "one",
        "algo-2.txt": "two",
    }


def local_estimator(source: Path, **overrides: object) -> PyTorch:
    arguments = {
        "entry_point": "train.py", "source_dir": str(source), "role": "arn:aws:iam::123456789012:role/R",
        "instance_count": 2, "instance_type": "local", "hyperparameters": {"lr": 0.1, "b": "x y"},
        "output_path": f"s3://{BUCKET}/models", "checkpoint_s3_uri": f"s3://{BUCKET}/checkpoints/run-1",
        "sagemaker_session": Session(), **overrides,
    }  # fmt: skip
    return PyTorch(**arguments)  # type: ignore[arg-type]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "train.py").write_text(SCRIPT)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "notes.txt").write_text("from a file:// channel\n")
    return folder


def test_an_empty_channel_fails_before_anything_runs(bucket: str, source: Path, moto: MotoServer) -> None:
    with pytest.raises(CloudDDPError, match=r"fit\(inputs=\{'train': 's3://local-mode/nothing/'\}\): no S3 objects"):
        local_estimator(source).fit({"train": f"s3://{bucket}/nothing/"})
    assert list(Path("cloudddp-runs").iterdir()) == []  # no run folder, and the partial download is gone
    assert moto.keys(bucket) == ["data/single.csv", "data/train/", "data/train/part/rows.csv"]


@pytest.mark.skipif(bool(glob.glob("/dev/nvidia[0-9]*")), reason="this machine has an NVIDIA GPU")
def test_local_gpu_without_a_gpu_fails_before_anything_runs(bucket: str, source: Path, moto: MotoServer) -> None:
    with pytest.raises(CloudDDPError, match=r"local_gpu.*no NVIDIA GPU"):
        local_estimator(source, instance_type="local_gpu", instance_count=1).fit({"train": f"s3://{bucket}/data/train"})
    assert not Path("cloudddp-runs").exists()


@pytest.mark.slow
def test_local_mode_downloads_channels_restores_checkpoints_and_uploads_like_sagemaker(
    bucket: str, source: Path, moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_REGION")  # the session's region comes from AWS_DEFAULT_REGION; the hosts get AWS_REGION
    moto.client("s3").put_object(Bucket=bucket, Key="checkpoints/run-1/step.txt", Body=b"before")
    est = local_estimator(source, checkpoint_local_path="/opt/ml/ckpt", distribution={"pytorchddp": {"enabled": True}},
                          tensorboard_output_config=TensorBoardOutputConfig(f"s3://{bucket}/tb"))  # fmt: skip
    est.fit({"train": f"s3://{bucket}/data/train", "notes": f"file://{tmp_path / 'notes'}"}, wait=False)
    training_job = est.latest_training_job
    assert training_job is not None
    training_job.wait(logs=False)  # local mode trains in fit() even with wait=False, as v2's: nothing to wait for
    job = training_job.name
    config = Path(training_job.handle.job_id, "nodes", "algo-2", "input", "config")
    # checkpoint_local_path: the host's checkpoint folder sits where /opt/ml/ckpt would, in its /opt/ml folder.
    assert json.loads((config / "checkpointconfig.json").read_text())["LocalPath"] == str(config.parents[1] / "ckpt")
    assert (config.parents[1] / "output" / "region.txt").read_text() == "us-east-1"  # as v2's local containers
    # The sagemaker_* keys v2's local mode writes (see test_sagemaker_dropin_local_hyperparameters.py), with this
    # job's own name; pytorchddp's keys as v2 sends them for smdistributed dataparallel.
    assert json.loads((config / "hyperparameters.json").read_text()) == {
        "lr": "0.1", "b": '"x y"', "sagemaker_program": '"train.py"', "sagemaker_container_log_level": "20",
        "sagemaker_submit_directory": json.dumps(str(source.resolve())), "sagemaker_region": '"us-east-1"',
        "sagemaker_job_name": json.dumps(job), "sagemaker_distributed_dataparallel_enabled": "true",
        "sagemaker_distributed_dataparallel_custom_mpi_options": '""', "sagemaker_instance_type": '"local"',
    }  # fmt: skip
    assert est.model_data == f"s3://{bucket}/models/{job}/output/model.tar.gz"
    model = members(moto.read(est.model_data))
    expected_rows = "a,b\n1,2\nfrom a file:// channel\n"
    assert model == {"host.txt": "algo-2", "rows-algo-1.csv": expected_rows, "rows-algo-2.csv": expected_rows}
    # Hyperparameters reach the script as the training toolkit passes them (sorted; one-letter keys as -k).
    output = members(moto.read(f"s3://{bucket}/models/{job}/output/output.tar.gz"))
    assert output == {"algo-1.txt": "-b x y --lr 0.1", "algo-2.txt": "-b x y --lr 0.1"}
    assert moto.read(f"s3://{bucket}/checkpoints/run-1/step.txt") == b"after before"
    assert est.latest_training_job.describe()["TrainingJobStatus"] == "Completed"  # type: ignore[union-attr]
    # TensorBoard: each host's LocalPath folder where SageMaker uploads it; `cloudddp tensorboard` finds the run's
    for host in ("algo-1", "algo-2"):
        assert moto.read(f"s3://{bucket}/tb/{job}/tensorboard-output/events.out.tfevents.{host}") == host.encode()
    where = log_location(training_job.provider, training_job.handle.job_id)
    assert where == str(Path(training_job.handle.job_id, "nodes"))


def failing_fit(est: PyTorch, bucket: str, tmp_path: Path, wait: bool) -> CloudDDPError:
    channels = {"train": f"s3://{bucket}/data/train", "notes": f"file://{tmp_path / 'notes'}"}
    with pytest.raises(CloudDDPError) as error:
        est.fit(channels, logs=False, wait=wait)  # fit raises, wait=False too (v2's local mode trains in fit())
        if est.latest_training_job is not None:  # not reached while fit raises; a fit that returned is waited on
            est.latest_training_job.wait(logs=False)
    return error.value


@pytest.mark.slow
@pytest.mark.parametrize("wait", [True, False])
def test_a_failing_local_job_raises_and_still_uploads_its_checkpoints_and_artifacts(
    wait: bool, bucket: str, source: Path, moto: MotoServer, tmp_path: Path
) -> None:
    """v2's local mode retrieves the artifacts in a `finally:` (aws/sagemaker-python-sdk v2.257.6, fc582aaa,
    src/sagemaker/local/image.py `_SageMakerContainer.train`); SageMaker syncs the checkpoints during the job."""
    moto.client("s3").put_object(Bucket=bucket, Key="checkpoints/run-1/step.txt", Body=b"before")
    est = local_estimator(source, environment={"EXIT_CODE": "3"})
    error = failing_fit(est, bucket, tmp_path, wait)
    job = est.latest_training_job
    assert job is not None and job.name in str(error)
    # v2's RuntimeError and its words (image.py `_stream_output`), the code last.
    assert isinstance(error, RuntimeError)
    assert re.fullmatch(rf"Failed to run: local training job {job.name} in .+\. Process exited with code: {error.exit_code}",
                        str(error)), str(error)  # fmt: skip
    assert job.describe()["TrainingJobStatus"] == "Failed"
    # The exit code the local job reported (the launcher's: torchrun's, or the script's where it carries it).
    assert error.exit_code == job.provider.status(job.handle.job_id).exit_code != 0
    # What the job wrote before it failed: the checkpoint, then model.tar.gz and output.tar.gz, equal to its files.
    hosts = Path(job.handle.job_id, "nodes")
    assert moto.read(f"s3://{bucket}/checkpoints/run-1/step.txt") == b"after before"
    model = members(moto.read(f"s3://{bucket}/models/{job.name}/output/model.tar.gz"))
    assert model == {
        "host.txt": "algo-2",
        **{f"rows-{h}.csv": (hosts / h / "model" / f"rows-{h}.csv").read_text() for h in ("algo-1", "algo-2")},
    }
    output = members(moto.read(f"s3://{bucket}/models/{job.name}/output/output.tar.gz"))
    assert output == {
        f"{h}.txt": (hosts / h / "output" / "data" / f"{h}.txt").read_text() for h in ("algo-1", "algo-2")
    }
    with pytest.raises(CloudDDPError, match="ended FAILED"):  # no model_data for a failed job
        _ = est.model_data
    assert list(Path("cloudddp-runs").glob(".local-mode-*")) == []  # the downloads are removed


@pytest.mark.slow
def test_local_mode_with_file_uris_needs_no_aws_at_all(source: Path, moto: MotoServer, tmp_path: Path) -> None:
    """Also: the entry point in a subfolder (sub/train.py importing source_dir's common.py), and input_mode FastFile,
    read as File."""
    (source / "train.py").unlink()
    (source / "sub").mkdir()
    (source / "sub" / "train.py").write_text(SUBFOLDER_SCRIPT)
    (source / "common.py").write_text("VALUE = 'from the top of source_dir'\n")
    (tmp_path / "train" / "part").mkdir(parents=True)
    (tmp_path / "train" / "part" / "rows.csv").write_text("a\n")
    out = tmp_path / "artifacts"
    est = local_estimator(source, instance_count=1, output_path=f"file://{out}", checkpoint_s3_uri=None,
                          entry_point="sub/train.py", input_mode="FastFile")  # fmt: skip
    est.fit({"train": f"file://{tmp_path / 'train'}", "notes": f"file://{tmp_path / 'notes'}"}, logs=False)
    # v2's local mode copies the archives into a file:// output folder itself.
    assert est.model_data == f"file://{out}/model.tar.gz"
    model = members((out / "model.tar.gz").read_bytes())
    assert model["host.txt"] == "algo-1"
    assert model["common.txt"] == "from the top of source_dir"
    assert model["rows-algo-1.csv"] == "a\nfrom a file:// channel\n"  # the channels, read from their folders
    assert members((out / "output.tar.gz").read_bytes()) == {"algo-1.txt": "-b x y --lr 0.1"}
    job = est.latest_training_job
    assert job is not None
    config = Path(job.handle.job_id, "nodes", "algo-1", "input", "config", "inputdataconfig.json")
    assert {channel["TrainingInputMode"] for channel in json.loads(config.read_text()).values()} == {"File"}
    assert moto.calls == []
