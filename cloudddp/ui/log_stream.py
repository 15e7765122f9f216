"""A job's log, read once for every page that shows it: each node's tail, its metrics' values and the elastic
re-forms, in bounded memory at both ends.

One thread per job followed reads the provider's `logs(job, follow=True)` (for providers that read files, the
bounded reader of providers/log_tail.py) and keeps each node's last `keep` lines, masked, a count of every line
seen, every metric value the job's definitions find (the last MOST_SAMPLES) and the re-forms torchrun logged. A
page's stream (`/api/logs`, server-sent events) sends, every `PERIOD`, the lines new to it; when more came than
are kept it sends the kept ones and how many it skipped, so a burst of 100k lines costs the server `keep` lines per
node and the page one message per period. The job page's refresh reads the values found so far instead of the
whole log again. The thread ends with the job, or at its next line once no page has streamed it or asked for its
values for LINGER seconds.
"""

from __future__ import annotations

import collections
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cloudddp.metrics import DEFAULT_METRICS, NODE_PREFIX, compile_definitions, values_in
from cloudddp.redact import redact_log_line, secret_values

KEEP = 200  # lines per node, here and in the page
PERIOD = 0.25  # seconds between two messages of a stream
MOST_SAMPLES = 100_000  # metric values kept per job (its charts)
LINGER = 10.0  # seconds a follower nobody streams goes on after the job page last asked (it asks every 2 s)

# torchrun's agents log each rendezvous round they join (torch 2.14.1, elastic/rendezvous/dynamic_rendezvous.py
# next_rendezvous) and each restart of their worker group (elastic/agent/server/api.py _invoke_run), at INFO: a
# job whose environment sets LOGLEVEL=INFO has them in its logs. A round after a node's first is a re-form.
ROUND = re.compile(
    r"has joined round (?P<round>\d+) of the rendezvous '[^']*' as rank (?P<rank>\d+) in a world of size (?P<size>\d+)"
)
RESTART = re.compile(
    r"(?P<what>Worker group \w+\. \d+/\d+ attempts left|Detected \d+ new nodes from group_rank=\d+); will restart"
)


def split_node(line: str) -> tuple[str, str]:
    """("algo-1", "text") from "[algo-1] text"; ("", line) for a line without a node prefix."""
    prefix = NODE_PREFIX.match(line)
    return (prefix["node"], line[prefix.end() :]) if prefix else ("", line)


def reform(line: str, first_round: dict[str, int]) -> dict[str, Any] | None:
    """The elastic event in a log line, if any: a round joined after the node's first (`first_round`: node -> the
    round it joined first, kept across lines), or a restart asked."""
    node, text = split_node(line)
    if found := ROUND.search(text):
        number = int(found["round"])
        if first_round.setdefault(node, number) == number:
            return None
        return {
            "node": node,
            "time": None,
            "what": f"re-formed: round {number}, rank {found['rank']} of {found['size']}",
        }
    if found := RESTART.search(text):
        return {"node": node, "time": None, "what": f"{found['what']}: restarting the worker group"}
    return None


@dataclass
class Follower:
    """One job's log as read so far: each node's last `keep` lines, its metric values and re-forms."""

    lines: Callable[[], Iterable[str]]  # the provider's logs(job, follow=True)
    keep: int = KEEP
    definitions: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_METRICS))
    tails: dict[str, collections.deque[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # node -> every line seen
    samples: collections.deque[dict[str, Any]] = field(default_factory=lambda: collections.deque(maxlen=MOST_SAMPLES))
    reforms: collections.deque[dict[str, Any]] = field(default_factory=lambda: collections.deque(maxlen=1000))
    watchers: int = 0
    asked: float = field(default_factory=time.monotonic)  # when the job page last asked for the values
    last_line: float = field(default_factory=time.monotonic)  # when the last line came
    ended: bool = False
    complete: bool = False  # ended having read the whole log: the job has ended and nothing more will come
    error: str = ""
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    on_end: Callable[[Follower], None] = lambda follower: None

    def run(self) -> None:
        try:
            for _ in self.read():
                pass
        except Exception as exc:  # the page says why its tail stopped
            self.error = str(exc) or type(exc).__name__
        finally:
            with self.lock:
                self.ended = True
            self.on_end(self)

    def read(self) -> Iterator[None]:
        hidden = secret_values(os.environ)  # as `cloudddp logs` hides them
        compiled = compile_definitions(self.definitions)
        first_round: dict[str, int] = {}
        for number, raw in enumerate(self.lines(), start=1):
            line = redact_log_line(raw, hidden)
            node, text = split_node(line)
            found = values_in(text, compiled)
            event = reform(line, first_round)
            with self.lock:
                tail = self.tails.get(node)
                if tail is None:
                    tail = self.tails[node] = collections.deque(maxlen=self.keep)
                tail.append(text)
                self.counts[node] = self.counts.get(node, 0) + 1
                self.samples.extend(
                    {"metric": name, "value": value, "node": node, "line": number} for name, value in found
                )
                if event:
                    self.reforms.append(event)
                self.last_line = time.monotonic()
                if self.watchers == 0 and self.last_line - self.asked > LINGER:
                    return  # nobody looks any more: a page that comes later starts a new follower
            yield
        self.complete = True

    def values(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The metric values and re-forms found so far (the job page's)."""
        with self.lock:
            self.asked = time.monotonic()
            return list(self.samples), list(self.reforms)

    def since(self, seen: dict[str, int]) -> tuple[dict[str, list[str]], dict[str, int]]:
        """Each node's lines that `seen` (node -> lines already sent, updated here) lacks, and per node how many of
        them are no longer kept (skipped)."""
        new: dict[str, list[str]] = {}
        skipped: dict[str, int] = {}
        with self.lock:
            for node, count in self.counts.items():
                missing = count - seen.get(node, 0)
                if missing <= 0:
                    continue
                tail = self.tails[node]
                new[node] = list(tail)[-missing:] if missing < len(tail) else list(tail)
                if missing > len(tail):
                    skipped[node] = missing - len(tail)
                seen[node] = count
        return new, skipped


class Followers:
    """One follower per job being watched; `watch` starts it or joins the running one. The last DONE_KEPT that read
    a whole log (their jobs have ended) are kept, so a finished job's page is not read again at each refresh."""

    DONE_KEPT = 16

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[tuple[str, str], Follower] = {}
        self.done: collections.OrderedDict[tuple[str, str], Follower] = collections.OrderedDict()

    def watch(self, key: tuple[str, str], lines: Callable[[], Iterable[str]], definitions: Mapping[str, str],
              watchers: int = 1) -> Follower:  # fmt: skip
        """The job's follower, started unless it runs or has read the whole log; counted as watched (a stream) when
        `watchers` is 1."""
        with self.lock:
            follower = self.running.get(key) or self.done.get(key)
            if follower is not None and (follower.complete or not follower.ended):
                with follower.lock:
                    follower.watchers += watchers
                return follower
            follower = self.running[key] = Follower(lines, definitions=definitions, watchers=watchers,
                                                    on_end=lambda done: self.forget(key, done))  # fmt: skip
        threading.Thread(target=follower.run, name=f"cloudddp-ui-logs-{key[0]}", daemon=True).start()
        return follower

    def last_values(self, key: tuple[str, str]) -> dict[str, float] | None:
        """The last value of each metric a follower of the job has found; None where none follows it."""
        with self.lock:
            follower = self.running.get(key) or self.done.get(key)
        if follower is None:
            return None
        with follower.lock:
            return {sample["metric"]: sample["value"] for sample in follower.samples}

    def leave(self, follower: Follower) -> None:
        with follower.lock:
            follower.watchers -= 1

    def forget(self, key: tuple[str, str], follower: Follower) -> None:
        with self.lock:
            if self.running.get(key) is follower:
                del self.running[key]
            if follower.complete and not follower.error:
                self.done[key] = follower
                while len(self.done) > self.DONE_KEPT:
                    self.done.popitem(last=False)
