"""Why a node failed, as SageMaker's training toolkit words it: the failing rank's error, in one bounded text.

SageMaker shows the first 1024 characters of /opt/ml/output/failure as the job's FailureReason
(aws/sagemaker-training-toolkit 33839372faf8017edb7dafc6290c1ef63557b404, src/sagemaker_training/files.py
`write_failure_file`, which writes only where no file exists yet). On AWS's PyTorch images the toolkit runs
cloudddp's bootstrap as the user script and, when it exits non-zero, writes `ExecuteUserScriptError` with the exit
code, the captured stderr from its first error line and the command (errors.py `_CalledProcessError.__str__`,
process.py `watch`). The launcher writes that file itself first, in that shape, on every image (bring-your-own
images have no toolkit), with the failing rank's own error, so FailureReason says what SDK v2 users see.

`failing_rank_error` finds that error once, for every caller: torchrun's error files where the script uses
torch's `@record` (the worker's `error.json`, or torchrun's copy of it), else the failing rank's stderr file
(torchrun writes `<log dir>/<run id>/attempt_<n>/<local rank>/stderr.log` with `--tee`/`--redirects`).
Standard library only: it runs in the job's container.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

MAX_FAILURE_REASON = 1024  # characters of the failure file SageMaker keeps as FailureReason
ERROR_CLASS = "ExecuteUserScriptError"  # the toolkit's class for a user script that exited non-zero
TRACEBACK = "Traceback (most recent call last):"
MAX_READ = 64 * 1024  # bytes read from the end of a stderr file: the error is at its end
ELLIPSIS = "..."
# The toolkit starts its ErrorMessage at the first stderr line naming one of these (src/sagemaker_training/
# __init__.py `_PYTHON_ERRORS_`, used by process.py `watch`): Python's errors, no warnings.
PYTHON_ERRORS = (
    "BaseException", "Exception", "ArithmeticError", "AssertionError", "AttributeError", "BlockingIOError",
    "BrokenPipeError", "BufferError", "ChildProcessError", "ConnectionAbortedError", "ConnectionError",
    "ConnectionRefusedError", "ConnectionResetError", "EOFError", "EnvironmentError", "FileExistsError",
    "FileNotFoundError", "FloatingPointError", "IOError", "ImportError", "IndentationError", "IndexError",
    "InterruptedError", "IsADirectoryError", "KeyError", "LookupError", "MemoryError", "ModuleNotFoundError",
    "NameError", "NotADirectoryError", "NotImplementedError", "OSError", "OverflowError", "PermissionError",
    "ProcessLookupError", "RecursionError", "ReferenceError", "RuntimeError", "SyntaxError", "SystemError",
    "TabError", "TimeoutError", "TypeError", "UnboundLocalError", "UnicodeDecodeError", "UnicodeEncodeError",
    "UnicodeError", "UnicodeTranslateError", "ValueError", "ZeroDivisionError", "Invalidrequirement",
    "ResourceExhaustedError", "OutOfRangeError", "InvalidArgumentError",
)  # fmt: skip


# A Python exception's last line, as a worker prints it (torch prefixes an uncaught one's lines with `[rank<N>]:`,
# torchrun's --tee with `[default<N>]:`, both where both apply); torchrun's exceptions about it are not the cause.
EXCEPTION_LINE = re.compile(
    r"^(?:\[(?:rank|default)\d+\]:\s*)*(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): "
)
NOT_THE_CAUSE = ("ChildFailedError", "SignalException")
TEE_PREFIX = re.compile(r"^\[default\d+\]:")
LONGEST_LINE = 300


def exception_line(text: str) -> str | None:
    """The first line of `text` that names the script's exception (`[rank1]: ValueError: boom`), shortened: the one
    line a failure is summed up in (the local runner's failure line; RankError.line). None where none does."""
    for line in text.splitlines():
        match = EXCEPTION_LINE.match(line)
        if match and not match["name"].endswith(NOT_THE_CAUSE):
            return TEE_PREFIX.sub("", line).strip()[:LONGEST_LINE]  # `[rank1]: ValueError: ...` says which rank
    return None


@dataclass
class RankError:
    """One failed worker's error: its local rank where known, the text, and where the text came from."""

    local_rank: int | None
    message: str
    source: str

    @property
    def line(self) -> str | None:
        """The error in one line, as the local runner's failure line gives it."""
        return exception_line(self.message)


def read_tail(path: Path, limit: int = MAX_READ) -> str:
    with path.open("rb") as handle:
        handle.seek(0, 2)
        size = handle.tell()
        handle.seek(max(0, size - limit))
        return handle.read().decode("utf-8", "replace")


def error_tail(text: str) -> str:
    """The error at the end of a stderr text: from the last traceback's first line, else from the first line that
    names a Python exception (the toolkit's rule), else the last lines; blank lines dropped."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith(TRACEBACK)]
    if starts:
        return "\n".join(lines[starts[-1] :])
    named = [i for i, line in enumerate(lines) if any(name in line for name in PYTHON_ERRORS)]
    return "\n".join(lines[named[0] :] if named else lines[-20:])


def recorded_error(path: Path, copied: bool = False) -> str | None:
    """The traceback (else the message) of an `@record` error file: `{"message": {"message": "ValueError: ...",
    "extraInfo": {"py_callstack": "Traceback ..."}}}` (torch/distributed/elastic/multiprocessing/errors/
    error_handler.py `record_exception`). `copied`: torchrun's own file, where a worker's error is copied with an
    "errorCode" (`dump_error_file`); without one it is torchrun's own error (a rendezvous failure), not a rank's."""
    try:
        record = json.loads(path.read_text()).get("message")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(record, dict) or (copied and "errorCode" not in record):
        return None
    extra = record.get("extraInfo")
    stack = extra.get("py_callstack") if isinstance(extra, dict) else None
    text = stack if isinstance(stack, str) and stack.strip() else record.get("message")
    return text.strip() if isinstance(text, str) and text.strip() else None


def worker_files(log_dir: str | None, name: str) -> list[tuple[int, int, Path]]:
    """(attempt, local rank, path) of each worker's `name` under torchrun's log folder, the latest attempt only."""
    if not log_dir:
        return []
    found: list[tuple[int, int, Path]] = []
    try:
        for path in Path(log_dir).glob(f"*/attempt_*/*/{name}"):
            attempt, rank = path.parent.parent.name[len("attempt_") :], path.parent.name
            if attempt.isdigit() and rank.isdigit():
                found.append((int(attempt), int(rank), path))
    except OSError:
        return []
    latest = max((attempt for attempt, _, _ in found), default=None)
    return sorted(item for item in found if item[0] == latest)


def first_written(files: list[tuple[int, int, Path]]) -> list[tuple[int, int, Path]]:
    """Oldest last-write first: the rank that failed first stopped writing first (the others were stopped after)."""

    def written(item: tuple[int, int, Path]) -> float:
        try:
            return item[2].stat().st_mtime
        except OSError:
            return float("inf")

    return sorted(files, key=lambda item: (written(item), item[1]))


def failing_rank_error(error_file: str | None, log_dir: str | None) -> RankError | None:
    """The failed worker's error: its `@record` error file (per worker under `log_dir`, else torchrun's copy in
    `error_file`), else the tail of the first failed rank's stderr file under `log_dir`; None where neither is."""
    for _, rank, path in first_written(worker_files(log_dir, "error.json")):
        text = recorded_error(path)
        if text:
            return RankError(rank, text, str(path))
    text = recorded_error(Path(error_file), copied=True) if error_file else None
    if text and error_file:
        return RankError(None, text, error_file)
    for _, rank, path in first_written(worker_files(log_dir, "stderr.log")):
        try:
            text = read_tail(path)
        except OSError:
            continue
        if any(name in text for name in PYTHON_ERRORS) or TRACEBACK in text:
            return RankError(rank, error_tail(text), str(path))
    return None


def failure_text(exit_code: int, error_message: str, command: str, limit: int = MAX_FAILURE_REASON) -> str:
    """The toolkit's text (errors.py `_CalledProcessError.__str__`), at most `limit` characters: the command is
    shortened first, then the start of the error message, so its end (the exception line) stays."""

    def text(message: str, shown_command: str) -> str:
        return f'{ERROR_CLASS}:\nExitCode {exit_code}\nErrorMessage "{message}"\nCommand "{shown_command}"'

    message = error_message.strip()
    if len(command) > 200:
        command = command[: 200 - len(ELLIPSIS)] + ELLIPSIS
    room = limit - len(text("", command))
    if len(message) > room:
        message = ELLIPSIS + message[len(message) - max(0, room - len(ELLIPSIS)) :]
    return text(message, command)[:limit]


def node_error_message(rank_error: RankError | None, fallback: str, node_rank: int | None) -> str:
    """The ErrorMessage for a node: the failing rank's error where found, else `fallback` (why the node ended)."""
    if rank_error is None:
        return fallback
    where = f"node {node_rank}" if node_rank is not None else "this node"
    rank = f", local rank {rank_error.local_rank}" if rank_error.local_rank is not None else ""
    return f"{where}{rank}:\n{rank_error.message}"
