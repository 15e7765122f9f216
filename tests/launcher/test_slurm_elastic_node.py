"""One node of an elastic Slurm job: who hosts the c10d store, the one --rdzv-conf torchrun gets, and the
exit code each launcher records for the batch script (cloudddp/providers/slurm/script.py)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

from helpers import SOURCES, launcher

from cloudddp.launcher.cli import run


def slurm_step(node_id: int) -> dict[str, str]:
    # What Slurm 22.05 sets in a 2-node srun step (tests/cluster/fixtures/slurm/ holds the recorded set).
    return {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_JOB_NUM_NODES": "2",
            "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_ID": "0",
            "SLURM_NODEID": str(node_id), "PATH": "/usr/bin:/bin"}  # fmt: skip


def plan(node_id: int, *flags: str) -> dict[str, Any]:
    out = io.StringIO()
    argv = ["--dry-run", "--host-map", "n1=127.0.0.1,n2=127.0.0.1", *flags, str(SOURCES / "train_ddp.py")]
    with contextlib.redirect_stdout(out):
        assert run(argv, slurm_step(node_id)) == 0
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def rdzv_conf(report: dict[str, Any]) -> list[str]:
    return [arg for arg in report["argv"] if arg.startswith("--rdzv_conf")]


def test_the_first_node_of_the_step_hosts_the_c10d_store() -> None:
    elastic = ("--nnodes", "1:2", "--rdzv-backend", "c10d")
    for node_id in (0, 1):
        report = plan(node_id, *elastic)
        assert f"--rdzv_endpoint=127.0.0.1:{report['master_port']}" in report["argv"]
        assert rdzv_conf(report) == [f"--rdzv_conf=is_host={'true' if node_id == 0 else 'false'}"]
    assert rdzv_conf(plan(0)) == []  # a static job has no store to host
    assert (
        rdzv_conf(plan(1, *elastic, "--rdzv-endpoint", "etcd:2379")) == []
    )  # the user's own endpoint: torchrun decides


def test_torchrun_gets_one_rdzv_conf_and_the_users_keys_win() -> None:
    report = plan(1, "--nnodes", "1:2", "--rdzv-backend", "c10d", "--rdzv-timeout", "30",
                  "--torchrun-arg=--rdzv-conf=last_call_timeout=2,is_host=true")  # fmt: skip
    # torchrun keeps only its last --rdzv-conf: the join timeout would otherwise be lost.
    assert rdzv_conf(report) == ["--rdzv_conf=join_timeout=30,last_call_timeout=2,is_host=true"]


def test_each_launcher_records_its_exit_code_for_the_batch_script(tmp_path: Path) -> None:
    exits = tmp_path / "exit"
    env = {**slurm_step(1), "CLOUDDDP_EXIT_DIR": str(exits)}
    ok = launcher("--dry-run", "--host-map", "n1=127.0.0.1,n2=127.0.0.1", str(SOURCES / "train_ddp.py"), env=env)
    assert ok.returncode == 0 and (exits / "node-1").read_text() == "0\n"
    # Bad input before the node knows its rank: still a record, so the job does not count it as lost.
    bad = launcher("--nnodes", "zero", str(SOURCES / "train_ddp.py"), env={**env, "SLURM_NODEID": "0"})
    assert bad.returncode == 2 and "--nnodes" in bad.stderr
    unplanned = [p for p in exits.iterdir() if p.name.startswith("unplanned-")]
    assert len(unplanned) == 1 and unplanned[0].read_text() == "2\n"
    assert sorted(p.name for p in exits.iterdir() if p.name.startswith(".")) == []  # nothing half-written
