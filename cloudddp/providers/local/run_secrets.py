"""A local run's own secrets, hidden wherever cloudddp prints the run's files (`cloudddp logs`, request.yaml).

`launch` knows the job's secret values (its secret-named variables and hyperparameters) and masks them in
the logs it streams; `cloudddp logs`, run later from another shell, does not. The run folder must not hold
them in clear (the environments reach the runner through a pipe for that reason), so it keeps keyed digests
of them instead (`secret-digests.json`): a log line's substrings that hash to one of them are masked.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Sequence
from pathlib import Path

from cloudddp.redact import REDACTED, SHORTEST_MASKED_VALUE, json_spellings

DIGESTS = "secret-digests.json"


def digest(key: bytes, text: str) -> str:
    return hashlib.blake2b(text.encode(), key=key, digest_size=16).hexdigest()


def write_secret_digests(run_dir: Path, values: Sequence[str]) -> None:
    """Keyed digests of `values` (as written and as inside a JSON string), by length, for `SecretMasker`."""
    key = secrets.token_bytes(16)
    by_length: dict[str, list[str]] = {}
    for spelling in {s for value in values for s in json_spellings(value) if len(s) >= SHORTEST_MASKED_VALUE}:
        by_length.setdefault(str(len(spelling)), []).append(digest(key, spelling))
    (run_dir / DIGESTS).write_text(json.dumps({"key": key.hex(), "digests": by_length}))


class SecretMasker:
    """Masks a run's secret values in a line, knowing only their digests (none: the line is left as it is)."""

    def __init__(self, key: bytes = b"", digests: dict[int, set[str]] | None = None) -> None:
        self.key = key
        self.digests = digests or {}

    @classmethod
    def of_run(cls, run_dir: Path) -> SecretMasker:
        try:
            stored = json.loads((run_dir / DIGESTS).read_text())
            digests = {int(length): set(values) for length, values in stored["digests"].items()}
            return cls(bytes.fromhex(stored["key"]), digests)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls()  # a run from before the digests were kept, or none to keep

    def __call__(self, line: str) -> str:
        if not self.digests:
            return line
        # A secret starts where a word does (after a quote, a space, an `=`): far fewer places to hash than all.
        starts = [i for i in range(len(line)) if i == 0 or not (line[i - 1].isalnum() and line[i].isalnum())]
        covered = [False] * len(line)
        for length in sorted(self.digests, reverse=True):  # longest first: one secret may contain another
            for i in starts:
                if i + length <= len(line) and digest(self.key, line[i : i + length]) in self.digests[length]:
                    covered[i : i + length] = [True] * length
        return mask_covered(line, covered)


def mask_covered(line: str, covered: list[bool]) -> str:
    """`line` with each run of covered characters replaced by one `***`."""
    out: list[str] = []
    for i, char in enumerate(line):
        if not covered[i]:
            out.append(char)
        elif i == 0 or not covered[i - 1]:
            out.append(REDACTED)
    return "".join(out)
