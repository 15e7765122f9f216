"""Elastic mode on the client side: `--nodes MIN:MAX`, and which providers may run it.

A job is elastic when its spec sets `min_nodes`: it starts once `min_nodes` nodes have met,
takes up to `nodes`, and survives a node's loss by re-forming with the others (torchrun's
dynamic rendezvous, `max_restarts` times). SageMaker and OCI start a fixed set of hosts and
never add one back, so their providers do not declare `supports_elastic` and are refused here,
before anything is uploaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cloudddp.errors import CloudDDPError

if TYPE_CHECKING:
    from cloudddp.spec import JobSpecBase

# How the CLI names these settings in its errors; the Estimator passes ("nodes={!r}", "min_nodes={}").
FLAG_NAMES = ("--nodes {!r}", "--min-nodes {}")


def is_count(text: str) -> bool:
    """Whether `text` is ASCII digits only: str.isdigit() also takes '²', which int() refuses with a traceback."""
    return text.isascii() and text.isdigit()


def parse_nodes(value: str | None, min_nodes: int | None = None, names: tuple[str, str] = FLAG_NAMES) -> dict[str, Any]:
    """`--nodes 3` -> {nodes: 3}; `--nodes 2:3` -> {min_nodes: 2, nodes: 3}; the spec checks the rest.

    `min_nodes` is the `--min-nodes` flag, which must not contradict a MIN:MAX range; `names` spell both
    settings in an error as the caller's user wrote them.
    """
    if value is None:
        return {}
    text = value.strip()
    low, sep, high = text.partition(":")
    parts = [low, high] if sep else [low]
    nodes_name, min_name = names[0].format(value), names[1].format(min_nodes)
    if not all(is_count(part.strip()) for part in parts):
        raise CloudDDPError(f"{nodes_name}: expected a number of nodes (3) or MIN:MAX for elastic mode (2:3).")
    if sep and min_nodes is not None and min_nodes != int(low):
        raise CloudDDPError(f"{nodes_name} and {min_name} disagree; give the range once.")
    if sep:
        return {"min_nodes": int(low), "nodes": int(high)}
    return {"nodes": int(low)}


def is_elastic(spec: JobSpecBase) -> bool:
    return spec.min_nodes is not None


def node_range(spec: JobSpecBase) -> str:
    """torchrun's `--nnodes` for the spec: `MIN:MAX` when elastic, else the node count."""
    return f"{spec.min_nodes}:{spec.nodes}" if is_elastic(spec) else str(spec.nodes)
