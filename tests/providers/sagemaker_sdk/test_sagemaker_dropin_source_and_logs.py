# ruff: noqa: F811  (the moto fixture imported from sdk2_moto is redefined as an argument)
"""What the drop-in packs with no source_dir, and the job's secrets masked in every log it prints.

Packing from aws/sagemaker-python-sdk tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0),
src/sagemaker/fw_utils.py `_list_files_to_compress(script, directory)`: `if directory is None: return [script]`,
plus the dependencies, each at the top of the archive.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

import pytest
from sdk2_moto import MotoServer, moto  # noqa: F401  (moto is a fixture)

from cloudddp.sagemaker import PyTorch, Session
from cloudddp.sagemaker.estimator import merged_source

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"
CLOUD = {"role": ROLE, "framework_version": "2.5", "py_version": "py311", "instance_count": 1,
         "instance_type": "ml.g5.xlarge"}  # fmt: skip
SECRET = "sk-live-9876543210"


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A notebook's folder (the cwd): the script beside checkpoints, runs and other files, and a dependency."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    (tmp_path / "train.py").write_text(
        "import os, pathlib, mylib\npathlib.Path(os.environ['SM_MODEL_DIR'], 'model.txt').write_text(mylib.VALUE)\n"
    )
    (tmp_path / "helper.py").write_text("X = 1\n")
    for folder in ("checkpoints", "runs/1", "deps/mylib"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "checkpoints" / "step-9.pt").write_bytes(b"\0" * 1024)
    (tmp_path / "runs" / "1" / "events.out").write_text("...")
    (tmp_path / "deps" / "mylib" / "__init__.py").write_text("VALUE = 'from mylib'\n")
    return tmp_path


def files_under(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()}


def test_without_source_dir_only_the_entry_point_and_dependencies_are_uploaded(
    notebook: Path, moto: MotoServer
) -> None:
    est = PyTorch(entry_point="train.py", dependencies=["deps/mylib"], sagemaker_session=Session(), **CLOUD)
    est.fit("s3://data/all", wait=False)
    (request,) = moto.created()
    submit = json.loads(request["HyperParameters"]["sagemaker_submit_directory"])
    with tarfile.open(fileobj=io.BytesIO(moto.read(submit))) as tar:
        packed = {
            m.name: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.isfile() and not m.name.startswith("cloudddp")  # cloudddp's own launcher files
        }
        job = json.loads(tar.extractfile("cloudddp_job.json").read())  # type: ignore[union-attr]
    assert packed == {
        "train.py": (notebook / "train.py").read_text(),
        "mylib/__init__.py": (notebook / "deps" / "mylib" / "__init__.py").read_text(),
    }
    assert job["entry_point"] == "train.py"


def test_an_entry_point_path_is_packed_by_its_name_as_v2_does(notebook: Path, tmp_path: Path) -> None:
    (notebook / "scripts").mkdir()
    (notebook / "scripts" / "fit.py").write_text("print('fit')\n")
    args = PyTorch(entry_point="scripts/fit.py", **CLOUD).args
    source, entry = merged_source(args, tmp_path / "scratch")
    assert (entry, files_under(Path(source))) == ("fit.py", {"fit.py": "print('fit')\n"})


@pytest.mark.parametrize("source_dir", [None, "."])
def test_dependencies_in_local_mode_never_copy_the_work_folder_into_itself(
    source_dir: str | None, notebook: Path
) -> None:
    """Local mode's work folder is ./cloudddp-runs/.local-mode-*: copying "." into it used to recurse."""
    work = notebook / "cloudddp-runs" / ".local-mode-x"
    work.mkdir(parents=True)
    args = PyTorch(entry_point="train.py", source_dir=source_dir, instance_type="local", role=ROLE,
                   dependencies=["deps/mylib"]).args  # fmt: skip
    source, entry = merged_source(args, work)
    copied = files_under(Path(source))
    assert entry == "train.py" and copied["mylib/__init__.py"] == "VALUE = 'from mylib'\n"
    if source_dir is None:
        assert set(copied) == {"train.py", "mylib/__init__.py"}
    else:  # source_dir's files as they are, without the work folder the copy is made in
        assert not [name for name in copied if name.startswith("cloudddp-runs/")]
        assert copied["checkpoints/step-9.pt"] == (notebook / "checkpoints" / "step-9.pt").read_text()


@pytest.mark.slow
def test_local_mode_without_source_dir_runs_the_entry_point_with_its_dependencies(
    notebook: Path, moto: MotoServer
) -> None:
    out = notebook / "out"
    est = PyTorch(entry_point="train.py", dependencies=["deps/mylib"], instance_type="local", role=ROLE,
                  output_path=f"file://{out}", sagemaker_session=Session())  # fmt: skip
    est.fit(logs=False)
    with tarfile.open(out / "model.tar.gz") as tar:
        assert tar.extractfile("model.txt").read() == b"from mylib"  # type: ignore[union-attr]
    assert list((notebook / "cloudddp-runs").glob(".local-mode-*")) == []  # the work folder is removed


def put_log_lines(moto: MotoServer, job: str, lines: list[str]) -> None:
    logs = moto.client("logs")
    logs.create_log_group(logGroupName="/aws/sagemaker/TrainingJobs")
    stream = f"{job}/algo-1-{int(time.time())}"
    logs.create_log_stream(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream)
    events = [{"timestamp": int(time.time() * 1000), "message": line} for line in lines]
    logs.put_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=stream, logEvents=events)


def test_logs_and_wait_mask_the_jobs_secrets_as_fit_does(
    notebook: Path, moto: MotoServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from cloudddp.providers.sagemaker.provider import SageMakerProvider

    monkeypatch.setattr(SageMakerProvider, "final_grace", 0.0)
    est = PyTorch(entry_point="train.py", environment={"MY_API_KEY": SECRET}, sagemaker_session=Session(), **CLOUD)
    est.fit("s3://data/all", wait=False)
    job = est.latest_training_job
    assert job is not None
    put_log_lines(moto, job.name, [f"raw token: {SECRET}", "connecting to postgres://user:pa55word@db/x"])
    for follow in (est.logs, job.wait):
        capsys.readouterr()
        follow()
        printed = capsys.readouterr().out
        assert "[algo-1] raw token: ***" in printed and "postgres://user:***@db/x" in printed
        assert SECRET not in printed and "pa55word" not in printed


@pytest.mark.slow
def test_a_local_jobs_wait_and_logs_mask_its_secrets(
    notebook: Path, moto: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    (notebook / "train.py").write_text("import os\nprint('raw token:', os.environ['MY_API_KEY'], flush=True)\n")
    est = PyTorch(entry_point="train.py", instance_type="local", role=ROLE, environment={"MY_API_KEY": SECRET},
                  output_path=f"file://{notebook / 'out'}", sagemaker_session=Session())  # fmt: skip
    est.fit(wait=False)
    job = est.latest_training_job
    assert job is not None
    for follow in (job.wait, est.logs):
        capsys.readouterr()
        follow()
        printed = capsys.readouterr().out
        assert "raw token: ***" in printed and SECRET not in printed
