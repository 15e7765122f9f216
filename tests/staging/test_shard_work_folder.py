"""A shard build folder left by a stage killed with `kill -9` is removed by the next `--shards` stage that builds
in the same place; a running stage's folder, and any folder not provably abandoned, is never touched.

Before: `kill -9` (or a lost machine) left the shard being written, up to `--shard-size` bytes, in the temp folder
for good (cloudddp-shards-*; the engine could only remove its own folder in `finally`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from cloudddp.staging import work_folder
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import SHARDS
from cloudddp.staging.s3_store import S3Store
from cloudddp.staging.work_folder import PREFIX, ShardWorkFolder

# A stage holding its shard folder: it creates it, writes a partial shard, says where, and waits for stdin to close.
HOLDER = """
import sys
from pathlib import Path
from cloudddp.staging.work_folder import ShardWorkFolder
work = ShardWorkFolder.create(Path(sys.argv[1]))
(work.path / "shard-000000.tar").write_bytes(b"x" * 65536)
print(work.path, flush=True)
sys.stdin.read()
work.remove()
"""


def holder(parent: Path) -> tuple[subprocess.Popen[str], Path]:
    process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), str(parent)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert process.stdout is not None
    return process, Path(process.stdout.readline().strip())


def killed_holder(parent: Path) -> Path:
    process, folder = holder(parent)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert folder.is_dir() and (folder / "shard-000000.tar").stat().st_size == 65536  # what kill -9 leaves
    return folder


@pytest.mark.process
def test_a_killed_stages_folder_goes_and_a_running_ones_stays(tmp_path: Path) -> None:
    abandoned = killed_holder(tmp_path)
    running, in_use = holder(tmp_path)
    unlocked = tmp_path / f"{PREFIX}older-cloudddp"  # no lock file: not provably abandoned
    unlocked.mkdir()
    other = tmp_path / "not-a-shard-folder"
    other.mkdir()
    try:
        work = ShardWorkFolder.create(tmp_path)
        assert not abandoned.exists()
        assert (in_use / "shard-000000.tar").is_file() and unlocked.is_dir() and other.is_dir()
        work.remove()
        assert not work.path.exists()
    finally:
        assert running.stdin is not None
        running.stdin.close()
        assert running.wait(timeout=30) == 0
    assert not in_use.exists()  # it removed its own


@pytest.mark.process
def test_a_shard_stage_cleans_what_a_killed_one_left(tmp_path: Path) -> None:
    (tmp_path / "shards").mkdir()
    abandoned = killed_holder(tmp_path / "shards")
    data = tmp_path / "data"
    data.mkdir()
    for i in range(5):
        (data / f"{i}.bin").write_bytes(os.urandom(2000))
    with mock_aws():
        client: Any = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="bkt")
        result = stage(data, S3Store(client, parse_location("s3://bkt/ds")),
                       StageOptions(layout=SHARDS, shard_dir=tmp_path / "shards"))  # fmt: skip
    assert result.files == 5
    assert not abandoned.exists() and not list((tmp_path / "shards").iterdir())


def test_a_folder_is_locked_before_any_cleaner_can_see_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a review of f685da2: the lock file was created, then locked; a stage starting in between took the
    folder for abandoned and removed it under the running one. Now it is locked under a name no cleaner reads."""
    seen_when_locking: list[list[str]] = []
    lock = work_folder._lock

    def watching(path: Path, create: bool) -> int | None:
        if create:
            seen_when_locking.append([p.name for p in tmp_path.glob(f"{PREFIX}*")])
            assert work_folder.remove_abandoned(tmp_path, keep=tmp_path / "none") == []
        return lock(path, create)

    monkeypatch.setattr(work_folder, "_lock", watching)
    work = ShardWorkFolder.create(tmp_path)
    assert seen_when_locking == [[]]  # a cleaner at that moment found nothing to take
    assert work.path.is_dir() and work.path.name.startswith(PREFIX)
    assert lock(work.path / ".in-use", create=False) is None  # held: no other stage can take it
    work.remove()
