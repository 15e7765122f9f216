"""The demo dataset: deterministic, valid images, ImageFolder layout; and the script runs without any launcher."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from helpers import PYTHON, SOURCES, clean_env, cli

from cloudddp.demo_data import CLASSES, write_demo_dataset


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.png")):
        h.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    counts = write_demo_dataset(tmp_path / "a", train_per_class=4, val_per_class=2)
    write_demo_dataset(tmp_path / "b", train_per_class=4, val_per_class=2)
    write_demo_dataset(tmp_path / "c", train_per_class=4, val_per_class=2, seed=1)
    assert counts == {"train": 8, "val": 4}
    assert digest(tmp_path / "a") == digest(tmp_path / "b") != digest(tmp_path / "c")
    assert sorted(p.name for p in (tmp_path / "a" / "train").iterdir()) == sorted(CLASSES)


def test_a_smaller_set_written_over_a_larger_one_is_what_it_reports(tmp_path: Path) -> None:
    # The larger set's extra images stayed: the folder held 16 per class while the command reported 4.
    write_demo_dataset(tmp_path / "a", train_per_class=8, val_per_class=4)
    (tmp_path / "a" / "train" / CLASSES[0] / "mine.png").write_bytes(b"not ours")
    counts = write_demo_dataset(tmp_path / "a", train_per_class=4, val_per_class=2)
    write_demo_dataset(tmp_path / "b", train_per_class=4, val_per_class=2)
    (tmp_path / "a" / "train" / CLASSES[0] / "mine.png").unlink()  # a file of the user's own is left alone
    assert counts == {"train": 8, "val": 4} and digest(tmp_path / "a") == digest(tmp_path / "b")


def test_images_decode_as_32x32_rgb(tmp_path: Path) -> None:
    from PIL import Image

    write_demo_dataset(tmp_path, train_per_class=2, val_per_class=1)
    for path in tmp_path.rglob("*.png"):
        with Image.open(path) as image:
            assert image.size == (32, 32) and image.mode == "RGB"


@pytest.mark.slow
def test_training_script_runs_as_a_plain_process_for_debugging(tmp_path: Path, small_demo_data: Path) -> None:
    result = subprocess.run(
        [PYTHON, str(SOURCES / "train_ddp.py"), "--data-dir", str(small_demo_data), "--epochs", "1",
         "--model-dir", str(tmp_path / "model"), "--checkpoint-dir", str(tmp_path / "ckpt")],
        env=clean_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "world_size=1" in result.stdout and "epoch=1/1" in result.stdout
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert metrics["world_size"] == 1 and (tmp_path / "model" / "model.pt").is_file()


def test_a_target_that_cannot_be_a_folder_or_a_count_below_one_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me\n")
    result = cli("demo-data", str(tmp_path / "notes.txt"), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"demo-data: '{tmp_path / 'notes.txt'}' is a file" in result.stderr
    result = cli("demo-data", str(tmp_path / "notes.txt" / "data"), cwd=tmp_path)
    assert result.returncode == 2 and f"cannot make the folder '{tmp_path / 'notes.txt' / 'data'}'" in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "keep me\n"
    result = cli("demo-data", str(tmp_path / "data"), "--train-per-class", "-5", cwd=tmp_path)
    assert result.returncode == 2 and "--train-per-class" in result.stderr
    assert not (tmp_path / "data").exists()
