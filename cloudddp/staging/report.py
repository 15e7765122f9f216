"""What a staging run did: the same report from S3 and OCI Object Storage."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StageReport:
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # already there with the same content (MD5)
    deleted: list[str] = field(default_factory=list)  # gone from the local folder, so removed remotely
    bytes_uploaded: int = 0
