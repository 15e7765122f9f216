"""What staged shards hold: every member of every tar among some downloaded objects."""

from __future__ import annotations

import io
import tarfile


def unpacked(objects: dict[str, bytes]) -> dict[str, bytes]:
    """Member name -> bytes, over every `.tar` among `objects` (object name -> bytes)."""
    found: dict[str, bytes] = {}
    for name in (n for n in objects if n.endswith(".tar")):
        with tarfile.open(fileobj=io.BytesIO(objects[name])) as tar:
            found |= {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    return found
