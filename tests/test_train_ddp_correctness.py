"""sources/train_ddp.py reports the truth: val_acc is measured on validation images labelled as training labels
them, in both data layouts and from every validation channel; a rerun on a finished checkpoint keeps its
metrics; an explicit --lr wins over the checkpoint's; SageMaker-style hyperparameters (`--flag True`,
`--batch_size 8`) parse; a resumed epoch reports all its steps; CIFAR-10 is downloaded once per node; mixed
precision picks fp16 with loss scaling where bf16 is only emulated.

Each test runs the real script (or, for the GPU-only choices, its functions) and checks what it printed or wrote.
"""

from __future__ import annotations

import hashlib
import http.server
import importlib.util
import io
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest
import torch
from helpers import PYTHON, SOURCES, clean_env, run_python

from cloudddp.demo_data import write_demo_dataset
from cloudddp.metrics import DEFAULT_METRICS
from cloudddp.staging.local_files import list_files
from cloudddp.staging.shards import build_shards, index_json

TRAIN = str(SOURCES / "train_ddp.py")
TINY = ["--arch", "tiny", "--image-size", "16", "--batch-size", "4"]
CHANNELS = ("SM_CHANNEL_VAL", "CLOUDDDP_CHANNEL_VAL", "SM_CHANNEL_VALIDATION", "CLOUDDDP_CHANNEL_VALIDATION")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small")
    write_demo_dataset(root, train_per_class=16, val_per_class=8)  # classes: horizontal (0), vertical (1)
    return root


def script(tmp_path: Path) -> ModuleType:
    """The script as a module, for its functions (its neighbour checkpointing.py importable, as in a job)."""
    sys.path.insert(0, str(SOURCES))
    try:
        spec = importlib.util.spec_from_file_location(f"train_ddp_{tmp_path.name}", TRAIN)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SOURCES))


def train(tmp_path: Path, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The script in one process; model and checkpoints in tmp_path/name unless ARGS name them."""
    folders = ["--model-dir", str(tmp_path / name / "model"), "--checkpoint-dir", str(tmp_path / name / "ckpt")]
    return run_python([TRAIN, *TINY, *folders, *args], env, tmp_path, timeout=300)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout + done.stderr


def metrics(tmp_path: Path, name: str) -> dict[str, Any]:
    return json.loads((tmp_path / name / "model" / "metrics.json").read_text())


def accuracy_on(tmp_path: Path, name: str, folder: Path, label: int) -> float:
    """The saved model's accuracy on the images of FOLDER (one class, whose training label is LABEL)."""
    module = script(tmp_path)
    model = module.build_model(2, False, "tiny")
    model.load_state_dict(torch.load(tmp_path / name / "model" / "model.pt", weights_only=True))
    from PIL import Image
    from torchvision import transforms

    normalize = transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))  # the script's
    tf = transforms.Compose([transforms.Resize((16, 16)), transforms.ToTensor(), normalize])
    # Compose's __call__ is untyped (it returns its input's type to a type checker); ToTensor made it a Tensor
    images = torch.stack([cast(torch.Tensor, tf(Image.open(p).convert("RGB"))) for p in sorted(folder.iterdir())])
    with torch.no_grad():
        return float((model(images).argmax(1) == label).float().mean())


def shards_of(source: Path, target: Path) -> Path:
    """What `cloudddp stage --shards` leaves in a channel: tar shards plus _cloudddp_index.json."""
    target.mkdir(parents=True)
    shards, _ = build_shards(list_files(source), target, 1 << 20)
    (target / "_cloudddp_index.json").write_bytes(index_json(shards))
    return target


def vertical_only_val(data: Path, root: Path) -> Path:
    """A validation set holding only the second training class: its own folder numbering would call it 0."""
    (root / "val").mkdir(parents=True)
    shutil.copytree(data / "val" / "vertical", root / "val" / "vertical")
    return root


# Finding 1: validation labels, validation channels, the fallback warning


@pytest.mark.process
@pytest.mark.parametrize("layout", ["plain", "shards"])
def test_val_acc_uses_the_training_labels_when_validation_lacks_a_class(
    tmp_path: Path, data: Path, layout: str
) -> None:
    val = vertical_only_val(data, tmp_path / "val-plain")
    channel = tmp_path / "channel"
    shutil.copytree(data / "train", channel / "train")
    shutil.copytree(val / "val", channel / "val")
    if layout == "shards":
        channel = shards_of(channel, tmp_path / "channel-shards")
    out = ok(train(tmp_path, "run", "--data-dir", str(channel), "--epochs", "4", "--lr", "0.05"))
    expected = accuracy_on(tmp_path, "run", data / "val" / "vertical", label=1)
    assert expected > 0.5  # the model learnt the class: a shifted label would show as a low val_acc
    assert metrics(tmp_path, "run")["val_acc"] == round(expected, 4)
    assert "validating on 8 images" in out and "warning" not in out


@pytest.mark.process
@pytest.mark.parametrize("variable", ["--val-dir", "SM_CHANNEL_VAL", "SM_CHANNEL_VALIDATION", "CLOUDDDP_CHANNEL_VAL"])
def test_a_separate_validation_channel_of_shards_is_read_with_the_training_labels(
    tmp_path: Path, data: Path, variable: str
) -> None:
    """fit({"train": ..., "validation": ...}) with both staged as shards: val_acc is the val channel's."""
    train_channel = shards_of(data / "train", tmp_path / "train-shards")
    val_channel = shards_of(vertical_only_val(data, tmp_path / "val") / "val", tmp_path / "val-shards")
    flag = [variable, str(val_channel)] if variable.startswith("--") else []
    env = {} if flag else {variable: str(val_channel)}
    out = ok(train(tmp_path, "run", "--data-dir", str(train_channel), "--epochs", "4", "--lr", "0.05", *flag, env=env))
    expected = accuracy_on(tmp_path, "run", data / "val" / "vertical", label=1)
    assert metrics(tmp_path, "run")["val_acc"] == round(expected, 4)
    assert "training tiny on 32 images (2 classes), validating on 8 images" in out and "warning" not in out


@pytest.mark.process
def test_a_validation_class_the_training_set_lacks_is_one_clear_error(tmp_path: Path, data: Path) -> None:
    val = tmp_path / "val"
    shutil.copytree(data / "val", val)
    shutil.copytree(data / "val" / "vertical", val / "diagonal")
    done = train(tmp_path, "run", "--data-dir", str(data / "train"), "--val-dir", str(val), "--epochs", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    error = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(error) == 1 and "diagonal" in error[0] and str(val) in error[0], done.stderr


@pytest.mark.process
def test_validating_on_the_training_images_is_said_once(tmp_path: Path, data: Path) -> None:
    done = train(tmp_path, "run", "--data-dir", str(data / "train"), "--epochs", "1")
    ok(done)
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "val_acc is measured on the training images" in warnings[0]


# Finding 3: rerunning on a checkpoint folder


@pytest.mark.process
def test_a_rerun_on_a_finished_checkpoint_keeps_its_metrics_and_more_epochs_train_further(
    tmp_path: Path, data: Path
) -> None:
    args = ["--data-dir", str(data), "--epochs", "2"]
    ok(train(tmp_path, "run", *args))
    finished = metrics(tmp_path, "run")
    weights = (tmp_path / "run" / "model" / "fingerprint-rank0.txt").read_text()
    assert finished["epoch"] == 2 and "val_acc" in finished

    again = ok(train(tmp_path, "run", *args))
    assert "is complete: it finished epoch 2, and --epochs is 2; nothing to train" in again
    assert "epoch=" not in again  # nothing trained
    assert metrics(tmp_path, "run") == finished  # not wiped
    assert (tmp_path / "run" / "model" / "fingerprint-rank0.txt").read_text() == weights

    further = ok(train(tmp_path, "run", "--data-dir", str(data), "--epochs", "3"))
    assert re.findall(r"^epoch=(\d+)/3 ", further, re.M) == ["3"]
    assert metrics(tmp_path, "run")["epoch"] == 3


def checkpoint_lr(tmp_path: Path) -> float:
    state = torch.load(tmp_path / "run" / "ckpt" / "checkpoint.pt", weights_only=False)
    return state["optimizer"]["param_groups"][0]["lr"]


@pytest.mark.process
def test_an_explicit_lr_replaces_the_checkpoints_and_a_missing_one_keeps_it(tmp_path: Path, data: Path) -> None:
    ok(train(tmp_path, "run", "--data-dir", str(data), "--epochs", "1", "--lr", "0.02"))
    out = ok(train(tmp_path, "run", "--data-dir", str(data), "--epochs", "2", "--lr", "0.5"))
    assert "lr 0.5 (--lr; the checkpoint had 0.02)" in out
    assert checkpoint_lr(tmp_path) == 0.5  # epoch 2 trained with it
    out = ok(train(tmp_path, "run", "--data-dir", str(data), "--epochs", "3"))
    assert "lr 0.5 (the checkpoint's)" in out
    assert checkpoint_lr(tmp_path) == 0.5


@pytest.mark.process
@pytest.mark.parametrize("recorded", [True, False], ids=["checkpoint-names-its-arch", "older-checkpoint"])
def test_a_checkpoint_of_another_arch_is_one_clear_error(tmp_path: Path, data: Path, recorded: bool) -> None:
    ok(train(tmp_path, "run", "--data-dir", str(data), "--epochs", "1"))
    if not recorded:  # as written before checkpoints named their model: the weights' shapes must tell
        for path in (tmp_path / "run" / "ckpt").glob("checkpoint-step*.pt"):
            state = torch.load(path, weights_only=False)
            del state["arch"], state["classes"]
            torch.save(state, path)
    done = train(tmp_path, "run", "--data-dir", str(data), "--epochs", "2", "--arch", "resnet18")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    error = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(error) == 1 and str(tmp_path / "run" / "ckpt") in error[0] and "--no-resume" in error[0]
    assert ("arch tiny (this run: resnet18)" if recorded else "does not fit --arch resnet18") in error[0]


# Finding 4: hyperparameters as SageMaker's training toolkit passes them


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], {"pretrained": False, "no_resume": False, "log_steps": False}),
        (["--pretrained", "--no-resume", "--log-steps"], {"pretrained": True, "no_resume": True, "log_steps": True}),
        (["--pretrained", "True", "--no_resume", "False", "--log_steps", "true"],
         {"pretrained": True, "no_resume": False, "log_steps": True}),
        (["--pretrained", "False", "--epochs", "3"], {"pretrained": False, "epochs": 3}),
        (["--pretrained=false", "--log-steps=1"], {"pretrained": False, "log_steps": True}),
        (["--batch_size", "8", "--data_dir", "/d", "--checkpoint_every", "2"],
         {"batch_size": 8, "data_dir": "/d", "checkpoint_every": 2}),
    ],
)  # fmt: skip
def test_switches_take_true_or_false_and_every_flag_its_underscore_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: dict[str, Any]
) -> None:
    monkeypatch.setattr(sys, "argv", ["train_ddp.py", *argv])
    parsed = vars(script(tmp_path).parse_args())
    assert {name: parsed[name] for name in expected} == expected


def test_every_hyphenated_flag_has_an_underscore_alias(tmp_path: Path) -> None:
    options = {o for action in script(tmp_path).build_parser()._actions for o in action.option_strings}
    hyphenated = {o for o in options if o.startswith("--") and "-" in o[2:]}
    assert len(hyphenated) >= 10 and all(f"--{o[2:].replace('-', '_')}" in options for o in hyphenated)


@pytest.mark.process
def test_a_switch_given_a_word_that_is_not_a_boolean_is_a_usage_error(tmp_path: Path, data: Path) -> None:
    # The script as a job runs it: the usage error reaches the shell as exit 2, before anything is written.
    done = train(tmp_path, "run", "--data-dir", str(data), "--pretrained", "maybe")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert re.search(r"error: argument --pretrained\S*: expected true or false, got 'maybe'", done.stderr)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [("--batch-size", "0", "of at least 1"), ("--image-size", "0", "of at least 1"), ("--epochs", "0", "of at least 1"),
     ("--lr", "-1", "above 0"), ("--lr", "nan", "above 0"), ("--lr", "0", "above 0"), ("--momentum", "-0.5", "of at least 0"),
     ("--workers", "-1", "of at least 0"), ("--batch_size", "eight", "expected a whole number")],
)  # fmt: skip
def test_a_value_that_cannot_train_is_a_usage_error_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, expected: str
) -> None:
    # They ended in torch tracebacks (exit 1), or "succeeded" with a NaN or untrained model. main() parses before
    # anything else; the test above runs the script for the exit code and the untouched folders.
    with pytest.raises(SystemExit) as exited:
        script(tmp_path).parse_args([*TINY, "--data-dir", str(tmp_path), flag, value])
    stderr = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in stderr, stderr
    assert f"argument {flag.replace('_', '-')}" in stderr and expected in stderr, stderr


@pytest.mark.process
@pytest.mark.parametrize("flag", ["--model-dir", "--checkpoint-dir"])
def test_a_model_or_checkpoint_folder_that_is_a_file_is_one_clear_error(tmp_path: Path, data: Path, flag: str) -> None:
    taken = tmp_path / "taken"
    taken.write_text("a file the user keeps")
    done = run_python([TRAIN, *TINY, "--data-dir", str(data), "--model-dir", str(tmp_path / "m"),
                       "--checkpoint-dir", str(tmp_path / "c"), flag, str(taken)], None, tmp_path, timeout=300)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"{flag} {taken}: a file, not a folder" in done.stdout + done.stderr
    assert taken.read_text() == "a file the user keeps"


@pytest.mark.process
def test_the_script_runs_with_the_arguments_the_sagemaker_toolkit_builds(tmp_path: Path, data: Path) -> None:
    # mapping.to_cmd_args({"batch_size": 8, "epochs": 1, "log_steps": True, "no_resume": True, "pretrained": False})
    # (aws/sagemaker-training-toolkit 33839372 src/sagemaker_training/mapping.py): sorted keys, str(value).
    args = ["--batch_size", "8", "--epochs", "1", "--log_steps", "True", "--no_resume", "True", "--pretrained", "False"]
    out = ok(train(tmp_path, "run", "--data_dir", str(data), *args))
    assert "batch=8/process" in out and re.findall(r"^step=(\d+) ", out, re.M) == ["1", "2", "3", "4"]
    assert metrics(tmp_path, "run")["epoch"] == 1
    # What cloudddp's default metric definitions read from these logs: one value each for the one epoch (the
    # saved-model line said val_acc= too, so every run had one val_acc more than it had epochs).
    assert {name: len(re.findall(regex, out)) for name, regex in DEFAULT_METRICS.items()} == dict.fromkeys(
        DEFAULT_METRICS, 1
    )


# Finding 6: mixed precision on GPUs that only emulate bf16 (no GPU needed: torch.cuda's answers are stood in)


def gpu(monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], flag: bool) -> None:
    """torch.cuda on a GPU of CAPABILITY, as torch 2.3+ answers: bf16 "supported" everywhere once emulation
    counts (a bf16 tensor can be made on a V100); native only from 8.0. FLAG: torch knows including_emulation."""

    def with_flag(including_emulation: bool = True) -> bool:
        return including_emulation or capability[0] >= 8

    def without_flag() -> bool:
        return True

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", with_flag if flag else without_flag)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.version, "hip", None)


@pytest.mark.parametrize("flag", [True, False], ids=["torch-with-including_emulation", "torch-2.3-without-it"])
@pytest.mark.parametrize(
    ("capability", "dtype"), [((7, 0), torch.float16), ((7, 5), torch.float16), ((8, 0), torch.bfloat16)],
    ids=["V100", "T4", "A100"],
)  # fmt: skip
def test_bf16_only_where_the_gpu_has_it_natively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: bool, capability: tuple[int, int], dtype: torch.dtype
) -> None:
    module = script(tmp_path)
    gpu(monkeypatch, capability, flag)
    assert module.amp_settings(torch.device("cuda", 0)) == (True, dtype)
    assert module.amp_settings(torch.device("cpu")) == (False, torch.float16)  # no autocast on the CPU


@pytest.mark.parametrize(
    ("precision", "expected"),
    [("fp32", (False, torch.float32)), ("bf16", (True, torch.bfloat16)), ("fp16", (True, torch.float16))],
)  # fmt: skip
def test_precision_names_what_the_gpu_steps_compute_in_whatever_the_gpu_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, precision: str, expected: tuple[bool, torch.dtype]
) -> None:
    module = script(tmp_path)
    gpu(monkeypatch, (7, 0), True)  # a V100: auto would pick fp16; an explicit choice is kept
    assert module.amp_settings(torch.device("cuda", 0), precision) == expected
    assert module.amp_settings(torch.device("cpu"), "fp32") == (False, torch.float32)


@pytest.mark.process
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_asked_for_on_the_cpu_is_one_clear_error(tmp_path: Path, data: Path, precision: str) -> None:
    done = train(tmp_path, "run", "--data-dir", str(data), "--epochs", "1", "--precision", precision)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"--precision {precision}: mixed precision needs a GPU" in done.stdout + done.stderr
    assert not (tmp_path / "run" / "model").exists()


@pytest.mark.process
def test_a_plain_process_trains_in_fp32_without_a_process_group(tmp_path: Path, data: Path) -> None:
    out = ok(train(tmp_path, "run", "--data-dir", str(data), "--epochs", "1"))
    assert "device=cpu, precision=fp32, backend=none," in out


def test_the_loss_scaler_is_the_older_spelling_on_torch_before_2_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = script(tmp_path)
    monkeypatch.delattr(torch.amp, "GradScaler")  # torch 2.1 and 2.2 have only torch.cuda.amp.GradScaler
    scaler = module.grad_scaler(enabled=False)
    assert isinstance(scaler, torch.cuda.amp.GradScaler) and not scaler.is_enabled()


# Findings 5 and 7: several processes (torchrun on this machine, 2 processes, gloo)


def torchrun(tmp_path: Path, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    log = open(tmp_path / f"{name}.log", "a")  # noqa: SIM115 (the process writes it; closed with the test's tmp)
    folders = ["--model-dir", str(tmp_path / name / "model"), "--checkpoint-dir", str(tmp_path / name / "ckpt")]
    argv = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", TRAIN, *TINY, *folders]
    return subprocess.Popen([*argv, *args], cwd=tmp_path, env=clean_env(env), stdout=log, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip


def finish(process: subprocess.Popen[str], tmp_path: Path, name: str) -> str:
    code = process.wait(timeout=300)
    out = (tmp_path / f"{name}.log").read_text()
    assert code == 0, out[-3000:]
    return out


def epoch_line(out: str, epoch: int) -> tuple[str, str]:
    found = re.search(rf"^epoch={epoch}/\d+ loss=(\S+) train_acc=(\S+) ", out, re.M)
    assert found, out[-3000:]
    return found.group(1), found.group(2)


def children(pid: int) -> list[int]:
    """The processes whose parent is PID (torchrun's workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_a_mid_epoch_resume_reports_the_whole_epoch(tmp_path: Path, data: Path) -> None:
    # 32 images, 2 processes x 4 per batch: 4 steps per epoch. Every rank holds after step 1 (--hold-while); the
    # stop signal makes them run step 2, agree and checkpoint there: half of epoch 1, whatever the timing.
    args = ["--data-dir", str(data), "--epochs", "2", "--lr", "0.05", "--log-steps"]
    reference = finish(torchrun(tmp_path, "reference", *args), tmp_path, "reference")
    hold = tmp_path / "hold"
    hold.touch()
    first = torchrun(tmp_path, "run", *args, "--hold-while", str(hold))
    deadline = time.monotonic() + 240
    while "step=1 " not in (tmp_path / "run.log").read_text():
        assert first.poll() is None and time.monotonic() < deadline, (tmp_path / "run.log").read_text()[-3000:]
        time.sleep(0.1)
    for worker in children(first.pid):  # SIGTERM as SageMaker's stop sends it
        os.kill(worker, signal.SIGTERM)
    stopped = finish(first, tmp_path, "run")
    assert "stop requested (SIGTERM): checkpoint at step 2 is saved" in stopped
    resumed = finish(torchrun(tmp_path, "run", *args), tmp_path, "run")
    assert "at step 2 (epoch 1, 16 samples of it done)" in resumed
    assert epoch_line(resumed, 1) == epoch_line(reference, 1)  # the whole epoch, not its last 2 steps
    assert epoch_line(resumed, 2) == epoch_line(reference, 2)
    got, want = metrics(tmp_path, "run"), metrics(tmp_path, "reference")
    keys = ("epoch", "loss", "train_acc", "val_acc", "step")
    assert {k: got[k] for k in keys} == {k: want[k] for k in keys}
    prints = {p.read_text() for p in tmp_path.glob("*/model/fingerprint-rank*.txt")}
    assert len(prints) == 1  # both ranks of both runs: the same weights


@pytest.mark.slow
def test_one_process_under_torchrun_runs_ddp_and_learns_what_a_plain_process_learns(tmp_path: Path, data: Path) -> None:
    # torchrun with one process still sets up the process group (nccl on a GPU), so a one-GPU machine runs
    # the cluster's code path; in a world of one DDP's all-reduce changes nothing, so the weights are the same.
    args = ["--data-dir", str(data), "--epochs", "2"]
    plain = ok(train(tmp_path, "plain", *args))
    folders = ["--model-dir", str(tmp_path / "ddp" / "model"), "--checkpoint-dir", str(tmp_path / "ddp" / "ckpt")]
    argv = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", TRAIN, *TINY, *folders, *args]
    under_torchrun = ok(run_python(argv, None, tmp_path, timeout=300))
    assert "world_size=1, batch=4/process, device=cpu, precision=fp32, backend=gloo," in under_torchrun
    assert "backend=none," in plain
    fingerprints = [(tmp_path / name / "model" / "fingerprint-rank0.txt").read_text() for name in ("plain", "ddp")]
    assert fingerprints[0] == fingerprints[1]
    assert metrics(tmp_path, "ddp")["val_acc"] == metrics(tmp_path, "plain")["val_acc"]


def fake_cifar10(folder: Path) -> tuple[bytes, dict[str, str]]:
    """A CIFAR-10 archive of 10 images per batch file in the real layout, and each file's MD5."""
    generator = torch.Generator().manual_seed(0)
    files: dict[str, bytes] = {}
    for name in [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch"]:
        images = torch.randint(0, 256, (10, 3072), generator=generator, dtype=torch.uint8).numpy()
        files[name] = pickle.dumps({"data": images, "labels": list(range(10))})
    files["batches.meta"] = pickle.dumps({"label_names": [f"class{i}" for i in range(10)]})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue(), {name: hashlib.md5(content).hexdigest() for name, content in files.items()}


@pytest.fixture
def cifar_server(tmp_path: Path) -> Iterator[tuple[str, list[str], Path]]:
    """A stand-in for the CIFAR host. It holds the first download until a second one starts (or 15 s pass), so
    two ranks downloading at once always both reach it; a sitecustomize.py points torchvision at it."""
    archive, md5s = fake_cifar10(tmp_path)
    downloads: list[str] = []
    second = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if "Method" not in self.headers:  # torchvision's redirect probe sends "Method: HEAD"; count downloads
                downloads.append(self.path)
                if len(downloads) > 1:
                    second.set()
                else:
                    second.wait(15)
            self.send_response(200)
            self.send_header("Content-Length", str(len(archive)))
            self.end_headers()
            self.wfile.write(archive)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/cifar-10-python.tar.gz"
    site = tmp_path / "site"
    site.mkdir()
    names = [f"data_batch_{i}" for i in range(1, 6)]
    (site / "sitecustomize.py").write_text(
        "from torchvision.datasets import CIFAR10 as C\n"
        f"C.url, C.tgz_md5 = {url!r}, {hashlib.md5(archive).hexdigest()!r}\n"
        f"C.train_list = {[[n, md5s[n]] for n in names]!r}\n"
        f"C.test_list = [['test_batch', {md5s['test_batch']!r}]]\n"
        f"C.meta = {{'filename': 'batches.meta', 'key': 'label_names', 'md5': {md5s['batches.meta']!r}}}\n"
    )
    try:
        yield url, downloads, site
    finally:
        server.shutdown()


@pytest.mark.slow
def test_cifar10_is_downloaded_once_per_node_while_the_other_rank_waits(
    tmp_path: Path, cifar_server: tuple[str, list[str], Path]
) -> None:
    _, downloads, site = cifar_server
    env = {"PYTHONPATH": str(site)}
    args = ["--dataset", "cifar10", "--data-dir", str(tmp_path / "cifar"), "--epochs", "1", "--batch-size", "8"]
    out = finish(torchrun(tmp_path, "run", *args, env=env), tmp_path, "run")
    assert len(downloads) == 1, out[-3000:]
    assert "training tiny on 50 images (10 classes), validating on 10 images, world_size=2" in out
    assert sorted(p.name for p in (tmp_path / "cifar").iterdir()) == ["cifar-10-batches-py"]  # no staging left
    assert len({p.read_text() for p in (tmp_path / "run" / "model").glob("fingerprint-rank*.txt")}) == 1
