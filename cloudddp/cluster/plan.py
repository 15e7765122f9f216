"""`ClusterPlan`: this node's place in the job, and where each value came from.

Every environment module returns one. The launcher turns it into a torchrun command
line; `--dry-run` prints it. Pure standard library: this runs inside training images.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError

DEFAULT_MASTER_PORT = 29500
MAX_PORT = 65535
# Processes per node when nothing says: one per visible GPU, else one (CPU training).
NPROC_GPUS_OR_ONE = "gpus-or-1"
NPROC_DEFAULT_SOURCE = "default: visible GPUs, else 1"  # what the dry run says of that default
# The words torchrun's --nproc-per-node takes besides a number (torch/distributed/run.py,
# determine_local_world_size): every source of the value accepts the same ones.
NPROC_WORDS = ("gpu", "cpu", "auto", "xpu")


@dataclass
class ClusterPlan:
    """What torchrun needs to know on this node.

    `nnodes` is an int for a fixed-size job or a "min:max" string for elastic jobs.
    `nproc_per_node` is an int or one of torchrun's words: "gpu", "cpu", "auto".
    `sources` maps a field name to where its value came from (a variable, a file, a flag,
    or "default"), so a dry run can explain itself.
    """

    provider: str
    node_rank: int = 0
    nnodes: int | str = 1
    nproc_per_node: int | str = 1
    master_addr: str = "127.0.0.1"
    master_port: int = DEFAULT_MASTER_PORT
    rdzv_backend: str = "static"
    rdzv_endpoint: str | None = None
    rdzv_id: str = "cloudddp"
    hosts: list[str] | None = None
    local_addr: str | None = None
    max_restarts: int = 0
    network_interface: str | None = None
    participates: bool = True
    skip_reason: str = ""
    failure_file: str | None = None
    sources: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: Any, source: str) -> None:
        """Set a field and remember where its value came from."""
        if not hasattr(self, name) or name == "sources":
            raise AttributeError(name)
        setattr(self, name, value)
        self.sources[name] = source

    def set_master_port(self, env: EnvReader, default: int, source: str) -> None:
        """MASTER_PORT where the environment sets it, else the platform's `default` (from `source`)."""
        if env.has("MASTER_PORT"):
            self.set("master_port", env.port("MASTER_PORT"), "MASTER_PORT")
        else:
            self.set("master_port", default, source)

    def set_nproc_per_node(self, count: int = 0, source: str = "") -> None:
        """`count` processes per node (a platform's accelerator count, from `source`) where it is above 0, else the
        default: one per visible GPU, else 1."""
        if count > 0:
            self.set("nproc_per_node", count, source)
        else:
            self.set("nproc_per_node", NPROC_GPUS_OR_ONE, NPROC_DEFAULT_SOURCE)

    def map_hosts(self, host_map: Mapping[str, str]) -> None:
        """Replace host names that don't resolve (local emulation, Slurm node names) by addresses."""
        for name in ("master_addr", "local_addr"):
            host = getattr(self, name)
            if host in host_map:
                self.set(name, host_map[host], f"host map ({host})")
        if self.rdzv_endpoint:
            # An elastic job's endpoint names a host too (Kubeflow: PET_RDZV_ENDPOINT=etcd-service:2379).
            host, sep, port = self.rdzv_endpoint.rpartition(":")
            if sep and host in host_map:
                self.set("rdzv_endpoint", f"{host_map[host]}:{port}", f"host map ({host}) on "
                         f"{self.sources.get('rdzv_endpoint', 'default')}")  # fmt: skip

    @property
    def min_nodes(self) -> int:
        """The fewest nodes this job runs with: nnodes, or MIN of an elastic MIN:MAX."""
        return self.nnodes if isinstance(self.nnodes, int) else int(str(self.nnodes).partition(":")[0])

    @property
    def max_nodes(self) -> int:
        """The most nodes this job can have: nnodes, or MAX of an elastic MIN:MAX."""
        return self.nnodes if isinstance(self.nnodes, int) else int(str(self.nnodes).rpartition(":")[2])

    @property
    def endpoint(self) -> str:
        """The rendezvous endpoint torchrun will use (static: the master's address)."""
        if self.rdzv_endpoint:
            return self.rdzv_endpoint
        return f"{self.master_addr}:{self.master_port}"

    def rank_from_rendezvous(self) -> bool:
        """Whether the rendezvous numbers the nodes: a dynamic backend, and no node rank from the platform or a flag."""
        rank_source = self.sources.get("node_rank", "default")
        return self.rdzv_backend != "static" and rank_source.startswith(("assigned", "default"))

    def summary(self) -> str:
        """One readable line for the log of every node. A rank the rendezvous will give is not known yet: `?`, not
        the placeholder 0 (every pod of a Workers-only PyTorchJob printed `node 0`)."""
        rank = "?" if self.rank_from_rendezvous() and self.max_nodes > 1 else self.node_rank
        return (
            f"cloudddp: provider={self.provider} node {rank}/{self.nnodes} "
            f"nproc_per_node={self.nproc_per_node} rdzv={self.rdzv_backend}@{self.endpoint}"
            + (f" local_addr={self.local_addr}" if self.local_addr else "")
            + (f" ifname={self.network_interface}" if self.network_interface else "")
        )


class EnvReader:
    """Reads one provider's variables from an environment mapping, with clear errors.

    Detection is a pure function of a mapping (not `os.environ`), so every case is a
    one-line test and the dry run can say where each value came from.
    """

    def __init__(self, environ: Mapping[str, str], provider: str) -> None:
        self.environ = environ
        self.provider = provider

    def has(self, *names: str) -> bool:
        return all(self.environ.get(name, "") != "" for name in names)

    def first(self, *names: str) -> str | None:
        """The first of `names` that is set and not empty."""
        return next((name for name in names if self.has(name)), None)

    def str(self, name: str) -> str:
        value = self.environ.get(name, "")
        if value == "":
            raise CloudDDPError(
                f"{self.provider}: the environment variable {name} is not set, "
                f"but the {self.provider} environment needs it."
            )
        return value

    def int(self, name: str, default: int | None = None, *, minimum: int | None = None) -> int:
        if default is not None and not self.has(name):
            return default
        return parse_int(self.str(name), f"{self.provider}: the environment variable {name}", minimum=minimum)

    def port(self, name: str, default: int | None = None) -> int:
        """A TCP port from a variable: 1-65535, else an error naming the variable."""
        if default is not None and not self.has(name):
            return default
        return parse_port(self.str(name), f"{self.provider}: the environment variable {name}")

    def json(self, name: str, check: Callable[[Any], bool], expected: str) -> Any:
        raw = self.str(name)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CloudDDPError(
                f"{self.provider}: the environment variable {name}={raw!r} is not valid JSON "
                f"({exc.msg}); expected {expected}."
            ) from None
        if not check(value):
            raise CloudDDPError(f"{self.provider}: the environment variable {name}={raw!r} is not {expected}.")
        return value


def parse_int(raw: str, what: str, *, minimum: int | None = None) -> int:
    """An integer from text, or a CloudDDPError naming `what` and the value."""
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise CloudDDPError(f"{what}={raw!r} is not an integer.") from None
    if minimum is not None and value < minimum:
        raise CloudDDPError(f"{what}={raw!r} must be at least {minimum}.")
    return value


def parse_nnodes(raw: str, what: str) -> int | str:
    """A node count, or "min:max" for an elastic job (torchrun's --nnodes syntax), else an error naming `what`.

    torchrun itself would fail with a traceback on "a:b" and take "3:1" or "0:2" as given
    (torch/distributed/run.py, parse_min_max_nnodes).
    """
    if ":" not in raw:
        return parse_int(raw, what, minimum=1)
    low_text, _, high_text = raw.partition(":")
    try:
        low, high = int(low_text), int(high_text)
    except ValueError:
        low, high = 0, -1
    if not 1 <= low <= high:
        raise CloudDDPError(
            f"{what}={raw!r} is neither a node count nor an elastic range min:max of integers with "
            f"1 <= min <= max (like 1:4)."
        )
    return f"{low}:{high}"


def is_node_range(nnodes: int | str) -> bool:
    """A real "min:max" range (min < max): only a dynamic rendezvous can start such a job."""
    low, _, high = str(nnodes).partition(":")
    return bool(high) and low != high


def split_host_port(endpoint: str) -> tuple[str, str | None]:
    """`host:port` -> (host, "port"), a bare host -> (host, None); `[v6]:port` -> (v6, "port").

    As torch reads an endpoint (torch/distributed/elastic/rendezvous/utils.py, parse_rendezvous_endpoint):
    a bracketed IPv6 address loses its brackets, so it resolves and connects like any other host.
    """
    endpoint = endpoint.strip()
    if endpoint.startswith("[") and endpoint.endswith("]"):
        return endpoint[1:-1], None
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host:
        return endpoint, None
    if host.startswith("[") and host.endswith("]") and len(host) > 1:
        host = host[1:-1]
    return host, port


def parse_port(raw: str | int, what: str) -> int:
    """A TCP port (1-65535) from text, or a CloudDDPError naming `what` and the value."""
    value = parse_int(str(raw), what)
    if not 1 <= value <= MAX_PORT:
        raise CloudDDPError(f"{what}={raw!r} is not a TCP port: it must be between 1 and {MAX_PORT}.")
    return value


def read_text(path: Path, what: str) -> str | None:
    """A small config file's text (UTF-8); None when it does not exist.

    A directory, an unreadable or a non-UTF-8 file is a CloudDDPError naming `what` and the path,
    not a traceback.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise CloudDDPError(f"{what} {path} is a directory, not a file.") from None
    except UnicodeDecodeError as exc:
        raise CloudDDPError(f"{what} {path} is not UTF-8 text ({exc.reason} at byte {exc.start}).") from None
    except OSError as exc:
        raise CloudDDPError(f"{what} {path} cannot be read ({exc.strerror}).") from None


def check_rank(node_rank: int, nnodes: int, rank_what: str, size_what: str) -> None:
    """Node rank must lie in [0, nnodes)."""
    if not 0 <= node_rank < nnodes:
        raise CloudDDPError(
            f"{rank_what}={node_rank} is out of range: {size_what}={nnodes}, so the node "
            f"rank must be between 0 and {nnodes - 1}."
        )


JOB_PORT_BASE, JOB_PORT_SLOTS = 20000, 6000  # even ports 20000..31998, each with the one above it


def port_from_job_id(job_id: str) -> int:
    """A master port derived from a scheduler job id, so two jobs sharing a node differ.

    Uses the digits of the id's first part (Slurm "123456", PBS "4567.pbs-server") and
    maps them to an even port in [20000, 32000): below Linux's ephemeral range (32768+), so
    the port is not already taken by some outgoing connection. Even, because the fail-fast
    channel takes the port above it (launcher/cli.py control_port): with a stride of 1, job
    N's channel was job N+1's master port, and consecutive jobs sharing a first node failed.
    """
    digits = "".join(ch for ch in job_id.split(".")[0] if ch.isdigit())
    if not digits:
        return DEFAULT_MASTER_PORT
    return JOB_PORT_BASE + 2 * (int(digits) % JOB_PORT_SLOTS)
