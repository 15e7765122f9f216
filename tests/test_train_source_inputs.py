"""Where sources/train_ddp.py finds its data: the channel "train", else "training" (one input given to fit())."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest
from helpers import SOURCES

CHANNEL_VARIABLES = ("SM_CHANNEL_TRAIN", "CLOUDDDP_CHANNEL_TRAIN", "SM_CHANNEL_TRAINING", "CLOUDDDP_CHANNEL_TRAINING")


def train_ddp(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    loaded = importlib.util.spec_from_file_location("train_ddp_under_test", SOURCES / "train_ddp.py")
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    monkeypatch.setitem(sys.modules, loaded.name, module)  # its dataclasses look their module up there
    loaded.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("variables", "data_dir"),
    [
        ({"SM_CHANNEL_TRAINING": "/opt/ml/input/data/training"}, "/opt/ml/input/data/training"),
        ({"CLOUDDDP_CHANNEL_TRAINING": "/data/training"}, "/data/training"),
        ({"SM_CHANNEL_TRAIN": "/t", "SM_CHANNEL_TRAINING": "/training"}, "/t"),  # "train" first, as before
        ({}, None),
    ],
)
def test_the_data_folder_comes_from_the_train_or_training_channel(
    variables: dict[str, str], data_dir: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in CHANNEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["train_ddp.py"])
    monkeypatch.syspath_prepend(str(SOURCES))  # its neighbour checkpointing.py, as in a job's source folder
    assert train_ddp(monkeypatch).parse_args().data_dir == data_dir
