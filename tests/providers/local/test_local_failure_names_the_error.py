"""A failed local job says, in its last line, which node and rank failed, with what exception and where its log is
(the exception was 80 lines up, among torchrun's tracebacks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

from cloudddp.providers.local.log_pump import first_exception

BOOM = """\
import torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise ValueError("boom on rank 1")
dist.barrier()
"""


@pytest.mark.parametrize(
    ("log", "error"),
    [
        ("[default0]:[rank1]: Traceback\n[default0]:[rank1]: ValueError: boom\nChildFailedError: x\n", "[rank1]: ValueError: boom"),
        ("[rank0]: KeyError: 'lr'\n", "[rank0]: KeyError: 'lr'"),
        ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\nSignalException: 15\n", None),
        ("no exception at all\n", None),
    ],
)  # fmt: skip
def test_the_first_exception_line_of_a_nodes_log(tmp_path: Path, log: str, error: str | None) -> None:
    (tmp_path / "node.log").write_text(log)
    assert first_exception(tmp_path / "node.log") == error
    assert first_exception(tmp_path / "missing.log") is None


@pytest.mark.torchrun
def test_a_failed_job_ends_with_the_failing_ranks_exception_and_its_log(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "boom.py").write_text(BOOM)
    result = run_cli("launch", "--nodes", "2", "--runs-dir", str(tmp_path / "runs"), str(tmp_path / "src" / "boom.py"))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    last = result.stdout.strip().splitlines()[-1]
    assert last == (f"cloudddp: job FAILED: node(s) algo-2 exited with code(s) 1 (algo-1 stopped because of it): "
                    f"[rank1]: ValueError: boom on rank 1 (its log: {run / 'logs' / 'algo-2.log'})")  # fmt: skip
    status = run_cli("status", str(run)).stdout
    assert "[rank1]: ValueError: boom on rank 1" in status, status  # rich markup does not eat the [rank1]
