"""A failed local job says, in its last line, which node and rank failed, with what exception and where its log is
(the exception was 80 lines up, among torchrun's tracebacks); the console folds each traceback into its exception
line and leaves torchrun's failure and stop reports to the logs, so the whole console is a few lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import REPO, run_cli

from cloudddp.launcher.failure_reason import failing_rank_error
from cloudddp.providers.local.console_fold import ConsoleFold
from cloudddp.providers.local.log_pump import first_exception

BOOM = """\
import torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    raise ValueError("boom on rank 1")
dist.barrier()
"""
CONSOLES = REPO / "tests" / "data" / "local_console"  # real launch consoles, from before the fold (README.md there)
NODE_LINE = re.compile(r"^\[(?P<node>algo-\d+)\] (?P<line>.*)$")
TORCHRUNS_OWN = ("Traceback", "ChildFailedError", "SignalException", "=====", "Root Cause", "death signal")


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


# A node's log where rank 1 raised and torchrun's own ChildFailedError traceback follows (issue 34: the failing
# rank's error is extracted once, by the launcher; the local runner's failure line is its one-line form).
MIXED = """\
[default1]:[rank1]: Traceback (most recent call last):
[default1]:[rank1]:   File "/code/train.py", line 4, in <module>
[default1]:[rank1]:     raise ValueError("boom on rank 1")
[default1]:[rank1]: ValueError: boom on rank 1
Traceback (most recent call last):
  File "/usr/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
"""


def test_the_local_failure_line_and_the_launchers_rank_error_name_one_exception(tmp_path: Path) -> None:
    (tmp_path / "node.log").write_text(MIXED)
    stderr = tmp_path / "logs" / "run-id" / "attempt_0" / "1" / "stderr.log"  # torchrun: run id, attempt, local rank
    stderr.parent.mkdir(parents=True)
    stderr.write_text(MIXED.split('Traceback (most recent call last):\n  File "/usr')[0])
    rank_error = failing_rank_error(None, str(tmp_path / "logs"))
    assert rank_error is not None
    assert first_exception(tmp_path / "node.log") == rank_error.line == "[rank1]: ValueError: boom on rank 1"


def folded(console: list[str]) -> list[str]:
    """What `launch` prints now for a console captured before the fold: its node lines through the fold."""
    submitted, *nodes, summary = console
    fold = ConsoleFold(Path(submitted.removeprefix("cloudddp: submitted ").removesuffix(" (local)")) / "logs")
    shown = [submitted]
    for line in nodes:
        node = NODE_LINE.match(line)
        assert node, line
        shown += fold.feed(node["node"], node["line"])
    return [*shown, *fold.end(), summary]


@pytest.mark.parametrize("name", ["failed_rank", "killed_rank", "cancelled"])
def test_a_captured_console_folds_to_what_the_script_printed_and_one_line_per_failure_or_stop(name: str) -> None:
    console = (CONSOLES / f"{name}.txt").read_text().splitlines()
    shown = folded(console)
    assert shown == (CONSOLES / f"{name}.folded.txt").read_text().splitlines()
    assert len(console) > 70 and len(shown) <= 10, shown
    assert not [line for line in shown if any(own in line for own in TORCHRUNS_OWN)], shown
    printed = [line for line in console if re.search(r"rank \d( of 2)? ready$", line)]
    assert len(printed) == 2 and set(printed) <= set(shown)  # the script's own lines, every one
    for node in ("algo-1", "algo-2"):  # a node that was stopped says so once
        stops = [line for line in shown if line.startswith(f"[{node}] cloudddp: stop")]
        assert len(stops) == (0 if name != "cancelled" and node == "algo-2" else 1), shown


LOG = Path("RUN/logs/algo-1.log")


@pytest.mark.parametrize(
    ("lines", "shown"),
    [
        # a chained exception: each exception once, the text between them in the second one's count
        (["Traceback (most recent call last):", '  File "t.py", line 2, in <module>', '    {}["lr"]', "KeyError: 'lr'", "",
          "During handling of the above exception, another exception occurred:", "", "Traceback (most recent call last):",
          '  File "t.py", line 4, in <module>', "ValueError: no lr", "epoch 1"],
         [f"KeyError: 'lr' (traceback: 4 lines in {LOG})", f"ValueError: no lr (traceback: 6 lines in {LOG})", "epoch 1"]),
        # two ranks of one node, their tracebacks interleaved; a blank line after an exception is still shown
        # (held until the output ends, as a chained exception's traceback could have followed)
        (["[default0]:[rank0]: Traceback (most recent call last):", "[default1]:[rank1]: Traceback (most recent call last):",
          '[default1]:[rank1]:   File "t.py", line 9', '[default0]:[rank0]:   File "t.py", line 8',
          "[default1]:[rank1]: OSError: disk", "[default0]:[rank0]: RuntimeError: peer", "[default0]:[rank0]: ", "step 3"],
         [f"[default1]:[rank1]: OSError: disk (traceback: 3 lines in {LOG})",
          f"[default0]:[rank0]: RuntimeError: peer (traceback: 3 lines in {LOG})", "step 3", "[default0]:[rank0]: "]),
        # a traceback cut short (its node killed while printing it): shown as it was, once the output has ended
        (["Traceback (most recent call last):", '  File "t.py", line 2, in <module>'],
         ["Traceback (most recent call last):", '  File "t.py", line 2, in <module>']),
        # a node stopped (SIGTERM: a managed-spot interruption), restarted, and stopped again by the fail-fast channel
        (["cloudddp: provider=sagemaker node 0/2", "Traceback (most recent call last):", "  File x",
          "torch.distributed.elastic.multiprocessing.api.SignalException: Process 7 got signal: 15",
          "cloudddp: provider=sagemaker node 0/2", "cloudddp: stopping this node: node 1 failed (exit code 1)",
          "Traceback (most recent call last):", "SignalException: Process 8 got signal: 15"],
         ["cloudddp: provider=sagemaker node 0/2", f"cloudddp: stopped by SIGTERM (torchrun's traceback: 3 lines in {LOG})",
          "cloudddp: provider=sagemaker node 0/2", "cloudddp: stopping this node: node 1 failed (exit code 1)"]),
        # a ChildFailedError without torchrun's report after it: its line, as any exception's
        (["Traceback (most recent call last):", "ChildFailedError: x", "no report"],
         [f"ChildFailedError: x (traceback: 2 lines in {LOG})", "no report"]),
    ],
)  # fmt: skip
def test_the_fold_of_chained_interleaved_and_unfinished_tracebacks(lines: list[str], shown: list[str]) -> None:
    fold = ConsoleFold(LOG.parent)
    got = [line for each in lines for line in fold.feed("algo-1", each)] + fold.end()
    assert got == [f"[algo-1] {line}" for line in shown]


@pytest.mark.torchrun
def test_a_failed_job_ends_with_the_failing_ranks_exception_and_its_log(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "boom.py").write_text(BOOM)
    result = run_cli("launch", "--nodes", "2", "--runs-dir", str(tmp_path / "runs"), str(tmp_path / "src" / "boom.py"))
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    log = run / "logs" / "algo-2.log"
    console = result.stdout.strip().splitlines()
    assert console[-1] == (f"cloudddp: job FAILED: node(s) algo-2 exited with code(s) 1 (algo-1 stopped because of "
                           f"it): [rank1]: ValueError: boom on rank 1 (its log: {log})")  # fmt: skip
    # The console: a few lines, the failing rank's traceback folded, torchrun's reports and tracebacks left out.
    assert len(console) <= 10, result.stdout
    assert f"[algo-2] [default0]:[rank1]: ValueError: boom on rank 1 (traceback: 4 lines in {log})" in console
    assert not [line for line in console if any(own in line for own in TORCHRUNS_OWN)], result.stdout
    assert len([line for line in console if line.startswith("[algo-1] cloudddp: stop")]) == 1, result.stdout
    # ... and the log keeps all of it.
    kept = log.read_text()
    assert '[default0]:[rank1]:     raise ValueError("boom on rank 1")\n' in kept
    assert "ChildFailedError" in kept and "Root Cause (first observed failure):" in kept
    status = run_cli("status", str(run)).stdout
    assert "[rank1]: ValueError: boom on rank 1" in status, status  # rich markup does not eat the [rank1]
