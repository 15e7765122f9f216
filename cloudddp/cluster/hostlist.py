"""Expanding Slurm hostlists (`gpu-[01-03,07],cpu1`) into host names, standard library only.

Syntax: https://slurm.schedmd.com/hostlist.html (the `SLURM_JOB_NODELIST` format).
Top-level entries are separated by commas outside brackets; each entry is text with
any number of bracket groups, and each group lists numbers and inclusive ranges
(`[01-03,07]`). Several groups in one entry expand to their cartesian product, the
leftmost group varying slowest, as `scontrol show hostnames` prints them. A range keeps
the width of its low bound (`[008-011]` -> 008 ... 011).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from cloudddp.errors import CloudDDPError

# A hostlist longer than this is a typo (`[1-1000000]`), not a cluster.
MAX_HOSTS = 100_000
_NUMBER = re.compile(r"\d+")
_RANGE = re.compile(r"(\d+)-(\d+)")
if TYPE_CHECKING:
    # Builds the error for a malformed hostlist from the reason. Only for the type checker:
    # collections.abc.Callable[...] fails at runtime on the Python 3.8 of PyTorch <= 1.12 images.
    _ErrorFactory = Callable[[str], CloudDDPError]


def expand_hostlist(text: str, *, variable: str = "SLURM_JOB_NODELIST") -> list[str]:
    """Every host name in a Slurm hostlist, in order.

    `variable` names where the text came from, for the error message.
    """

    def bad(reason: str) -> CloudDDPError:
        return CloudDDPError(f"{variable}={text!r} is not a valid Slurm hostlist: {reason}.")

    if not text.strip():
        raise bad("it is empty")
    hosts: list[str] = []
    for entry in _split_entries(text, bad):
        hosts.extend(_expand_entry(entry, bad))
        if len(hosts) > MAX_HOSTS:
            raise bad(f"it expands to more than {MAX_HOSTS} hosts")
    return hosts


def _split_entries(text: str, bad: _ErrorFactory) -> list[str]:
    """Split at the commas outside brackets, checking that brackets balance."""
    entries: list[str] = []
    depth = 0
    start = 0
    for pos, char in enumerate(text):
        if char == "[":
            if depth:
                raise bad(f"nested '[' at position {pos}")
            depth = 1
        elif char == "]":
            if not depth:
                raise bad(f"']' without a matching '[' at position {pos}")
            depth = 0
        elif char == "," and not depth:
            entries.append(text[start:pos])
            start = pos + 1
    if depth:
        raise bad("a '[' is never closed")
    entries.append(text[start:])
    stripped = [entry.strip() for entry in entries]
    if any(not entry for entry in stripped):
        raise bad("it has an empty entry (two commas in a row, or a leading or trailing comma)")
    return stripped


def _expand_entry(entry: str, bad: _ErrorFactory) -> list[str]:
    """One entry (`rack[1-2]-node[01-02]`) -> its host names."""
    # re.split with a capturing group alternates: text, [group], text, [group], ..., text
    parts = re.split(r"\[([^\[\]]*)\]", entry)
    choices: list[list[str]] = []
    for index, part in enumerate(parts):
        if index % 2 == 0:
            if any(char.isspace() for char in part):
                raise bad(f"the entry {entry!r} contains white space")
            choices.append([part])
        else:
            choices.append(_expand_group(part, entry, bad))
    if math.prod(len(values) for values in choices) > MAX_HOSTS:
        raise bad(f"the entry {entry!r} expands to more than {MAX_HOSTS} hosts")
    return ["".join(combination) for combination in itertools.product(*choices)]


def _expand_group(group: str, entry: str, bad: _ErrorFactory) -> list[str]:
    """The inside of one bracket group (`01-03,07`) -> its numbers as text."""
    if not group.strip():
        raise bad(f"the entry {entry!r} has an empty bracket group '[]'")
    values: list[str] = []
    for item in group.split(","):
        item = item.strip()
        if _NUMBER.fullmatch(item):
            values.append(item)
            continue
        match = _RANGE.fullmatch(item)
        if not match:
            raise bad(f"{item!r} in [{group}] is neither a number nor a range like 01-04")
        low_text, high_text = match.groups()
        low, high = int(low_text), int(high_text)
        if low > high:
            raise bad(f"the range {item!r} in [{group}] runs backwards")
        if high - low >= MAX_HOSTS:
            raise bad(f"the range {item!r} in [{group}] has more than {MAX_HOSTS} values")
        width = len(low_text)
        values.extend(str(number).zfill(width) for number in range(low, high + 1))
    return values
