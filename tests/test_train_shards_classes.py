"""sources/train_ddp.py reads one data set the same in its plain and its shard layout (`cloudddp stage --shards`):
a class folder without images is torchvision ImageFolder's error in both, not a class the shards skip."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import ModuleType

import pytest
from helpers import SOURCES
from PIL import Image
from test_train_source_inputs import train_ddp


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 10, 10)).save(out, format="PNG")
    return out.getvalue()


def layouts(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, Path]:
    """The same files as plain files and as one shard with its index (offsets as `cloudddp stage` writes them)."""
    plain, sharded = tmp_path / "plain", tmp_path / "sharded"
    sharded.mkdir()
    members, blob = [], b""
    for path, data in files.items():
        (plain / path).parent.mkdir(parents=True, exist_ok=True)
        (plain / path).write_bytes(data)
        members.append({"path": path, "offset": len(blob), "size": len(data)})
        blob += data
    (sharded / "shard-000000.tar").write_bytes(blob)
    index = {"shards": [{"name": "shard-000000.tar", "members": members}]}
    (sharded / "_cloudddp_index.json").write_text(json.dumps(index))
    return plain, sharded


def read(module: ModuleType, root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str] | str]:
    """(0, classes) of the training set, or (exit code, the error without its path)."""
    try:
        found = module.image_set(root, "train/", lambda image: image, None, "--data-dir")
    except SystemExit as exc:
        return int(exc.code or 0), capsys.readouterr().err.split(": ", 3)[-1]
    return 0, list(found.classes)


@pytest.mark.parametrize("extra", [{"train/notes/readme.txt": b"x"}, {"train/notes/deeper/a.txt": b"x"}, {}])
def test_a_class_folder_without_images_is_read_alike_in_both_layouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], extra: dict[str, bytes]
) -> None:
    # Before: the plain layout failed ("Found no valid file for the classes notes"), the shards trained on 2.
    monkeypatch.syspath_prepend(str(SOURCES))  # its neighbour checkpointing.py, as in a job's source folder
    module = train_ddp(monkeypatch)
    files = {f"train/{c}/{i}.png": png() for c in ("cats", "dogs") for i in range(2)} | extra
    plain, sharded = layouts(tmp_path, files)
    from_plain, from_shards = read(module, plain, capsys), read(module, sharded, capsys)
    assert from_plain == from_shards
    if extra:
        assert from_shards[0] == 2 and "Found no valid file for the classes notes." in from_shards[1]
    else:
        assert from_shards == (0, ["cats", "dogs"])
