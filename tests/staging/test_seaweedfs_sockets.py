"""SeaweedFS leaves a unix socket per service in a hard-coded /tmp when it stops; the test fixture removes its own,
and the session guard (tests/_guards.py) fails a run that leaves one."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from _guards import differences, snapshot
from helpers import seaweedfs
from helpers.seaweedfs import leftover_sockets, seaweed_for_tests


@pytest.mark.seaweedfs
def test_a_stopped_or_killed_server_leaves_no_socket_in_tmp(tmp_path: Path) -> None:
    with seaweed_for_tests(tmp_path / "graceful") as s3:
        ports = list(s3.ports)
        assert len(leftover_sockets(ports)) >= 5  # the check looks where weed writes them: there while it runs
        s3.stop()
    assert leftover_sockets(ports) == []
    with seaweed_for_tests(tmp_path / "killed") as s3:
        ports = list(s3.ports)
    assert leftover_sockets(ports) == []


@pytest.mark.seaweedfs
def test_the_session_guard_names_a_seaweedfs_socket_left_behind(tmp_path: Path) -> None:
    folders = {"opt_ml": tmp_path / "opt-ml", "home": tmp_path / "home", "temp": tmp_path, "sockets": tmp_path}
    before = snapshot(**folders)
    with socket.socket(socket.AF_UNIX) as left, socket.socket(socket.AF_UNIX) as running:
        left.bind(str(tmp_path / "seaweedfs-admin-grpc-41234.sock"))
        # a server another xdist worker runs now: its fixture removes it when it stops
        running.bind(str(tmp_path / "seaweedfs-s3-41235.sock"))
        running.listen()
        (tmp_path / "seaweedfs-notes.txt").write_text("not a socket name")
        assert differences(before, snapshot(**folders)) == [
            f"created {tmp_path}/seaweedfs-admin-grpc-41234.sock (entry)"
        ]


@pytest.mark.seaweedfs
def test_a_port_taken_before_weed_binds_it_is_a_retry_on_fresh_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """free_ports finds ports free, then another process may take one before weed binds it (seen once in make
    test: the volume server's). That start is retried on fresh ports, and leaves no socket of the failed one."""
    real, asked = seaweedfs.free_ports, []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()

        def ports_one_taken(count: int) -> list[int]:
            ports = real(count)
            asked.append(ports)
            if len(asked) == 1:
                ports[6] = taken.getsockname()[1]  # volume.port, as in the run that failed
            return ports

        monkeypatch.setattr(seaweedfs, "free_ports", ports_one_taken)
        with seaweed_for_tests(tmp_path) as s3:
            assert [b["Name"] for b in s3.client().list_buckets()["Buckets"]] == [
                "probe-bucket"
            ]  # it answered its probe
    assert len(asked) == 2 and s3.ports == asked[1][:-1]
    assert leftover_sockets(asked[0][:-1]) == []
