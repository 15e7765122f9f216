"""The local provider's typed request: `submit` sends exactly what `render` built (the dry run)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from helpers import SOURCES

from cloudddp.job_spec import build_spec
from cloudddp.providers.local import provider as local


class RecordingPopen:
    """Stands in for the detached runner: records its argv and what it was handed on stdin."""

    started: ClassVar[list[RecordingPopen]] = []

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        self.argv, self.kwargs, self.pid = argv, kwargs, 424242
        self.stdin = io.BytesIO()
        self.stdin.close = lambda: None  # type: ignore[method-assign]  # keep the bytes readable
        RecordingPopen.started.append(self)


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> type[RecordingPopen]:
    RecordingPopen.started = []
    monkeypatch.setattr(local.subprocess, "Popen", RecordingPopen)
    return RecordingPopen


def spec_for(tmp_path: Path, **local_settings: Any) -> Any:
    local_settings.setdefault("emulate", "kubeflow")
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    return build_spec({"entry_point": "allreduce_check.py", "source_dir": str(SOURCES), "nodes": 2,
                       "inputs": {"train": str(data)}, "hyperparameters": {"epochs": 1},
                       "local": {"runs_dir": str(tmp_path / "runs"), **local_settings}})  # fmt: skip


@pytest.mark.network
def test_the_runner_gets_the_rendered_nodes_with_only_the_master_port_added(
    tmp_path: Path, runner: type[RecordingPopen]
) -> None:
    provider = local.LocalProvider()
    job = provider.render(spec_for(tmp_path))
    rendered = yaml.safe_load(job.to_yaml())["request"]
    handle = provider.submit(job)
    (started,) = runner.started
    assert started.argv[1:] == ["-m", "cloudddp.providers.local.runner", handle.job_id]
    sent = json.loads(started.stdin.getvalue())
    ports = {c for node in sent["nodes"] for c in node["command"] if c.startswith("--master-port=")}
    assert len(ports) == 1, "every node is told the same master port"
    (port,) = ports
    for got, printed in zip(sent["nodes"], rendered["nodes"], strict=True):
        launcher = printed["command"][:3]  # python -m cloudddp.launcher
        assert got["command"] == [*launcher, port, *printed["command"][3:]]
        assert {k: v for k, v in got.items() if k not in ("command", "env")} == {
            k: v for k, v in printed.items() if k not in ("command", "env")
        }
    # The run folder keeps the dry run itself (secrets redacted), not a second rendering.
    assert (Path(handle.job_id) / "request.yaml").read_text() == job.to_yaml()


def test_a_master_port_in_the_spec_is_the_one_sent(tmp_path: Path, runner: type[RecordingPopen]) -> None:
    provider = local.LocalProvider()
    provider.submit(provider.render(spec_for(tmp_path, master_port=29999)))
    sent = json.loads(runner.started[0].stdin.getvalue())
    assert all("--master-port=29999" in node["command"] for node in sent["nodes"])


@pytest.mark.network
def test_submit_prepares_each_nodes_folders_channels_and_state(tmp_path: Path, runner: type[RecordingPopen]) -> None:
    provider = local.LocalProvider()
    job = provider.render(spec_for(tmp_path, link_inputs=False, emulate="sagemaker"))
    provider.submit(job)
    run_dir = job.request.run_dir
    state = json.loads((run_dir / "state.json").read_text())
    assert state == {"state": "PENDING", "launched": state["launched"], "nodes": {}}
    assert isinstance(state["launched"], int)  # time.time_ns() at launch: what `latest` goes by
    for node in job.request.nodes:
        assert list(node.layout.channels) == ["train"]
        copied = node.layout.channels["train"]
        assert copied.is_dir() and not copied.is_symlink(), "link_inputs: false copies the data"
        for folder in node.layout.dirs:
            assert folder.is_dir()
