"""sources/train_ddp.py reads a dataset staged with --shards as it reads the plain folders."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from helpers import SOURCES, run_python

from cloudddp.demo_data import write_demo_dataset
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.manifest import SHARDS
from cloudddp.staging.s3_store import S3Store


def download(s3: Any, uri: str, folder: Path) -> Path:
    """What a job's input channel holds: the version's objects, as SageMaker's File mode copies them."""
    prefix = parse_location(uri).key() + "/"
    for item in s3.list_objects_v2(Bucket="bkt", Prefix=prefix)["Contents"]:
        target = folder / item["Key"][len(prefix) :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(s3.get_object(Bucket="bkt", Key=item["Key"])["Body"].read())
    return folder


def train(data: Path, tmp_path: Path, name: str) -> str:
    done = run_python([str(SOURCES / "train_ddp.py"), "--data-dir", str(data), "--epochs", "1", "--image-size", "16",
                       "--model-dir", str(tmp_path / name / "model"), "--checkpoint-dir", str(tmp_path / name / "ckpt")],
                      None, tmp_path, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_the_training_script_sees_the_same_images_in_both_layouts(s3: Any, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    write_demo_dataset(plain, train_per_class=6, val_per_class=3)
    result = stage(plain, S3Store(s3, parse_location("s3://bkt/demo")), StageOptions(layout=SHARDS, shard_size=20_000))
    sharded = download(s3, result.uri, tmp_path / "channel")
    assert len(list(sharded.glob("shard-*.tar"))) >= 2 and not (sharded / "train").exists()
    from_plain, from_shards = train(plain, tmp_path, "a"), train(sharded, tmp_path, "b")
    summary = re.compile(r"training resnet18 on (\d+) images \((\d+) classes\)")
    assert summary.search(from_shards).groups() == summary.search(from_plain).groups() == ("12", "2")  # type: ignore[union-attr]
    # same images, same labels, same seed: the same first epoch, to the printed digits
    epoch = re.compile(r"epoch=1/1 loss=(\S+) train_acc=(\S+) val_acc=(\S+)")
    assert epoch.search(from_shards).groups() == epoch.search(from_plain).groups()  # type: ignore[union-attr]
