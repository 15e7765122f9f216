"""/opt/ml/output/failure holds the failing rank's error in the training toolkit's shape, bounded as SageMaker reads it.

Upstream: aws/sagemaker-training-toolkit 33839372faf8017edb7dafc6290c1ef63557b404:
- src/sagemaker_training/errors.py `_CalledProcessError.__str__`: '%s:\\nExitCode %s\\nErrorMessage "%s"\\nCommand
  "%s"' with the class name ExecuteUserScriptError (process.py, a user script that exited non-zero);
- src/sagemaker_training/files.py `write_failure_file`: written to <output dir>/failure only where no file exists
  yet, and "DescribeTrainingJob ... returns the first 1024 characters from this file as FailureReason".
On AWS's PyTorch image the launcher's file came first and said only "torchrun exited with code 1 ... see the
failing node's log", so the toolkit's text with the script's ValueError never reached FailureReason.
torch's side: torch/distributed/elastic/multiprocessing/errors/error_handler.py `record_exception` (the `@record`
error file) and api.py (`<log dir>/<run id>/attempt_<n>/<local rank>/stderr.log` with --tee/--redirects).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers import run_launcher, sagemaker_host

from cloudddp.launcher.failure_reason import (
    ERROR_CLASS,
    MAX_FAILURE_REASON,
    error_tail,
    failing_rank_error,
    failure_text,
    node_error_message,
)
from cloudddp.providers.local.provider import free_port

TRACE = 'Traceback (most recent call last):\n  File "/opt/ml/code/train.py", line 9, in <module>\n    main()\n'
CALLSTACK = TRACE + "ValueError: learning rate must be positive\n"


def worker_dir(log_dir: Path, rank: int, attempt: int = 0) -> Path:
    folder = log_dir / "job-1_abcd" / f"attempt_{attempt}" / str(rank)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def record_file(path: Path, error_code: int | None = None) -> None:
    """An @record error file as torch writes it (with errorCode: torchrun's copy of a worker's)."""
    message = {"message": "ValueError: learning rate must be positive",
               "extraInfo": {"py_callstack": CALLSTACK, "timestamp": "1700000000"}}  # fmt: skip
    if error_code is not None:
        message["errorCode"] = error_code
    path.write_text(json.dumps({"message": message}))


# -- the toolkit's shape, bounded -------------------------------------------------------------------------------


def test_failure_text_is_the_toolkits_shape() -> None:
    text = failure_text(1, CALLSTACK, "/usr/bin/python3 cloudddp_bootstrap.py --epochs 1")
    assert text == (
        f'{ERROR_CLASS}:\nExitCode 1\nErrorMessage "{CALLSTACK.strip()}"\n'
        'Command "/usr/bin/python3 cloudddp_bootstrap.py --epochs 1"'
    )
    assert text.startswith("ExecuteUserScriptError:\nExitCode 1\nErrorMessage ")


def test_failure_text_fits_sagemakers_1024_characters_and_keeps_the_exception() -> None:
    long_trace = TRACE * 200 + "ValueError: learning rate must be positive"
    text = failure_text(1, long_trace, "python " + "x" * 5000)
    assert len(text) <= MAX_FAILURE_REASON
    assert 'ValueError: learning rate must be positive"\nCommand "' in text  # the end of the error stays
    assert text.startswith(f"{ERROR_CLASS}:\nExitCode 1\nErrorMessage ")


def test_error_tail_starts_at_the_last_traceback() -> None:
    stderr = "loading data\nTraceback (most recent call last):\n  old\nKeyError: 'x'\nretrying\n" + CALLSTACK
    assert error_tail(stderr) == CALLSTACK.strip()


def test_error_tail_without_a_traceback_starts_at_the_first_error_name() -> None:
    """The toolkit's rule (process.py `watch`: from the first line naming a Python exception)."""
    assert error_tail("step 1\nstep 2\nRuntimeError: NCCL timeout\nexiting\n") == "RuntimeError: NCCL timeout\nexiting"


# -- the failing rank's error, found once -----------------------------------------------------------------------


def test_a_recorded_worker_error_names_its_rank(tmp_path: Path) -> None:
    record_file(worker_dir(tmp_path, 1) / "error.json")
    worker_dir(tmp_path, 0)
    found = failing_rank_error(None, str(tmp_path))
    assert found is not None and found.local_rank == 1
    assert found.message == CALLSTACK.strip()


def test_torchruns_copy_of_a_recorded_error_is_read(tmp_path: Path) -> None:
    copy = tmp_path / "torchrun-error.json"
    record_file(copy, error_code=1)
    found = failing_rank_error(str(copy), None)
    assert found is not None and found.message == CALLSTACK.strip()


def test_torchruns_own_error_is_no_ranks_error(tmp_path: Path) -> None:
    """A rendezvous failure is torchrun's own record (no errorCode): not a rank's error."""
    own = tmp_path / "torchrun-error.json"
    own.write_text(json.dumps({"message": {"message": "RendezvousTimeoutError: ", "extraInfo": {}}}))
    assert failing_rank_error(str(own), None) is None


def test_without_record_the_failing_ranks_stderr_tail(tmp_path: Path) -> None:
    healthy = worker_dir(tmp_path, 0) / "stderr.log"
    failed = worker_dir(tmp_path, 1) / "stderr.log"
    failed.write_text("warming up\n" + CALLSTACK)
    healthy.write_text("warming up\nstopping: SIGTERM from torchrun\n")
    found = failing_rank_error(str(tmp_path / "none.json"), str(tmp_path))
    assert found is not None and found.local_rank == 1
    assert found.message == CALLSTACK.strip()


def test_the_first_rank_to_fail_is_named(tmp_path: Path) -> None:
    first, second = worker_dir(tmp_path, 3) / "stderr.log", worker_dir(tmp_path, 0) / "stderr.log"
    first.write_text(CALLSTACK)
    second.write_text(TRACE + "RuntimeError: Connection closed by peer\n")
    os.utime(first, (time.time() - 60, time.time() - 60))
    found = failing_rank_error(None, str(tmp_path))
    assert found is not None and found.local_rank == 3


def test_only_the_latest_attempt_counts(tmp_path: Path) -> None:
    (worker_dir(tmp_path, 0, attempt=0) / "stderr.log").write_text(TRACE + "KeyError: 'old'\n")
    (worker_dir(tmp_path, 1, attempt=1) / "stderr.log").write_text(CALLSTACK)
    found = failing_rank_error(None, str(tmp_path))
    assert found is not None and found.local_rank == 1 and "KeyError" not in found.message


def test_node_error_message_names_node_and_rank(tmp_path: Path) -> None:
    (worker_dir(tmp_path, 1) / "stderr.log").write_text(CALLSTACK)
    message = node_error_message(failing_rank_error(None, str(tmp_path)), "fallback", 2)
    assert message == f"node 2, local rank 1:\n{CALLSTACK.strip()}"
    assert (
        node_error_message(None, "cloudddp: torchrun exited with code 1", 2) == "cloudddp: torchrun exited with code 1"
    )


# -- the launcher on a SageMaker host ---------------------------------------------------------------------------


FAILING = """\
import os
{decorator_import}
{decorator}
def main():
    if os.environ["LOCAL_RANK"] == "1":
        raise ValueError("learning rate must be positive")

main()
"""


@pytest.mark.process
@pytest.mark.parametrize("record", [False, True], ids=["stderr", "record"])
def test_the_launcher_writes_the_failing_ranks_error_as_the_toolkit_would(tmp_path: Path, record: bool) -> None:
    env = sagemaker_host(tmp_path, OMP_NUM_THREADS="1")
    (tmp_path / "train.py").write_text(FAILING.format(
        decorator_import="from torch.distributed.elastic.multiprocessing.errors import record" if record else "",
        decorator="@record" if record else "",
    ))  # fmt: skip
    port = str(free_port())
    result = run_launcher("--nproc-per-node", "2", "--master-port", port, "train.py", env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    reason = (tmp_path / "output" / "failure").read_text()
    assert reason.startswith('ExecuteUserScriptError:\nExitCode 1\nErrorMessage "node 0, local rank 1:\n'), reason
    assert 'ValueError: learning rate must be positive"\nCommand "' in reason, reason
    assert len(reason) <= MAX_FAILURE_REASON


@pytest.mark.process
def test_a_launcher_error_is_written_in_the_toolkits_shape(tmp_path: Path) -> None:
    env = {"SM_HOSTS": "oops", "SM_CURRENT_HOST": "algo-1", "SM_OUTPUT_DIR": str(tmp_path), "SM_INPUT_CONFIG_DIR": "/x"}
    (tmp_path / "train.py").write_text("print('never runs')\n")
    result = run_launcher("train.py", env=env, cwd=tmp_path)
    assert result.returncode == 2
    reason = (tmp_path / "failure").read_text()
    assert reason.startswith('ExecuteUserScriptError:\nExitCode 2\nErrorMessage "cloudddp-launch: '), reason
    assert "SM_HOSTS" in reason


def test_a_warning_on_stderr_is_no_error(tmp_path: Path) -> None:
    """The toolkit's list of error names has no warnings: a rank that only warned did not fail."""
    (worker_dir(tmp_path, 0) / "stderr.log").write_text("train.py:3: UserWarning: TypedStorage is deprecated\n")
    assert failing_rank_error(None, str(tmp_path)) is None
