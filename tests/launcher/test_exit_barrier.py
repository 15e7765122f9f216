"""torchrun's exit barrier, left once the nodes it still waits for are known lost (cloudddp/launcher/exit_barrier.py).

The decision: a rank that has not arrived is lost when its node sent no rendezvous heartbeat for longer than
keep_alive_interval x keep_alive_max_attempt x MARGIN (torch drops a node at 1x: dynamic_rendezvous.py `_sanitize`);
the barrier is left only when every rank missing is lost, and a node still alive is waited for as torch waits.
The barrier tests run torch's own rendezvous handler and state on an in-process HashStore (no socket), imported
from where torch defines it (torch.distributed imports it without re-exporting it to a type checker).
"""

from __future__ import annotations

import io
import logging
import pickle
import types
from collections.abc import Hashable
from datetime import datetime, timedelta, timezone
from typing import cast

import pytest

from cloudddp.launcher import exit_barrier
from cloudddp.launcher.exit_barrier import MARGIN, RoundWatch, lost_ranks, may_leave

NOW = datetime(2026, 11, 29, 2, 0, tzinfo=timezone.utc)
LIMIT = timedelta(seconds=22.5)


def test_a_node_whose_heartbeat_is_older_than_the_limit_is_lost_and_a_fresh_one_is_not() -> None:
    beats: dict[Hashable, datetime] = {
        "a": NOW - timedelta(seconds=3),
        "b": NOW - timedelta(seconds=23),
        "c": NOW - timedelta(seconds=22),
    }
    assert lost_ranks({0: "a", 1: "b", 2: "c"}, beats, {}, NOW, LIMIT) == [1]


def test_a_node_gone_from_the_state_keeps_the_last_heartbeat_seen() -> None:
    """torch removes a stale node from `last_heartbeats`; one re-joining is back at once with a fresh heartbeat."""
    seen: dict[Hashable, datetime] = {"b": NOW - timedelta(seconds=30), "c": NOW - timedelta(seconds=4)}
    assert lost_ranks({0: "a", 1: "b", 2: "c"}, {"a": NOW}, seen, NOW, LIMIT) == [1]


def test_a_node_never_seen_is_never_judged_lost() -> None:
    assert lost_ranks({0: "a", 1: "b"}, {"a": NOW}, {}, NOW, LIMIT) == []


def test_the_newest_heartbeat_is_kept_and_an_older_one_does_not_replace_it() -> None:
    seen: dict[Hashable, datetime] = {"a": NOW - timedelta(seconds=30)}
    assert lost_ranks({0: "a"}, {"a": NOW - timedelta(seconds=1)}, seen, NOW, LIMIT) == []
    assert seen["a"] == NOW - timedelta(seconds=1)
    assert lost_ranks({0: "a"}, {"a": NOW - timedelta(seconds=40)}, seen, NOW, LIMIT) == []
    assert seen["a"] == NOW - timedelta(seconds=1)


@pytest.mark.parametrize(
    ("world", "arrived", "absent", "leave"),
    [
        (3, 2, [1], True),  # the one missing is lost
        (3, 1, [1], False),  # another is missing and not known lost: wait for it
        (3, 1, [1, 2], True),
        (2, 1, [], False),  # nobody lost: torch's barrier
    ],
)
def test_the_barrier_is_left_only_when_every_missing_rank_is_lost(
    world: int, arrived: int, absent: list[int], leave: bool
) -> None:
    assert may_leave(world, arrived, absent) is leave


# ---- with torch's own rendezvous handler and state, on an in-process store ----


def torch_handler(store: object) -> object:
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import C10dRendezvousBackend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
        DynamicRendezvousHandler,
        _BackendRendezvousStateHolder,
    )

    backend = C10dRendezvousBackend(store, "job")  # type: ignore[arg-type]
    handler = DynamicRendezvousHandler.from_backend("job", store, backend, min_nodes=2, max_nodes=3)  # type: ignore[arg-type]
    holder = cast(_BackendRendezvousStateHolder, handler._state_holder)  # the holder from_backend makes
    holder._cache_duration = 0  # read the state on every sync, not once a second
    return handler


def write_round(handler: object, ages: dict[int, float | None]) -> list[object]:
    """A complete round of 3 nodes, this handler's node rank 1, each node's heartbeat `ages[rank]` seconds old
    (None: gone from the state, as torch's sanitizer leaves a stale node); returns the nodes by rank."""
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc, _RendezvousState

    nodes = [_NodeDesc("10.0.0.1", 101, 0), handler._this_node, _NodeDesc("10.0.0.3", 103, 0)]  # type: ignore[attr-defined]
    state = _RendezvousState()
    state.complete = True
    state.participants = {node: rank for rank, node in enumerate(nodes)}
    now = datetime.now(timezone.utc)
    state.last_heartbeats = {nodes[r]: now - timedelta(seconds=age) for r, age in ages.items() if age is not None}
    holder = handler._state_holder  # type: ignore[attr-defined]
    holder._backend.set_state(pickle.dumps(state), holder._token)
    holder.sync()
    return nodes


def went_quiet(watch: RoundWatch, rank: int, seconds: float) -> None:
    """The last heartbeat of rank `rank`'s node was `seconds` ago (torch has dropped it from the state since)."""
    watch.last_seen[watch.nodes[rank]] = datetime.now(timezone.utc) - timedelta(seconds=seconds)


def agent_in_barrier(store: object, watch: RoundWatch, timeout: float) -> types.SimpleNamespace:
    """What the patched _exit_barrier reads of torch's agent: rank 1 of 3, the round's store."""
    group = types.SimpleNamespace(state="SUCCEEDED", group_world_size=3, group_rank=1)
    agent = types.SimpleNamespace(_worker_group=group, _exit_barrier_timeout=timeout, _store=store)
    setattr(agent, exit_barrier.WATCH, watch)
    agent._in_exit_barrier = False
    return agent


def patched_barrier(out: io.StringIO) -> object:
    from torch.distributed.elastic.agent.server import api
    from torch.distributed.elastic.utils import store as store_util

    def stock(_agent: object) -> None:
        raise AssertionError("torch's own barrier ran")

    keys = (store_util._NUM_MEMBERS, store_util._LAST_MEMBER_CHECKIN)
    return exit_barrier._leaving_exit_barrier(stock, api, keys, out)


def arrive(store: object, rank: int) -> None:
    """Rank `rank` reached the barrier before us, as the patched barrier counts itself in."""
    from torch.distributed.elastic.agent.server.api import _TERMINAL_STATE_SYNC_ID as prefix

    store.set(f"{prefix}{exit_barrier.ARRIVED}{rank}", "1")  # type: ignore[attr-defined]
    store.add(f"{prefix}{exit_barrier.MARKED}", 1)  # type: ignore[attr-defined]
    store.add(f"{prefix}/num_members", 1)  # type: ignore[attr-defined]


def barrier_completed(store: object) -> bool:
    from torch.distributed.elastic.agent.server.api import _TERMINAL_STATE_SYNC_ID as prefix

    return store.check([f"{prefix}/last_member"])  # type: ignore[attr-defined,no-any-return]


def test_the_round_is_read_from_torchs_rendezvous_state_with_torchs_keep_alive_settings() -> None:
    from torch._C._distributed_c10d import HashStore

    handler = torch_handler(HashStore())
    nodes = write_round(handler, {0: 1, 1: 1, 2: 1})
    watch = RoundWatch.after_rendezvous(handler, 1)
    assert watch.nodes == dict(enumerate(nodes))
    assert watch.limit == timedelta(seconds=5 * 3 * MARGIN)  # torch's defaults: keep_alive_interval 5 s x 3 attempts
    assert watch.lost() == []
    with pytest.raises(AttributeError):
        RoundWatch.after_rendezvous(handler, 0)  # this node is rank 1: another shape of state is not read


def test_survivors_leave_when_the_only_rank_missing_is_a_lost_node(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._C._distributed_c10d import HashStore

    monkeypatch.setattr(exit_barrier, "POLL_SECONDS", 0.01)
    store = HashStore()
    handler = torch_handler(store)
    write_round(handler, {0: 1, 1: 1, 2: 1})
    watch = RoundWatch.after_rendezvous(handler, 1)
    write_round(handler, {0: 2, 1: 2, 2: None})  # rank 2's node: stale, so torch has dropped it from the state
    went_quiet(watch, 2, 30)
    arrive(store, 0)
    out = io.StringIO()
    patched_barrier(out)(agent_in_barrier(store, watch, timeout=60))  # type: ignore[operator]
    assert barrier_completed(store)  # set for every survivor waiting, as torch's last agent sets it
    assert "leaving torchrun's exit barrier: rank(s) 2 (10.0.0.3_103_0)" in out.getvalue()
    assert "sent no rendezvous heartbeat for over 22.5 s" in out.getvalue()


def test_a_missing_node_that_is_alive_is_waited_for_as_torch_waits(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from torch._C._distributed_c10d import HashStore

    monkeypatch.setattr(exit_barrier, "POLL_SECONDS", 0.01)
    store = HashStore()
    handler = torch_handler(store)
    write_round(handler, {0: 1, 1: 1, 2: 1})
    watch = RoundWatch.after_rendezvous(handler, 1)
    write_round(handler, {0: 4, 1: 4, 2: 8})  # rank 2 still training: its heartbeat is 8 s old
    out = io.StringIO()
    with caplog.at_level(logging.ERROR):
        patched_barrier(out)(agent_in_barrier(store, watch, timeout=0.3))  # type: ignore[operator]
    assert not barrier_completed(store) and out.getvalue() == ""
    assert "Error waiting on exit barrier" in caplog.text  # torch's own words when its barrier times out


def test_a_lost_node_that_had_arrived_does_not_count_as_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 2 finished and then went quiet: the barrier waits for rank 0, which is alive."""
    from torch._C._distributed_c10d import HashStore

    monkeypatch.setattr(exit_barrier, "POLL_SECONDS", 0.01)
    store = HashStore()
    handler = torch_handler(store)
    write_round(handler, {0: 1, 1: 1, 2: 1})
    watch = RoundWatch.after_rendezvous(handler, 1)
    write_round(handler, {0: 3, 1: 3, 2: None})
    went_quiet(watch, 2, 40)
    arrive(store, 2)
    out = io.StringIO()
    patched_barrier(out)(agent_in_barrier(store, watch, timeout=0.3))  # type: ignore[operator]
    assert not barrier_completed(store) and out.getvalue() == ""


def test_an_agent_counted_only_by_torch_is_not_taken_for_arrived(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 counted itself into torch's barrier without marking itself (an agent without the patch) and has gone
    quiet; rank 2 is alive and not there yet: torch's count (2 of 3) plus one lost node must not end the wait."""
    from torch._C._distributed_c10d import HashStore
    from torch.distributed.elastic.agent.server.api import _TERMINAL_STATE_SYNC_ID as prefix

    monkeypatch.setattr(exit_barrier, "POLL_SECONDS", 0.01)
    store = HashStore()
    handler = torch_handler(store)
    write_round(handler, {0: 1, 1: 1, 2: 1})
    watch = RoundWatch.after_rendezvous(handler, 1)
    write_round(handler, {0: None, 1: 3, 2: 3})
    went_quiet(watch, 0, 40)
    store.add(f"{prefix}/num_members", 1)
    out = io.StringIO()
    patched_barrier(out)(agent_in_barrier(store, watch, timeout=0.3))  # type: ignore[operator]
    assert not barrier_completed(store) and out.getvalue() == ""


def test_every_agent_arriving_ends_the_barrier_as_torchs_does() -> None:
    from torch._C._distributed_c10d import HashStore

    store = HashStore()
    handler = torch_handler(store)
    write_round(handler, {0: 1, 1: 1, 2: 1})
    watch = RoundWatch.after_rendezvous(handler, 1)
    arrive(store, 0)
    arrive(store, 2)
    out = io.StringIO()
    patched_barrier(out)(agent_in_barrier(store, watch, timeout=60))  # type: ignore[operator]
    assert barrier_completed(store) and out.getvalue() == ""


def test_install_wraps_torchs_agent_and_falls_back_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.distributed.elastic.agent.server.api import SimpleElasticAgent
    from torch.distributed.elastic.utils import store as store_util

    stock = (SimpleElasticAgent._exit_barrier, SimpleElasticAgent._rendezvous)
    for name, method in zip(("_exit_barrier", "_rendezvous"), stock, strict=True):
        monkeypatch.setattr(SimpleElasticAgent, name, method)  # put back after the test
    out = io.StringIO()
    assert exit_barrier.install(out) and out.getvalue() == ""
    assert SimpleElasticAgent._exit_barrier.__wrapped__ is stock[0]  # type: ignore[attr-defined]
    assert SimpleElasticAgent._rendezvous.__wrapped__ is stock[1]  # type: ignore[attr-defined]

    monkeypatch.delattr(store_util, "_LAST_MEMBER_CHECKIN")
    assert not exit_barrier.install(out)
    assert out.getvalue().count("\n") == 1 and "this torch has no _LAST_MEMBER_CHECKIN" in out.getvalue()


def test_a_handler_without_rendezvous_state_keeps_torchs_barrier_with_one_line() -> None:
    """The legacy etcd handler, or another torch: the round is not watched, and torch's barrier runs."""
    ran: list[str] = []
    out = io.StringIO()
    rendezvous = exit_barrier._watching_rendezvous(lambda agent, group: ran.append("rendezvous"), out)
    group = types.SimpleNamespace(spec=types.SimpleNamespace(rdzv_handler=object()), group_rank=0)
    agent = types.SimpleNamespace()
    rendezvous(agent, group)
    rendezvous(agent, group)  # the next round: no second line
    assert getattr(agent, exit_barrier.WATCH) is None and ran == ["rendezvous", "rendezvous"]
    assert out.getvalue().count("\n") == 1 and "exit barrier is torch's own here (object keeps no" in out.getvalue()

    from torch.distributed.elastic.agent.server import api

    barrier = exit_barrier._leaving_exit_barrier(lambda agent: ran.append("stock barrier"), api, ("a", "b"), out)
    barrier(agent)
    assert ran[-1] == "stock barrier"
