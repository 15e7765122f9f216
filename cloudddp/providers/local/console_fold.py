"""What `launch` prints of a local job's nodes: every line they print, but a Python traceback folded into its
exception line, and torchrun's own account of a failure or a stop left to the node's log.

A 2-node job whose rank 1 raised printed 87 lines: the rank's traceback, then on the failing node torchrun's
ChildFailedError traceback and its report (=====, Root Cause, ...), and on the node the fail-fast channel
stopped, torchrun's shutdown warnings and its SignalException traceback. On the console (never in the logs,
which `cloudddp logs` prints whole):

- a traceback is its exception line with `(traceback: N lines in LOG)`;
- torchrun's ChildFailedError report is left out where a rank's exception was shown on that node, else (a rank
  killed by a signal, or one that exited without a traceback) it is one line made from its root cause;
- a stopped node prints one line: the launcher's `cloudddp: stopping this node: WHY` (fail-fast), or, where
  that did not come first (a cancel), one made from torchrun's SignalException. torchrun's warnings while it
  stops its workers are left out.

Lines are handled per node and, within a node, per rank prefix (`[default1]:[rank1]: `): the ranks of a node
print at the same time, and their tracebacks interleave.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

# torchrun --tee's `[default<N>]:` and torch's `[rank<N>]: ` before each line a worker writes to stderr.
RANK_PREFIX = re.compile(r"^(?:\[(?:default|rank)\d+\]:)+ ?")
TRACEBACK = "Traceback (most recent call last):"
CHAINED = ("During handling of the above exception", "The above exception was the direct cause")
# torchrun's log lines as it stops its workers or reports a failed one: the fold says it in fewer words.
TORCHRUN_STOPPING = re.compile(
    r"^[IWE]\d{4} \S+ +\d+ torch/distributed/elastic/\S+\] "
    r"(?:Received \d+ death signal|Sending process \d+ closing signal|failed \(exitcode: )"
)
LAUNCHER_STOPPING = "cloudddp: stopping this node: "  # cloudddp/launcher/peers.py, when the fail-fast channel stops it
LAUNCHER_STARTING = "cloudddp: provider="  # the launcher's first line (its plan): the node has (re)started
REPORT_FIELD = re.compile(r"^\s*(?P<name>rank|exitcode)\s*: (?P<value>.*\S)")
KEPT = 200  # lines of a traceback kept in memory: shown as they were if it never ends (a node killed mid-print)


@dataclass
class Traceback:
    count: int = 1  # lines so far, its first line included
    lines: list[str] = field(default_factory=list)  # the first KEPT of them


@dataclass
class NodeFold:
    log: Path
    tracebacks: dict[str, Traceback] = field(default_factory=dict)  # by rank prefix: the tracebacks in progress
    after_exception: dict[str, list[str]] = field(default_factory=dict)  # rank prefix -> blank lines held after it
    report: list[str] | None = None  # torchrun's ChildFailedError report, while it is being read
    report_head: str = ""  # the ChildFailedError line, folded: shown if no report follows after all
    report_count: int = 0  # its traceback's lines
    raised: bool = False  # a rank's exception line was shown: torchrun's report adds nothing to it
    stopped: bool = False  # this node's one "stopped" line was shown


class ConsoleFold:
    """Feed it each node's lines in order (`feed`), then `end` once every node's output has ended."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs  # the run's logs/ folder: where the folded lines are, in full
        self.nodes: dict[str, NodeFold] = {}

    def feed(self, node: str, line: str) -> list[str]:
        """The console lines (`[node] ...`) that `line`, the node's next line, makes: often none, while a
        traceback is being read."""
        fold = self.nodes.setdefault(node, NodeFold(self.logs / f"{node}.log"))
        return [f"[{node}] {shown}" for shown in self.fold(fold, line)]

    def end(self) -> list[str]:
        """What is left once the output ended: a traceback cut short is shown as it was, and so are blank lines
        held after an exception in case a chained one followed."""
        shown: list[str] = []
        for node, fold in self.nodes.items():
            for held in fold.after_exception.values():
                shown += [f"[{node}] {line}" for line in held]
            fold.after_exception.clear()
            if fold.report is not None:
                shown += [f"[{node}] {line}" for line in self.report_end(fold)]
            for traceback in fold.tracebacks.values():
                shown += [f"[{node}] {line}" for line in traceback.lines]
                if traceback.count > len(traceback.lines):
                    shown.append(f"[{node}] ({traceback.count - len(traceback.lines)} more lines in {fold.log})")
            fold.tracebacks.clear()
        return shown

    def fold(self, fold: NodeFold, line: str) -> list[str]:
        if fold.report is not None:
            return self.in_report(fold, line)
        prefix = match.group() if (match := RANK_PREFIX.match(line)) else ""
        body = line[len(prefix) :]
        held = fold.after_exception.pop(prefix, None)
        if held is not None and (body.strip() == "" or body.startswith(CHAINED)):
            fold.after_exception[prefix] = [*held, line]  # perhaps a chained exception's traceback follows
            return []
        traceback = fold.tracebacks.get(prefix)
        if traceback is None and body == TRACEBACK:
            fold.tracebacks[prefix] = Traceback(1 + len(held or []), [*(held or []), line])
            return []
        if traceback is None:
            return [*(held or []), *self.plain(fold, line)]
        traceback.count += 1
        if body[:1].isspace() or not body:  # a frame: `  File ...`, its code, `    ^^^^`
            if len(traceback.lines) < KEPT:
                traceback.lines.append(line)
            return []
        del fold.tracebacks[prefix]  # the first line that is not indented is the exception
        return self.exception(fold, prefix, line, traceback.count)

    def plain(self, fold: NodeFold, line: str) -> list[str]:
        """A line outside any traceback: shown, unless it is torchrun's or the launcher's word on a stop."""
        if TORCHRUN_STOPPING.match(line):
            return []
        if line.startswith(LAUNCHER_STARTING):  # a managed-spot restart: this round may be stopped too
            fold.stopped = False
        if line.startswith(LAUNCHER_STOPPING):
            if fold.stopped:  # after the SignalException line of a cancel: this node said so already
                return []
            fold.stopped = True
        return [line]

    def exception(self, fold: NodeFold, prefix: str, line: str, count: int) -> list[str]:
        name = line[len(prefix) :].split(":", 1)[0].strip()
        if name.endswith("ChildFailedError"):  # torchrun: a worker failed; its report follows
            fold.report, fold.report_count = [], count
            fold.report_head = f"{line} (traceback: {count} lines in {fold.log})"
            return []
        if name.endswith("SignalException"):  # torchrun itself was stopped (fail-fast, a cancel)
            if fold.stopped:
                return []
            fold.stopped = True
            number = re.search(r"got signal: (\d+)", line)
            how = f" by {signal_name(int(number[1]))}" if number else ""
            return [f"cloudddp: stopped{how} (torchrun's traceback: {count} lines in {fold.log})"]
        fold.raised = True
        fold.after_exception[prefix] = []
        return [f"{line} (traceback: {count} lines in {fold.log})"]

    def in_report(self, fold: NodeFold, line: str) -> list[str]:
        """torchrun's report: a line of ='s, the failures, the root cause, a line of ='s."""
        assert fold.report is not None
        if not fold.report and not line.startswith("="):  # no report after all: the exception line, as any other
            fold.report, raised, fold.raised = None, fold.raised, False
            return [*([] if raised else [fold.report_head]), *self.fold(fold, line)]
        fold.report.append(line)
        if (len(fold.report) > 1 and line.startswith("=")) or len(fold.report) >= KEPT:
            return self.report_end(fold)
        return []

    def report_end(self, fold: NodeFold) -> list[str]:
        report, fold.report = fold.report or [], None
        raised, fold.raised = fold.raised, False  # this failure is told; a restarted worker group's next one is not
        if raised:
            return []
        # The root cause's `rank : 1 (local_rank: 0)` and `exitcode : -9 (pid: 123)  (SIGKILL)`.
        cause = next((at for at, line in enumerate(report) if line.startswith("Root Cause")), 0)
        fields = {m["name"]: " ".join(m["value"].split()) for line in report[cause:] if (m := REPORT_FIELD.match(line))}
        rank = f"rank {fields['rank']}" if "rank" in fields else "a rank"
        exitcode = f": exitcode {fields['exitcode']}" if "exitcode" in fields else ""
        lines = fold.report_count + len(report)
        return [f"cloudddp: torchrun says {rank} failed{exitcode} (its report: {lines} lines in {fold.log})"]


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
