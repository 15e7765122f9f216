"""A local run's master port comes with its neighbour free: the launcher's fail-fast channel listens on the master
port + 1 (cloudddp/launcher/cli.py), so a port whose neighbour is taken is passed over."""

from __future__ import annotations

import pytest

from cloudddp.errors import CloudDDPError
from cloudddp.providers.local import provider


class Ports:
    """A stand-in socket module: port 0 binds to the next of `offered`; binding a port in `taken` fails."""

    def __init__(self, offered: list[int], taken: set[int]) -> None:
        self.offered, self.taken = iter(offered), taken

    def socket(self) -> Ports.Socket:
        return Ports.Socket(self)

    class Socket:
        def __init__(self, ports: Ports) -> None:
            self.ports, self.port = ports, 0

        def __enter__(self) -> Ports.Socket:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def bind(self, address: tuple[str, int]) -> None:
            port = address[1] or next(self.ports.offered)
            if port in self.ports.taken:
                raise OSError(98, "Address already in use")
            self.port = port

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", self.port)


def test_a_port_whose_neighbour_is_taken_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider, "socket", Ports(offered=[40000, 40100], taken={40001}))
    assert provider.free_port() == 40100


def test_no_free_pair_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    offered = list(range(41000, 41200, 2))
    monkeypatch.setattr(provider, "socket", Ports(offered=offered, taken={p + 1 for p in offered}))
    with pytest.raises(CloudDDPError, match="no two free neighbouring ports"):
        provider.free_port()
