"""A job's log tail per node, followed once for every page that shows it, in bounded memory at both ends.

One thread per job followed reads the provider's `logs(job, follow=True)` (for providers that read files, the
bounded reader of providers/log_tail.py) and keeps each node's last `keep` lines, masked, and a count of every
line seen. A page's stream (`/api/logs`, server-sent events) sends, every `PERIOD`, the lines new to it; when more
came than are kept it sends the kept ones and how many it skipped, so a burst of 100k lines costs the server `keep`
lines per node and the page one message per period. The thread ends with the job, or at its next line once no page
watches it.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from cloudddp.metrics import NODE_PREFIX
from cloudddp.redact import redact_log_line, secret_values

KEEP = 200  # lines per node, here and in the page
PERIOD = 0.25  # seconds between two messages of a stream


def split_node(line: str) -> tuple[str, str]:
    """("algo-1", "text") from "[algo-1] text"; ("", line) for a line without a node prefix."""
    prefix = NODE_PREFIX.match(line)
    return (prefix["node"], line[prefix.end() :]) if prefix else ("", line)


@dataclass
class Follower:
    """The last `keep` lines of each node of one job, while a page watches it."""

    lines: Callable[[], Iterable[str]]  # the provider's logs(job, follow=True)
    keep: int = KEEP
    tails: dict[str, collections.deque[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # node -> every line seen
    watchers: int = 0
    ended: bool = False
    error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    on_end: Callable[[Follower], None] = lambda follower: None

    def run(self) -> None:
        hidden = secret_values(os.environ)  # as `cloudddp logs` hides them
        try:
            for raw in self.lines():
                node, text = split_node(redact_log_line(raw, hidden))
                with self.lock:
                    tail = self.tails.get(node)
                    if tail is None:
                        tail = self.tails[node] = collections.deque(maxlen=self.keep)
                    tail.append(text)
                    self.counts[node] = self.counts.get(node, 0) + 1
                    if self.watchers == 0:
                        break  # nobody looks any more: a page that comes later starts a new follower
        except Exception as exc:  # the page says why its tail stopped
            self.error = str(exc) or type(exc).__name__
        finally:
            with self.lock:
                self.ended = True
            self.on_end(self)

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
    """One follower per job being watched; `watch` starts it or joins the running one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: dict[tuple[str, str], Follower] = {}

    def watch(self, key: tuple[str, str], lines: Callable[[], Iterable[str]]) -> Follower:
        with self.lock:
            follower = self.running.get(key)
            if follower is not None and not follower.ended:
                with follower.lock:
                    follower.watchers += 1
                return follower
            # watched before its first line: a follower with no watcher stops at its next line
            follower = self.running[key] = Follower(lines, watchers=1, on_end=lambda done: self.forget(key, done))
        threading.Thread(target=follower.run, name=f"cloudddp-ui-logs-{key[0]}", daemon=True).start()
        return follower

    def leave(self, follower: Follower) -> None:
        with follower.lock:
            follower.watchers -= 1

    def forget(self, key: tuple[str, str], follower: Follower) -> None:
        with self.lock:
            if self.running.get(key) is follower:
                del self.running[key]
