"""The contract every platform module in `cloudddp.cluster` keeps, in both directions.

Each platform module (`sagemaker`, `oci`, `kubeflow`, `slurm`, ...) is one `Environment`:

- `NAME`: the provider name (`--provider NAME`).
- `detect(environ) -> bool`: do these variables (and files they point at) belong to this platform?
- `plan(environ, options) -> ClusterPlan`: this node's place in the job, read the way the platform
  writes it (the reader, used by `cloudddp-launch` on every node).
- `emulate(cluster) -> list[EmulatedNode]` (platforms the local provider emulates): each node's
  variables, files and launcher flags exactly as the platform would give them (the writer).

Reader and writer sit side by side in one module so they cannot drift apart; the round trip
`plan(emulate(...))` is tested for every emulated platform. Standard library only: this package
runs inside training images.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import ClusterPlan

if TYPE_CHECKING:
    from cloudddp.cluster.claims import Claim

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class EmulatedCluster:
    """What the local provider asks for: `nodes` nodes of job `job_name`, folders under `run_dir`."""

    nodes: int
    job_name: str
    run_dir: Path
    channels: tuple[str, ...] = ()
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    nproc_per_node: int | str | None = 1  # None: the job leaves it to the platform (Kubeflow: the operator's)
    checkpoint_path: str | None = None  # SageMaker: CheckpointConfig.LocalPath (default /opt/ml/checkpoints)


@dataclass
class EmulatedNode:
    """One simulated node: its name, folders to create, files to write, variables, launcher flags."""

    name: str
    rank: int
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    launcher_args: list[str] = field(default_factory=list)
    files: dict[Path, Any] = field(default_factory=dict)  # path -> JSON content
    dirs: list[Path] = field(default_factory=list)
    channels: dict[str, Path] = field(default_factory=dict)  # channel -> folder the data must appear in
    model_dir: Path | None = None
    checkpoint_dir: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rank": self.rank,
            "root": str(self.root),
            "env": self.env,
            "launcher_args": self.launcher_args,
            "files": {str(k): v for k, v in self.files.items()},
            "dirs": [str(d) for d in self.dirs],
            "channels": {k: str(v) for k, v in self.channels.items()},
            "model_dir": str(self.model_dir) if self.model_dir else None,
            "checkpoint_dir": str(self.checkpoint_dir) if self.checkpoint_dir else None,
        }

    def write_files(self) -> None:
        """Create the node's folders and files (the local provider does this before starting it)."""
        for folder in self.dirs:
            folder.mkdir(parents=True, exist_ok=True)
        for path, content in self.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(content, indent=2))


@runtime_checkable
class Environment(Protocol):
    """A platform module (see the module docstring); modules satisfy it structurally."""

    @property
    def NAME(self) -> str: ...  # read-only: a module's `NAME = "slurm"` satisfies it

    @property
    def CLAIMS(self) -> tuple[Claim, ...]: ...  # the variables detect() reads, as upstream sets them (claims.py)

    def detect(self, environ: Mapping[str, str]) -> bool: ...

    def plan(self, environ: Mapping[str, str], options: DetectOptions) -> ClusterPlan: ...


@runtime_checkable
class EmulatedEnvironment(Environment, Protocol):
    """A platform the local provider can emulate: it also writes its own contract."""

    def emulate(self, cluster: EmulatedCluster) -> list[EmulatedNode]: ...


def channel_variable(channel: str) -> str:
    """The variable a channel's folder reaches the script in outside SageMaker: CLOUDDDP_CHANNEL_<NAME>.

    Channel names may hold '-' and '.' (SageMaker's pattern); a variable name may not, so they become '_'
    (`my-data` is CLOUDDDP_CHANNEL_MY_DATA) on every provider and in the local emulation alike."""
    return "CLOUDDDP_CHANNEL_" + channel.upper().replace("-", "_").replace(".", "_")


def host_map_arg(names: list[str]) -> str:
    """`--host-map` value sending the platform's host names to loopback."""
    return ",".join(f"{name}={LOOPBACK}" for name in names)


def generic_node(cluster: EmulatedCluster, name: str, rank: int) -> EmulatedNode:
    """Folders and CLOUDDDP_* variables shared by the emulations without a SageMaker-like layout.

    Outside SageMaker, data, model and checkpoint folders reach the script as CLOUDDDP_CHANNEL_<NAME>,
    CLOUDDDP_MODEL_DIR and CLOUDDDP_CHECKPOINT_DIR.
    """
    root = cluster.run_dir / "nodes" / name
    node = EmulatedNode(name=name, rank=rank, root=root)
    node.model_dir, node.checkpoint_dir = root / "model", root / "checkpoints"
    node.channels = {c: root / "data" / c for c in sorted(cluster.channels)}
    node.dirs = [node.model_dir, node.checkpoint_dir]
    node.env = {
        "CLOUDDDP_MODEL_DIR": str(node.model_dir),
        "CLOUDDDP_CHECKPOINT_DIR": str(node.checkpoint_dir),
        **{channel_variable(c): str(p) for c, p in node.channels.items()},
    }
    return node
