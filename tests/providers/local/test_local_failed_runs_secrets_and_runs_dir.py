"""The local workflow as a tester found it: a failed job passed off an earlier run's model and metrics as its
own, the Estimator lost the job's exit code, `cloudddp logs` and request.yaml showed a run's secrets,
`launch` and the Estimator ignored $CLOUDDDP_RUNS_DIR, and a one-file channel was no folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import run_cli

from cloudddp import CloudDDPError, Estimator
from cloudddp.job_spec import build_spec
from cloudddp.providers.local.provider import LocalProvider

GOOD = """import json, os, sys
if os.environ.get("RANK", "0") == "0":
    folder = os.environ["SM_MODEL_DIR"]
    open(os.path.join(folder, "metrics.json"), "w").write(json.dumps({"epoch": 4, "val_acc": 0.625}))
    open(os.path.join(folder, "model.pt"), "w").write("earlier model")
"""
FAIL = "import os, sys\nprint(sys.argv, 'env', os.environ.get('MY_TOKEN'), flush=True)\nsys.exit(7)\n"


def scripts(folder: Path) -> Path:
    (folder / "good.py").write_text(GOOD)
    (folder / "fail.py").write_text(FAIL)
    return folder


@pytest.mark.process
def test_a_failed_job_shows_no_earlier_runs_model_or_metrics(tmp_path: Path) -> None:
    scripts(tmp_path)
    good = run_cli("launch", "--runs-dir", "R", "--nodes", "2", "--output", "outm", "good.py", cwd=tmp_path)
    assert good.returncode == 0 and "cloudddp: metrics: epoch=4" in good.stdout, good.stdout + good.stderr
    failed = run_cli("launch", "--runs-dir", "R", "--nodes", "2", "--output", "outm", "fail.py", cwd=tmp_path)
    assert failed.returncode == 7 and "cloudddp: job FAILED" in failed.stdout, failed.stdout + failed.stderr
    assert "metrics:" not in failed.stdout and "model:" not in failed.stdout, failed.stdout
    status = run_cli("status", "latest", "--runs-dir", "R", cwd=tmp_path)
    assert "FAILED" in status.stdout and "artifacts" not in status.stdout, status.stdout
    # The earlier model is kept as it was, neither overwritten nor reported as the failed job's.
    assert (tmp_path / "outm" / "model.pt").read_text() == "earlier model"


@pytest.mark.process
def test_estimator_keeps_the_jobs_exit_code_and_has_no_model_for_a_failed_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    est = Estimator(entry_point="fail.py", source_dir=str(scripts(tmp_path)), instance_count=2,
                    runs_dir=str(tmp_path / "runs"))  # fmt: skip
    with pytest.raises(CloudDDPError, match="ended FAILED") as failure:
        est.fit()
    assert failure.value.exit_code == 7 == est.status().exit_code
    with pytest.raises(CloudDDPError, match=r"is FAILED .*only a job that succeeded has a trained model"):
        _ = est.model_data
    capsys.readouterr()


@pytest.mark.process
def test_logs_and_request_yaml_hide_a_local_runs_secrets(tmp_path: Path) -> None:
    scripts(tmp_path)
    launched = run_cli("launch", "--runs-dir", "R", "--emulate", "none", "-H", "api_key=hpsecret4242", "-e",
                       "MY_TOKEN=envtok999", "fail.py", "--", "--api-key=argkey555", cwd=tmp_path)  # fmt: skip
    assert launched.returncode == 7, launched.stdout + launched.stderr
    logs = run_cli("logs", "latest", "--runs-dir", "R", cwd=tmp_path)  # a shell without MY_TOKEN
    assert "['fail.py', '--api-key=***', '--api_key', '***'] env ***" in logs.stdout, logs.stdout + logs.stderr
    (run,) = (tmp_path / "R").iterdir()
    request = (run / "request.yaml").read_text()
    for secret in ("hpsecret4242", "envtok999", "argkey555"):
        assert secret not in logs.stdout and secret not in request
    assert "--api-key=***" in request


@pytest.mark.process
def test_launch_and_estimator_honour_cloudddp_runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripts(tmp_path)
    env = {"CLOUDDDP_RUNS_DIR": str(tmp_path / "envruns")}
    launched = run_cli("launch", "--nodes", "1", "good.py", cwd=tmp_path, env=env)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert not (tmp_path / "cloudddp-runs").exists() and len(list((tmp_path / "envruns").iterdir())) == 1
    status = run_cli("status", "latest", cwd=tmp_path, env=env)
    assert status.returncode == 0 and "SUCCEEDED" in status.stdout, status.stdout + status.stderr
    monkeypatch.setenv("CLOUDDDP_RUNS_DIR", str(tmp_path / "envruns"))
    run_dir = yaml.safe_load(Estimator(entry_point="good.py", source_dir=str(tmp_path)).dry_run())["request"]["run_dir"]
    assert Path(run_dir).parent == tmp_path / "envruns"
    explicit = Estimator(entry_point="good.py", source_dir=str(tmp_path), runs_dir=str(tmp_path / "mine"))
    assert Path(yaml.safe_load(explicit.dry_run())["request"]["run_dir"]).parent == tmp_path / "mine"


@pytest.mark.parametrize("link_inputs", [True, False])
def test_a_one_file_channel_is_a_folder_holding_the_file(tmp_path: Path, link_inputs: bool) -> None:
    (tmp_path / "onefile.txt").write_text("data")
    spec = build_spec({"entry_point": "good.py", "source_dir": str(scripts(tmp_path)),
                       "inputs": {"my-data": str(tmp_path / "onefile.txt")},
                       "local": {"runs_dir": str(tmp_path / "runs"), "link_inputs": link_inputs}})  # fmt: skip
    (node,) = LocalProvider().render(spec).request.nodes
    node.prepare(link_inputs, None)
    channel = node.layout.channels["my-data"]
    assert channel.is_dir() and not channel.is_symlink()
    assert [p.name for p in channel.iterdir()] == ["onefile.txt"] and (channel / "onefile.txt").read_text() == "data"
    assert (channel / "onefile.txt").is_symlink() == link_inputs
