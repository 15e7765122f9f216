"""Log followers (local, Slurm, PBS) read a growing log in bounded chunks: cloudddp/providers/log_tail.py.

Upstream (issue 34 names torchrun as a reference): torchrun follows its workers' log files the same way, never
reading all that is unread at once. pytorch/pytorch tag v2.14.1 (commit 5c4886908584029761b579af026dcfb627c84070,
torch.version.git_version of the 2.14.1 wheel the tests run), torch/distributed/elastic/multiprocessing/tail_log.py
`tail_logfile`: the file is opened in text mode with errors="replace" and read with readline() until EOF (what
is there of an unfinished line comes out as it stands), then polled again; undecodable bytes become U+FFFD and a
character split across two reads is decoded whole (the text layer's incremental decoder). LogTail reads at most
CHUNK bytes at a time with an incremental UTF-8 decoder (errors="replace") and yields the lines of each read before
the next. Holding an unfinished line until its end, up to LONGEST_LINE characters, is cloudddp's own: readline()
has no bound of its own on a line's length.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudddp.providers import log_tail
from cloudddp.providers.log_tail import LogTail


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log_tail, "CHUNK", 8)
    monkeypatch.setattr(log_tail, "LONGEST_LINE", 32)


def test_a_burst_is_read_a_chunk_at_a_time(tmp_path: Path, small_chunks: None) -> None:
    log = tmp_path / "node.log"
    log.write_text("".join(f"line {n}\n" for n in range(1000)))  # ~8.9 KB, read 8 bytes at a time
    tail = LogTail(log)
    lines = tail.new_lines()
    assert next(lines) == "line 0"
    assert tail.position <= 2 * log_tail.CHUNK  # the first line came out before the rest was read
    assert [next(lines) for _ in range(999)] == [f"line {n}" for n in range(1, 1000)]
    assert list(lines) == [] and tail.position == log.stat().st_size


def test_lines_and_characters_split_across_reads_come_out_whole(tmp_path: Path, small_chunks: None) -> None:
    log = tmp_path / "node.log"
    log.write_bytes("épreuve ✓ done\nsecond".encode())  # multi-byte characters across 8-byte reads
    tail = LogTail(log)
    assert list(tail.new_lines()) == ["épreuve ✓ done"]
    with open(log, "ab") as handle:  # the writer goes on: the partial line continues
        handle.write(b" half\nthird")
    assert list(tail.new_lines()) == ["second half"]
    assert list(tail.rest()) == ["third"] and list(tail.rest()) == []


def test_a_line_without_end_comes_out_in_pieces(tmp_path: Path, small_chunks: None) -> None:
    log = tmp_path / "node.log"
    log.write_text("x" * 100)  # no newline, ever: held text stays at most LONGEST_LINE
    tail = LogTail(log)
    assert list(tail.new_lines()) == ["x" * 32] * 3
    assert list(tail.rest()) == ["x" * 4]


def test_a_log_not_written_yet_has_no_lines(tmp_path: Path) -> None:
    assert list(LogTail(tmp_path / "missing.log").new_lines()) == []
