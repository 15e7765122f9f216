"""torchrun's exit barrier, left as soon as the nodes it still waits for are known to be lost.

When its workers have succeeded, torchrun's agent waits in an exit barrier for the agent of every node of the
rendezvous round, up to 300 s (torch 2.14.1: torch/distributed/elastic/agent/server/api.py:976,
`SimpleElasticAgent._exit_barrier`, a `store_util.barrier` of `group_world_size` agents; the 300 s is
`exit_barrier_timeout`, which torchrun's command line does not expose: launcher/api.py:359 builds
`LocalElasticAgent` without it). The barrier is there for a reason: with c10d, node 0's agent hosts the store, and
an agent that left at once could take it from nodes still finishing. But a node lost after the others' last
collective (their workers never notice, no new round forms) never arrives, and every survivor of an elastic job
waited the full 300 s after its work was done.

The rendezvous knows such a node is gone. Each agent writes a heartbeat into the shared rendezvous state every
`keep_alive_interval` (5 s; dynamic_rendezvous.py:1325 `_keep_alive`, 720 `last_heartbeats[node] = now`), and torch
itself drops a node whose heartbeat is older than `keep_alive_interval` x `keep_alive_max_attempt` (15 s) as dead
(dynamic_rendezvous.py:472 `_sanitize`). So `install()`, run in the forked torchrun before it starts
(supervisor.py, forked.py; elastic jobs only), replaces the barrier's wait with one that:

- marks this agent's rank as arrived (a key per rank and a count of its own), then counts itself in exactly as
  torch's barrier does (same keys), so torch's own barrier completes as before;
- polls (every POLL_SECONDS) for the key torch's barrier sets when the last agent arrives, and leaves then;
- also leaves when every rank not marked as arrived belongs to a node with no heartbeat for longer than
  `keep_alive_interval` x `keep_alive_max_attempt` x MARGIN (22.5 s with torch's defaults; the round's nodes and
  their heartbeats are read after the rendezvous and then through the handler's own state holder, as
  `num_nodes_waiting` reads it, dynamic_rendezvous.py:1265). It then sets that key itself, completing the barrier
  for the lost nodes, so the survivors leave together as from any barrier. A node still alive is waited for as
  before, up to the same 300 s: the store's host never leaves a node that is still finishing.

Heartbeats carry each node's wall clock, compared with this one's, as torch's `_sanitize` compares them. Only marked
ranks count as arrived in that decision, not torch's count: an agent without this patch (started some other way) is
either still heartbeating, and waited for, or lost, or already in torch's barrier, which it would leave with the
others.

Where torch lacks one of the private names this relies on (another torch version, the legacy etcd handler), the
barrier is torch's own and one line says so. Standard library only at import: torch is imported by `install()`,
inside the torchrun process, which imports it anyway.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TextIO

MARGIN = 1.5  # on top of torch's own "dead" age (keep_alive_interval x keep_alive_max_attempt)
POLL_SECONDS = 0.25  # a store check per poll; a timed-out store.wait would print two C++ warnings each time
ARRIVED = "/cloudddp_arrived/"  # + rank: under the barrier's key prefix, set before the rank counts itself in
MARKED = "/cloudddp_arrived_count"  # how many ranks set their ARRIVED key (torch's own count includes any agent)
WATCH = "_cloudddp_round"  # the agent's attribute holding this round's RoundWatch


def lost_ranks(
    nodes: Mapping[int, Hashable],
    heartbeats: Mapping[Hashable, datetime],
    last_seen: dict[Hashable, datetime],
    now: datetime,
    limit: timedelta,
) -> list[int]:
    """The ranks of the round (`nodes`: rank -> node) whose node has sent no heartbeat for longer than `limit`.

    `heartbeats` is the rendezvous state's `last_heartbeats` now; `last_seen` (updated here) the newest heartbeat
    seen of each node so far. A node missing from `heartbeats` keeps the last one seen: torch removes a node from
    the state once it is stale (`_sanitize`), and a node that leaves the round to join the next one is back with a
    fresh heartbeat at once. A node never seen is not judged."""
    lost = []
    for rank, node in sorted(nodes.items()):
        beat = heartbeats.get(node)
        if beat is not None and (node not in last_seen or beat > last_seen[node]):
            last_seen[node] = beat
        seen = last_seen.get(node)
        if seen is not None and now - seen > limit:
            lost.append(rank)
    return lost


def may_leave(world_size: int, marked: int, lost_and_absent: Sequence[int]) -> bool:
    """True when each rank has either marked itself arrived (`marked` of them) or is in `lost_and_absent` (lost,
    never marked): nothing left to wait for but lost nodes."""
    return bool(lost_and_absent) and marked + len(lost_and_absent) >= world_size


class RoundWatch:
    """One rendezvous round as this agent joined it: rank -> node, and each node's newest heartbeat seen."""

    def __init__(self, handler: Any, nodes: Mapping[int, Hashable], heartbeats: Mapping[Hashable, datetime]) -> None:
        self.handler = handler
        self.nodes = dict(nodes)
        self.last_seen: dict[Hashable, datetime] = {}
        settings = handler.settings
        self.limit: timedelta = settings.keep_alive_interval * settings.keep_alive_max_attempt * MARGIN
        lost_ranks(self.nodes, heartbeats, self.last_seen, datetime.now(timezone.utc), self.limit)

    @classmethod
    def after_rendezvous(cls, handler: Any, group_rank: int) -> RoundWatch:
        """Read right after `next_rendezvous`, whose join left the handler's state synced and the ranks set.
        Raises AttributeError (or any error) where this torch keeps another shape."""
        state = handler._state_holder.state
        participants = dict(state.participants)
        if participants.get(handler._this_node) != group_rank:
            raise AttributeError(f"this node is not rank {group_rank} in the rendezvous state")
        return cls(handler, {rank: node for node, rank in participants.items()}, state.last_heartbeats)

    def lost(self) -> list[int]:
        """The round's ranks whose node is lost, from the rendezvous state now (torch caches it for 1 s)."""
        lock = getattr(self.handler, "_heartbeat_lock", None) or threading.Lock()
        with lock:
            holder = self.handler._state_holder
            holder.sync()
            heartbeats = dict(holder.state.last_heartbeats)
        return lost_ranks(self.nodes, heartbeats, self.last_seen, datetime.now(timezone.utc), self.limit)


def wait_or_leave(store: Any, world_size: int, rank: int, prefix: str, keys: tuple[str, str],
                  timeout: float, watch: RoundWatch, out: TextIO) -> None:  # fmt: skip
    """torch's barrier (`keys`: its num-members and last-member suffixes), left when only lost nodes are missing."""
    members, last = prefix + keys[0], prefix + keys[1]
    store.set(f"{prefix}{ARRIVED}{rank}", "1")
    store.add(prefix + MARKED, 1)
    if store.add(members, 1) == world_size:
        store.set(last, "<val_ignored>")  # what torch's last agent does (store_util._barrier_nonblocking)
    deadline = time.monotonic() + timeout
    while not store.check([last]):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the exit barrier timed out after {timeout:g} s")
        absent = [r for r in watch.lost() if r != rank and not store.check([f"{prefix}{ARRIVED}{r}"])]
        arrived = store.add(prefix + MARKED, 0)
        if may_leave(world_size, arrived, absent):
            names = ", ".join(f"{r} ({watch.nodes[r]})" for r in absent)
            print(f"cloudddp: leaving torchrun's exit barrier: rank(s) {names} of this rendezvous round never "
                  f"finished and sent no rendezvous heartbeat for over {watch.limit.total_seconds():g} s (lost); "
                  f"the {arrived} that finished do not wait up to {timeout:g} s for them", file=out, flush=True)  # fmt: skip
            store.set(last, "<val_ignored>")  # every survivor waiting leaves now, as from a complete barrier
            return
        time.sleep(POLL_SECONDS)


def install(stream: TextIO | None = None) -> bool:
    """Patch torchrun's agent (in the torchrun process, before it runs); False, with one line, where it cannot."""
    out: TextIO = stream or sys.stderr
    try:
        from torch.distributed.elastic.agent.server import api
        from torch.distributed.elastic.utils import store as store_util
    except Exception:
        return False  # no torch here: torchrun itself will say so
    agent = getattr(api, "SimpleElasticAgent", None)
    needed = [(agent, "_exit_barrier"), (agent, "_rendezvous"), (api, "_TERMINAL_STATE_SYNC_ID"),
              (store_util, "_NUM_MEMBERS"), (store_util, "_LAST_MEMBER_CHECKIN")]  # fmt: skip
    missing = [name for owner, name in needed if not hasattr(owner, name)]
    if agent is None or missing:
        print(f"cloudddp: torchrun's exit barrier is torch's own here (this torch has no {(missing or ['SimpleElasticAgent'])[0]}): "
              "after a node is lost, the others may wait up to its timeout when they finish", file=out, flush=True)  # fmt: skip
        return False
    keys = (store_util._NUM_MEMBERS, store_util._LAST_MEMBER_CHECKIN)
    agent._rendezvous = _watching_rendezvous(agent._rendezvous, out)
    agent._exit_barrier = _leaving_exit_barrier(agent._exit_barrier, api, keys, out)
    return True


def _watching_rendezvous(stock: Callable[..., None], out: TextIO) -> Callable[..., None]:
    warned: list[bool] = []

    @functools.wraps(stock)
    def _rendezvous(self: Any, worker_group: Any) -> None:
        stock(self, worker_group)
        handler = worker_group.spec.rdzv_handler
        try:
            watch: RoundWatch | None = RoundWatch.after_rendezvous(handler, worker_group.group_rank)
        except Exception as exc:
            watch = None
            if not warned:
                warned.append(True)
                print(f"cloudddp: torchrun's exit barrier is torch's own here ({type(handler).__name__} keeps no "
                      f"rendezvous state cloudddp can read: {type(exc).__name__}: {exc}): after a node is lost, the "
                      "others may wait up to its timeout when they finish", file=out, flush=True)  # fmt: skip
        setattr(self, WATCH, watch)

    return _rendezvous


def _leaving_exit_barrier(stock: Callable[[Any], None], api: Any, keys: tuple[str, str], out: TextIO) -> Callable[[Any], None]:  # fmt: skip
    signal_exception = getattr(api, "SignalException", ())

    @functools.wraps(stock)
    def _exit_barrier(self: Any) -> None:
        watch = getattr(self, WATCH, None)
        if watch is None:
            return stock(self)
        group, timeout = self._worker_group, self._exit_barrier_timeout
        # As torch's _exit_barrier (api.py:976-1013): its log lines, its flag, a signal passed on, an error logged.
        api.logger.info("Local worker group finished (%s). Waiting %s seconds for other agents to finish",
                        group.state, timeout)  # fmt: skip
        start = time.time()
        self._in_exit_barrier = True
        try:
            wait_or_leave(self._store, group.group_world_size, group.group_rank, api._TERMINAL_STATE_SYNC_ID, keys,
                          timeout, watch, out)  # fmt: skip
            api.logger.info("Done waiting for other agents. Elapsed: %s seconds", time.time() - start)
        except signal_exception:
            raise
        except Exception:
            api.logger.exception("Error waiting on exit barrier. Elapsed: %s seconds", time.time() - start)
        finally:
            self._in_exit_barrier = False
        return None

    return _exit_barrier
