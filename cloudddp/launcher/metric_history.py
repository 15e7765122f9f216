"""The job side's metric history: each value the job's metric definitions find in a worker's output, appended as
one JSON line (timestamp, metric, value, node, rank) to a file beside the job's output, as it is printed.

The file is written on the node, so it outlives the client that launched the job (a closed laptop, a lost SSH
session) and needs no log service to be read back. How the launcher sees the output: in the forked torchrun
(supervisor.py `prepare`), each worker's stdout and stderr that torchrun would let it inherit become pipes
(torch's SubprocessHandler._popen, patched here); a thread per pipe copies every byte, as it comes, to torchrun's
own stdout or stderr (the console and log are what they were, unprefixed), and applies the definitions to each
line with the worker's RANK. Streams torchrun itself sends to files (--redirects, --tee) are left to it. The
difference a worker may notice: its stdout is a pipe, not a terminal, when the launcher runs in one.

Where: `CLOUDDDP_METRICS_DIR`, else SageMaker's output data folder (SM_OUTPUT_DATA_DIR: uploaded with the
output), else the folder above CLOUDDDP_MODEL_DIR (each platform's run or output folder); one file per node,
`metrics-<node>.jsonl`, and the definitions used in `metric-definitions.json` beside it. Standard library only.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

from cloudddp.cluster.plan import ClusterPlan
from cloudddp.metrics import (
    DEFINITIONS_FILE,
    ENVIRONMENT_VARIABLE,
    compile_definitions,
    definitions_from_environment,
    history_name,
    history_record,
    values_in,
)

FOLDER_VARIABLE = "CLOUDDDP_METRICS_DIR"
CHUNK = 64 * 1024
LONGEST_LINE = 1 << 20  # characters of a line without a newline kept for matching (a progress bar's \r counts)
LINE_END = re.compile(rb"[\r\n]")
DRAIN_SECONDS = 2.0  # at torchrun's exit, how long the copies may take to finish what the workers wrote


def history_folder(environ: Mapping[str, str]) -> Path | None:
    """Where this node's history goes (see the module docstring); None where the job names no output folder."""
    for name in (FOLDER_VARIABLE, "SM_OUTPUT_DATA_DIR"):
        if environ.get(name):
            return Path(environ[name])
    model = environ.get("CLOUDDDP_MODEL_DIR")
    return Path(model).parent if model else None


def node_name(plan: ClusterPlan, environ: Mapping[str, str]) -> str:
    """This node's name as the job's logs call it: SageMaker's current host, the platform's host of this rank,
    else HOSTNAME (a Kubernetes pod's name, also in the local emulation), else the host's name."""
    if environ.get("SM_CURRENT_HOST"):
        return environ["SM_CURRENT_HOST"]
    if plan.hosts and not plan.rank_from_rendezvous() and 0 <= plan.node_rank < len(plan.hosts):
        return plan.hosts[plan.node_rank]
    return environ.get("HOSTNAME") or socket.gethostname()


class History:
    """Appends the values found in lines of output to one file; thread-safe; gives up (one line) on a write error."""

    def __init__(self, path: Path, definitions: Mapping[str, str], node: str, out: TextIO) -> None:
        self.path, self.node, self.out = path, node, out
        self.definitions = dict(definitions)
        self.compiled = compile_definitions(definitions)
        self.lock = threading.Lock()
        self.handle: Any = None
        self.failed = False

    def write_definitions(self) -> None:
        """The definitions beside the history (the client reads the history only for these), written whole."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.parent / f".{DEFINITIONS_FILE}.{os.getpid()}"
        temporary.write_text(json.dumps(self.definitions, indent=2, sort_keys=True))
        os.replace(temporary, self.path.parent / DEFINITIONS_FILE)

    def feed(self, line: str, rank: int | None) -> None:
        found = values_in(line, self.compiled)
        if not found or self.failed:
            return
        now = time.time()
        text = "".join(history_record(metric, value, self.node, rank, now) for metric, value in found)
        with self.lock:
            try:
                if self.handle is None:
                    self.handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open until exit
                self.handle.write(text)
                self.handle.flush()  # one write per line: nodes sharing a folder append whole lines
            except OSError as exc:
                self.failed = True
                print(f"cloudddp: metrics are no longer recorded in {self.path}: {exc}", file=self.out, flush=True)


def start(plan: ClusterPlan, environ: Mapping[str, str], out: TextIO | None = None) -> History | None:
    """This node's history (its definitions written beside it), or None, with a line, where none can be kept.

    Only where the job asks for it with CLOUDDDP_METRICS (`default`: cloudddp.metrics.DEFAULT_METRICS): keeping
    it pipes every worker's output through this process (a worker's stdout is no longer a terminal) and adds files
    to the job's output, so a job that does not ask runs as before."""
    stream: TextIO = out or sys.stderr
    if not environ.get(ENVIRONMENT_VARIABLE, "").strip():
        return None
    if environ[ENVIRONMENT_VARIABLE].strip() == "default":
        environ = {**environ, ENVIRONMENT_VARIABLE: ""}  # definitions_from_environment: the defaults
    definitions, problems = definitions_from_environment(environ)
    for problem in problems:
        print(f"cloudddp: {problem}", file=stream, flush=True)
    folder = history_folder(environ)
    if not definitions or folder is None:
        return None
    node = node_name(plan, environ)
    history = History(folder / history_name(node), definitions, node, stream)
    try:
        history.write_definitions()
    except OSError as exc:
        print(f"cloudddp: no metric history in {folder}: {exc}", file=stream, flush=True)
        return None
    return history


def copy(source: int, target: int, history: History, rank: int | None) -> None:
    """Until the pipe ends: every byte to `target` as it comes, every line (\\n or \\r) to the history."""
    pending = b""
    try:
        while chunk := os.read(source, CHUNK):
            with contextlib.suppress(OSError):  # a closed console must not stop the reading (a worker would block)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(target, view) :]
            *lines, pending = LINE_END.split(pending + chunk)
            pending = pending[-LONGEST_LINE:]
            for line in lines:
                if line:
                    history.feed(line.decode(errors="replace"), rank)
        if pending:
            history.feed(pending.decode(errors="replace"), rank)
    finally:
        os.close(source)


def _rank(env: Mapping[str, str]) -> int | None:
    try:
        return int(env.get("RANK", ""))
    except ValueError:
        return None


def install(history: History, stream: TextIO | None = None) -> bool:
    """In the torchrun process, before it runs: pipe each worker's inherited output through `copy`."""
    out: TextIO = stream or sys.stderr
    try:
        from torch.distributed.elastic.multiprocessing.subprocess_handler import subprocess_handler
    except Exception:
        return False  # no torch here: torchrun itself will say so
    handler = getattr(subprocess_handler, "SubprocessHandler", None)
    stock = getattr(handler, "_popen", None)
    if handler is None or stock is None:
        print("cloudddp: no metric history on this node (this torch has no SubprocessHandler._popen); "
              "`cloudddp metrics` reads the logs instead", file=out, flush=True)  # fmt: skip
        return False
    copies: list[threading.Thread] = []
    handler._popen = _piped_popen(stock, history, copies)
    atexit.register(_drain, copies)
    return True


def _piped_popen(stock: Callable[..., Any], history: History, copies: list[threading.Thread]) -> Callable[..., Any]:
    @functools.wraps(stock)
    def _popen(self: Any, args: tuple[Any, ...], env: dict[str, str]) -> Any:
        pipes: dict[str, tuple[int, int]] = {}  # attribute -> (read end, where its bytes go)
        for name, target in (("_stdout", sys.stdout), ("_stderr", sys.stderr)):
            if getattr(self, name, None) is None:  # inherited: ours to pipe (a file of torchrun's is left to it)
                read, write = os.pipe()
                setattr(self, name, os.fdopen(write, "wb"))
                pipes[name] = (read, target.fileno())
        try:
            proc = stock(self, args, env)
        except BaseException:
            for read, _ in pipes.values():
                os.close(read)
            raise
        finally:
            for name in pipes:
                getattr(self, name).close()  # the worker holds its copy of the write end
                setattr(self, name, None)
        for name, (read, target) in pipes.items():
            thread = threading.Thread(target=copy, args=(read, target, history, _rank(env)),
                                      name=f"cloudddp output{name}", daemon=True)  # fmt: skip
            thread.start()
            copies.append(thread)
        return proc

    return _popen


def _drain(copies: list[threading.Thread]) -> None:
    """What the workers wrote before they ended is copied before torchrun exits (a pipe an orphan of theirs keeps
    open is not waited for longer than DRAIN_SECONDS)."""
    deadline = time.monotonic() + DRAIN_SECONDS
    for thread in copies:
        thread.join(max(0.0, deadline - time.monotonic()))
