"""The job side: what runs on every node. Standard library only, no cloud SDK."""

from cloudddp.launcher.cli import main

__all__ = ["main"]
