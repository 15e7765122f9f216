"""ResNet-18 image classification with PyTorch DDP, runnable anywhere cloudddp runs it.

Where things come from (first found wins):
- training data: --data-dir, SM_CHANNEL_TRAIN (SageMaker), CLOUDDDP_CHANNEL_TRAIN (other
  cloudddp providers), else the channel "training" (what `fit("s3://...")` names one input, as in the
  SageMaker SDK): SM_CHANNEL_TRAINING, CLOUDDDP_CHANNEL_TRAINING; an ImageFolder root holding train/ and val/ (like hymenoptera_data),
  or a train root with the validation root in --val-dir / SM_CHANNEL_VAL / CLOUDDDP_CHANNEL_VAL, or the
  SageMaker-style channel "validation" (SM_CHANNEL_VALIDATION, CLOUDDDP_CHANNEL_VALIDATION).
  Either as plain files or as `cloudddp stage --shards` left it: tar shards plus
  `_cloudddp_index.json` (each image read straight from its shard at the indexed offset).
  Validation images are labelled with the training set's classes (a class training lacks is an error);
  without validation data, val_acc is measured on the training images, and the log warns so.
  `--dataset cifar10` downloads CIFAR-10 instead (real clouds only: needs internet): one process per
  node downloads while the others wait.
- model folder: --model-dir, SM_MODEL_DIR, CLOUDDDP_MODEL_DIR, ./model
- checkpoints: --checkpoint-dir, SageMaker's checkpointconfig.json LocalPath,
  CLOUDDDP_CHECKPOINT_DIR, ./checkpoints. Saved every epoch (and every --checkpoint-every steps)
  by checkpointing.py: atomic, newest complete one resumed, at the same step with the data order
  continuing, the epoch's figures counted from its start. SIGTERM (stop, spot reclaim) and SIGUSR1
  (Slurm's warning) checkpoint and exit. A checkpoint at or past --epochs trains nothing: its model and
  metrics are saved again. --lr / --momentum given on a resumed run replace the checkpoint's; left out,
  the checkpoint's stay. A checkpoint of another --arch or other classes is refused.
- flags: every `--a-b` also answers to `--a_b`, and the switches (--pretrained, --no-resume, --log-steps)
  take `true`/`false` as well as nothing: SageMaker passes hyperparameters as `--name value`.

Runs under torchrun (RANK/WORLD_SIZE/LOCAL_RANK set) or as a plain single process for
debugging. gloo on CPU, nccl on GPU; under torchrun the process group is set up in a world of one
too, so one GPU runs the cluster's DDP path. --precision auto (default) is mixed precision on a GPU
(bf16 where native, else fp16 with loss scaling) and fp32 on the CPU; fp32, bf16 and fp16 choose
(bf16 and fp16 need a GPU). Rank 0 logs one parseable
line per epoch (`epoch=2/3 loss=... images_per_sec=... val_acc=...`), saves the model
(model.pt), metrics.json, and every rank writes a fingerprint of its final weights
(fingerprint-rank<R>.txt) so tests can prove the replicas are identical.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import io
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import torch
import torch.distributed as dist
import torchvision
from checkpointing import Position, ResumableSampler, StopRequest, load_latest, position_of, save_checkpoint
from PIL import Image
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

DEFAULT_LR, DEFAULT_MOMENTUM = 0.02, 0.9
NORMALIZE = transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def fail(message: str) -> NoReturn:
    """Bad input: one line naming what is wrong, exit 2 (argparse's code for a usage error), no traceback."""
    print(f"train_ddp.py: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def warn(rank: int, message: str) -> None:
    if rank == 0:
        print(f"train_ddp.py: warning: {message}", file=sys.stderr, flush=True)


def first(*values: str | None) -> str | None:
    return next((v for v in values if v), None)


def sagemaker_checkpoint_dir() -> str | None:
    config = os.environ.get("SM_INPUT_CONFIG_DIR")
    path = Path(config) / "checkpointconfig.json" if config else None
    if path and path.is_file():
        return json.loads(path.read_text()).get("LocalPath")
    return None


BOOLEAN_WORDS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def boolean(text: str) -> bool:
    try:
        return BOOLEAN_WORDS[text.strip().lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}") from None


def at_least(low: float, kind: type = int, above: bool = False) -> Any:
    """An argparse type: a number of `kind` no less than `low` (greater than it, with `above`), finite. A batch
    size of 0, a negative learning rate or `nan` would otherwise fail deep in torch or train a broken model."""

    def read(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a {'whole ' if kind is int else ''}number, got {text!r}"
            ) from None
        if not math.isfinite(value) or value < low or (above and value == low):
            raise argparse.ArgumentTypeError(
                f"expected a number {'above' if above else 'of at least'} {low}, got {text!r}"
            )
        return value

    return read


class Parser(argparse.ArgumentParser):
    """Every `--a-b` also answers to `--a_b`: SageMaker passes hyperparameter names as written
    (sagemaker-training-toolkit mapping.py to_cmd_args, whose own example is `--batch_size`)."""

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:  # type: ignore[override]
        aliases = [f"--{n[2:].replace('-', '_')}" for n in names if n.startswith("--") and "-" in n[2:]]
        return super().add_argument(*names, *aliases, **kwargs)

    def switch(self, name: str, help: str) -> None:
        """A boolean flag: bare `--name` is true, and so is `--name true`; `--name false` is false. The toolkit
        passes a boolean hyperparameter as `--name True` / `--name False` (to_cmd_args: `str(value)`)."""
        self.add_argument(name, nargs="?", const=True, default=False, type=boolean, metavar="true|false", help=help)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def build_parser() -> Parser:
    env = os.environ.get
    p = Parser(description=__doc__.split("\n")[0])
    train = (env("SM_CHANNEL_TRAIN"), env("CLOUDDDP_CHANNEL_TRAIN"))
    training = (env("SM_CHANNEL_TRAINING"), env("CLOUDDDP_CHANNEL_TRAINING"))  # fit("s3://..."): one channel
    val = (env("SM_CHANNEL_VAL"), env("CLOUDDDP_CHANNEL_VAL"))
    validation = (env("SM_CHANNEL_VALIDATION"), env("CLOUDDDP_CHANNEL_VALIDATION"))  # the SageMaker examples' name
    p.add_argument("--data-dir", default=first(*train, *training))
    p.add_argument("--val-dir", default=first(*val, *validation))
    p.add_argument("--dataset", choices=("folder", "cifar10"), default="folder")
    p.add_argument("--model-dir", default=first(env("SM_MODEL_DIR"), env("CLOUDDDP_MODEL_DIR"), "model"))
    p.add_argument(
        "--checkpoint-dir",
        default=first(sagemaker_checkpoint_dir(), env("CLOUDDDP_CHECKPOINT_DIR"), "checkpoints"),
    )
    p.add_argument("--epochs", type=at_least(1), default=5)
    p.add_argument("--batch-size", type=at_least(1), default=16, help="per process")
    resumed = "on a resumed run the checkpoint's unless given"
    p.add_argument("--lr", type=at_least(0, float, above=True), help=f"default {DEFAULT_LR}; {resumed}")
    p.add_argument("--momentum", type=at_least(0, float), help=f"default {DEFAULT_MOMENTUM}; {resumed}")
    p.add_argument("--image-size", type=at_least(1), default=32)
    p.add_argument("--workers", type=at_least(0), default=0)
    p.add_argument("--seed", type=int, default=0)
    p.switch("--pretrained", help="ImageNet weights (downloads them)")
    p.add_argument("--arch", choices=("resnet18", "tiny"), default="resnet18", help="tiny: a small CNN for tests")
    p.switch("--no-resume", help="start from scratch even if the checkpoint folder holds a checkpoint")
    p.add_argument("--epoch-sleep", type=at_least(0, float), default=0.0, help="pause after each epoch (tests use it)")
    p.add_argument("--step-sleep", type=at_least(0, float), default=0.0, help="pause after each step (tests use it)")
    p.add_argument(
        "--hold-while",
        metavar="PATH",
        help="after each step and its checkpoint, wait while PATH exists or until a stop signal "
        "(tests use it to keep a job training until they have done what they came to do)",
    )
    p.add_argument(
        "--checkpoint-every", type=at_least(0), default=0, help="also checkpoint every N steps (0: epochs only)"
    )
    p.switch("--log-steps", help="rank 0 prints a line per step")
    p.add_argument(
        "--precision", choices=PRECISIONS, default="auto",
        help="auto: mixed precision on a GPU (bf16 where the GPU has it natively, else fp16 with loss scaling) "
        "and fp32 on the CPU; bf16 and fp16 need a GPU",
    )  # fmt: skip
    return p


def setup() -> tuple[int, int, int, torch.device]:
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if world > 1 or under_torchrun():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return rank, world, local_rank, device


def under_torchrun() -> bool:
    """torchrun sets these for every worker, in a world of one too. A one-process job then runs the same DDP path
    (nccl on a GPU) as a bigger one, so a one-GPU machine tries what a cluster will run."""
    return all(os.environ.get(name) for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"))


def datasets(args: argparse.Namespace, local_rank: int = 0, world: int = 1) -> tuple[Dataset, Dataset | None]:
    """The training and validation images (None: no validation data found). Both carry `classes` (the
    training set's, sorted) and validation is labelled through the training set's `class_to_idx`."""
    if args.dataset == "cifar10":
        return cifar10(Path(args.data_dir or "data"), local_rank, world)
    if not args.data_dir:
        fail("no training data: pass --data-dir or run where SM_CHANNEL_TRAIN is set")
    root = existing_folder(args.data_dir, "--data-dir")
    tf = transforms.Compose([transforms.Resize((args.image_size, args.image_size)), transforms.ToTensor(), NORMALIZE])
    split = has_part(root, "train")  # train/ and val/ in one root (like hymenoptera_data), else the root is train
    train = image_set(root, "train/" if split else "", tf, None, "--data-dir")
    if args.val_dir:
        val_root = existing_folder(args.val_dir, "--val-dir")
        prefix = "val/" if has_part(val_root, "val") else ""
        return train, image_set(val_root, prefix, tf, train.class_to_idx, "--val-dir")
    if split and has_part(root, "val"):
        return train, image_set(root, "val/", tf, train.class_to_idx, "--data-dir")
    return train, None


def existing_folder(path: str, flag: str) -> Path:
    if not Path(path).is_dir():
        fail(f"{flag} {path}: no such folder")
    return Path(path)


SHARD_INDEX = "_cloudddp_index.json"  # written by `cloudddp stage --shards` (cloudddp/staging/shards.py)


@functools.cache  # asked up to four times per root while the data sets are built: the index is read once
def shard_paths(root: Path) -> tuple[str, ...] | None:
    """The member paths of a shard layout's index; None for plain files."""
    index = root / SHARD_INDEX
    if not index.is_file():
        return None
    return tuple(m["path"] for s in json.loads(index.read_text())["shards"] for m in s["members"])


def has_part(root: Path, name: str) -> bool:
    paths = shard_paths(root)
    return (root / name).is_dir() if paths is None else any(p.startswith(f"{name}/") for p in paths)


def image_set(root: Path, prefix: str, tf: object, class_to_idx: dict[str, int] | None, flag: str) -> Dataset:
    """ImageFolder semantics (class = first folder under root/prefix) over plain files or shards; labelled by
    `class_to_idx` (the training set's) when given: each root numbers its own sorted folders otherwise."""
    where = f"{flag} {root / prefix}"
    if shard_paths(root) is None:
        try:
            found: Any = torchvision.datasets.ImageFolder(str(root / prefix), transform=tf)
        except (FileNotFoundError, RuntimeError) as exc:  # no class folders, or a class folder without images
            fail(f"{where}: {exc}")
    else:
        try:
            found = ShardedImageFolder(root, prefix, tf)
        except FileNotFoundError as exc:  # a class folder without images, as ImageFolder says it
            fail(f"{where}: {exc}")
        if not len(found):
            fail(f"{where}: no images in the shards under this prefix")
    return relabel(found, class_to_idx, where) if class_to_idx is not None else found


def relabel(found: Any, class_to_idx: dict[str, int], where: str) -> Any:
    """Validation labelled as training labels them: the same class name, the same number, also when a class
    is missing from validation (torchvision's find_classes numbers each root's own folders)."""
    unknown = sorted(set(found.classes) - set(class_to_idx))
    if unknown:
        fail(f"{where}: class(es) {', '.join(unknown)} are not among the training classes "
             f"({', '.join(sorted(class_to_idx, key=class_to_idx.__getitem__))})")  # fmt: skip
    found.samples = [(*s[:-1], class_to_idx[found.classes[s[-1]]]) for s in found.samples]
    found.targets = [s[-1] for s in found.samples]
    if hasattr(found, "imgs"):
        found.imgs = found.samples
    found.classes = sorted(class_to_idx, key=class_to_idx.__getitem__)
    found.class_to_idx = dict(class_to_idx)
    return found


def cifar10(root: Path, local_rank: int, world: int) -> tuple[Dataset, Dataset]:
    """Local rank 0 of each node downloads while the node's other ranks wait at a barrier: torchvision
    writes the archive and extracts it in place, so two ranks doing it at once read half-written files."""
    if local_rank == 0:
        fetch_cifar10(root)
    if world > 1:
        dist.barrier()
    tf = transforms.Compose([transforms.ToTensor(), NORMALIZE])
    train = torchvision.datasets.CIFAR10(str(root), train=True, transform=tf)
    return train, torchvision.datasets.CIFAR10(str(root), train=False, transform=tf)


def fetch_cifar10(root: Path) -> None:
    """Download into a private folder, then rename it into place: nodes sharing `root` (a cluster's shared
    file system) never see each other's half-extracted files either."""
    try:
        for train in (True, False):
            torchvision.datasets.CIFAR10(str(root), train=train)
        return  # already there and complete (an earlier run, or another node on a shared folder)
    except RuntimeError:
        pass
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".cifar10-", dir=root))
    try:
        torchvision.datasets.CIFAR10(str(staging), train=True, download=True)
        extracted = staging / torchvision.datasets.CIFAR10.base_folder
        with contextlib.suppress(OSError):  # a non-empty folder is there: another node got there first
            os.replace(extracted, root / extracted.name)
    except (OSError, RuntimeError) as exc:  # no network, a full disk, a download that fails its checksum
        fail(f"--dataset cifar10: could not download CIFAR-10 into {root}: {exc}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


class ShardedImageFolder(Dataset):
    """ImageFolder semantics (class = first folder under `prefix`, sorted) over tar shards and their index."""

    def __init__(self, root: Path, prefix: str, transform: object) -> None:
        index = json.loads((root / SHARD_INDEX).read_text())
        extensions = tuple(torchvision.datasets.folder.IMG_EXTENSIONS)
        in_folders = [
            (shard["name"], m["offset"], m["size"], m["path"][len(prefix) :])
            for shard in index["shards"]
            for m in shard["members"]
            if m["path"].startswith(prefix) and "/" in m["path"][len(prefix) :]
        ]
        members = [member for member in in_folders if member[3].lower().endswith(extensions)]
        # Every folder is a class, as for ImageFolder (find_classes), also one holding no image: that is
        # ImageFolder's error (make_dataset), so the plain and the shard layout of one data set agree.
        self.classes = sorted({path.split("/", 1)[0] for *_, path in in_folders})
        if empty := sorted(set(self.classes) - {path.split("/", 1)[0] for *_, path in members}):
            raise FileNotFoundError(
                f"Found no valid file for the classes {', '.join(empty)}. "
                f"Supported extensions are: {', '.join(extensions)}"
            )
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.samples = [
            (shard, offset, size, self.class_to_idx[path.split("/", 1)[0]]) for shard, offset, size, path in members
        ]
        self.root, self.transform = root, transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        shard, offset, size, target = self.samples[i]
        with open(self.root / shard, "rb") as handle:
            handle.seek(offset)
            data = handle.read(size)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        return self.transform(image), target  # type: ignore[operator]


def build_model(num_classes: int, pretrained: bool, arch: str = "resnet18") -> nn.Module:
    if arch == "tiny":  # a few thousand weights: fault tests on a shared 2-core machine (no BatchNorm)
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(128, num_classes)
        )
    if pretrained:
        model = torchvision.models.resnet18(weights=torchvision.models.ResNet18_Weights.DEFAULT)
        model.fc = nn.Linear(model.fc.in_features, num_classes)
        return model
    return torchvision.models.resnet18(weights=None, num_classes=num_classes)


def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            logits = model(images.to(device))
            correct += int((logits.argmax(1).cpu() == labels).sum())
            total += len(labels)
    model.train()
    return correct / max(total, 1)


def fingerprint(model: nn.Module) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


@dataclass
class EpochRun:
    """What one pass over (the rest of) an epoch did; on rank 0 of a resumed run it starts from the figures
    the checkpoint kept for the epoch's earlier steps (summed over the ranks of then)."""

    seen: int = 0
    loss_sum: float = 0.0
    correct: int = 0
    elapsed: float = 0.0
    stopped: bool = False  # a stop signal reached some rank, and every rank agreed to stop


@dataclass
class Trainer:
    """The model and what a step and a checkpoint need. `model` is the plain module (checkpoints, evaluation,
    fingerprints); `ddp` runs the steps (the DDP wrapper when there are several processes)."""

    model: nn.Module
    ddp: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: Any  # torch.amp.GradScaler (torch.cuda.amp.GradScaler before torch 2.3)
    device: torch.device
    use_amp: bool  # mixed precision: on the GPU, bf16 where the GPU has it natively, else fp16 with loss scaling
    amp_dtype: torch.dtype
    rank: int
    world: int
    identity: dict[str, Any]  # what a checkpoint must match: the architecture and the classes
    loss_fn: nn.Module = field(default_factory=nn.CrossEntropyLoss)
    metrics: dict[str, float | int] = field(default_factory=dict)  # the last finished epoch's (rank 0)
    carried: EpochRun | None = None  # a resumed epoch's figures so far (rank 0)

    def step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[float, int]:
        """One optimiser step; returns the summed loss and the number of correct predictions of the batch."""
        images, labels = (t.to(self.device, non_blocking=True) for t in batch)
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.use_amp):
            logits = self.ddp(images)
            loss = self.loss_fn(logits, labels)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return float(loss.detach()) * len(labels), int((logits.argmax(1) == labels).sum())

    def state(self, position: Position, sums: EpochRun | None = None) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(), "epoch": position.epoch - 1,  # epochs completed
            "position": vars(position).copy(), "world_size": self.world, **self.identity,
            "metrics": dict(self.metrics),  # a rerun with nothing left to train reports them again
            "epoch_sums": {k: v for k, v in vars(sums).items() if k != "stopped"} if sums else None,
        }  # fmt: skip

    def restore(self, state: dict[str, Any], folder: Path) -> None:
        mismatch = [f"{k} {state[k]} (this run: {v})" for k, v in self.identity.items() if state.get(k, v) != v]
        if mismatch:
            fail(f"the checkpoint in {folder} was trained with another model: {'; '.join(mismatch)}. Pass "
                 f"--no-resume or another --checkpoint-dir to start over")  # fmt: skip
        try:
            self.model.load_state_dict(state["model"])
        except RuntimeError as exc:  # a checkpoint older than `identity`: the weights' shapes tell
            fail(f"the checkpoint in {folder} does not fit --arch {self.identity['arch']} with "
                 f"{len(self.identity['classes'])} classes ({str(exc).splitlines()[0]}). Pass --no-resume or "
                 f"another --checkpoint-dir to start over")  # fmt: skip
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.metrics = dict(state.get("metrics") or {})

    def checkpoint(self, folder: Path, position: Position, sums: EpochRun | None = None) -> Path:
        """Rank 0 only: the others hold the same weights (DDP)."""
        return save_checkpoint(folder, self.state(position, sums), position.step)


def native_bf16() -> bool:
    """bf16 with hardware support (compute capability 8.0+). Since torch 2.3 (pytorch/pytorch#115924) the
    plain is_bf16_supported() also says True where bf16 is only emulated (V100, T4), which is slow there."""
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch before the flag
        native = bool(torch.version.hip) or torch.cuda.get_device_capability()[0] >= 8
        return native and torch.cuda.is_bf16_supported()


def grad_scaler(enabled: bool) -> Any:
    if hasattr(torch.amp, "GradScaler"):  # torch 2.3+; torch.cuda.amp.GradScaler is deprecated there
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def amp_settings(device: torch.device, precision: str = "auto") -> tuple[bool, torch.dtype]:
    """Whether steps run under autocast, and its dtype. auto: mixed precision on the GPU, bf16 where native, else
    fp16 (with loss scaling: see make_trainer); fp32 everywhere else."""
    if precision == "auto":
        use_amp = device.type == "cuda"
        return use_amp, torch.bfloat16 if use_amp and native_bf16() else torch.float16
    if precision == "fp32":
        return False, torch.float32
    if device.type != "cuda":
        fail(f"--precision {precision}: mixed precision needs a GPU and this process has none "
             f"(torch.cuda.is_available() is False). Pass --precision fp32 or auto")  # fmt: skip
    return True, torch.bfloat16 if precision == "bf16" else torch.float16


def precision_name(trainer: Trainer) -> str:
    """What the steps compute in, as --precision names it."""
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}[trainer.amp_dtype] if trainer.use_amp else "fp32"


def make_trainer(args: argparse.Namespace, classes: list[str], rank: int, world: int, device: torch.device) -> Trainer:
    model = build_model(len(classes), args.pretrained, args.arch).to(device)
    ddp = DistributedDataParallel(model) if dist.is_initialized() else model
    use_amp, amp_dtype = amp_settings(device, args.precision)
    lr = DEFAULT_LR if args.lr is None else args.lr
    momentum = DEFAULT_MOMENTUM if args.momentum is None else args.momentum
    optimizer = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=momentum, weight_decay=1e-4)
    scaler = grad_scaler(enabled=use_amp and amp_dtype == torch.float16)
    identity = {"arch": args.arch, "classes": list(classes)}
    return Trainer(model, ddp, optimizer, scaler, device, use_amp, amp_dtype, rank, world, identity)


def resume(trainer: Trainer, args: argparse.Namespace) -> Position:
    """Where training starts: the newest complete checkpoint's position, else the beginning."""
    found = None if args.no_resume else load_latest(Path(args.checkpoint_dir), map_location=trainer.device)
    if not found:
        return Position()
    path, state = found
    trainer.restore(state, path.parent)
    position = position_of(state)
    if position.consumed and trainer.rank == 0 and state.get("epoch_sums"):
        trainer.carried = EpochRun(**state["epoch_sums"])  # summed over the ranks already: rank 0 alone
    if position.epoch > args.epochs:
        if trainer.rank == 0:
            print(f"checkpoint {path} is complete: it finished epoch {position.epoch - 1}"
                  f"{' and part of the next' if position.consumed else ''}, and --epochs is {args.epochs}; nothing "
                  f"to train. Its model and metrics are saved again. Pass a larger --epochs to train further, or "
                  f"--no-resume (or another --checkpoint-dir) to start over", flush=True)  # fmt: skip
        return position
    if trainer.rank == 0 and position.consumed == 0:
        print(f"resumed from {path} after epoch {position.epoch - 1}; starting at epoch {position.epoch}", flush=True)
    elif trainer.rank == 0:
        print(f"resumed from {path} at step {position.step} (epoch {position.epoch}, {position.consumed} "
              f"samples of it done); world_size={trainer.world}", flush=True)  # fmt: skip
    override_hyperparameters(trainer, args)
    return position


def override_hyperparameters(trainer: Trainer, args: argparse.Namespace) -> None:
    """--lr / --momentum given on this run replace what the checkpoint's optimizer state restored (its
    param_groups); left out, the checkpoint's values continue. Either way rank 0 says which."""
    saved = trainer.optimizer.param_groups[0]
    said = []
    for name in ("lr", "momentum"):
        given = getattr(args, name)
        if given is None:
            said.append(f"{name} {saved[name]} (the checkpoint's)")
        elif given != saved[name]:
            said.append(f"{name} {given} (--{name}; the checkpoint had {saved[name]})")
            for group in trainer.optimizer.param_groups:
                group[name] = given
    if trainer.rank == 0 and said:
        print(f"resumed with {', '.join(said)}", flush=True)


def train_epoch(
    trainer: Trainer, train_set: Dataset, position: Position, stop: StopRequest, args: argparse.Namespace
) -> EpochRun:
    """Steps from `position` (advanced in place) to the end of its epoch, or to an agreed stop. A stop, or every
    `--checkpoint-every` steps, saves a checkpoint mid-epoch; the epoch's end is saved by end_epoch."""
    run, trainer.carried = trainer.carried or EpochRun(), None
    started, size = time.perf_counter(), len(train_set)
    sampler = ResumableSampler(size, trainer.world, trainer.rank, args.seed, position.epoch, start=position.consumed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers)
    for batch in loader:
        batch_loss, batch_correct = trainer.step(batch)
        position.step += 1
        position.consumed = min(size, position.consumed + len(batch[1]) * trainer.world)
        run.seen += len(batch[1])
        run.loss_sum += batch_loss
        run.correct += batch_correct
        if trainer.rank == 0 and args.log_steps:
            print(f"step={position.step} epoch={position.epoch} consumed={position.consumed}", flush=True)
        if args.step_sleep:
            time.sleep(args.step_sleep)
        due = bool(args.checkpoint_every) and position.step % args.checkpoint_every == 0
        run.stopped = agree(stop.requested, trainer.world, trainer.device)
        if (run.stopped or due) and position.consumed < size:
            mid_epoch_checkpoint(trainer, run, position, run.elapsed + time.perf_counter() - started, args)
        if run.stopped:
            break
        while args.hold_while and Path(args.hold_while).exists() and not stop.requested:
            time.sleep(0.05)
    run.elapsed += time.perf_counter() - started
    return run


def summed(trainer: Trainer, run: EpochRun) -> torch.Tensor:
    """seen, loss_sum, correct of the epoch so far, summed over the ranks (a collective: every rank calls it)."""
    totals = torch.tensor([run.seen, run.loss_sum, run.correct], dtype=torch.float64, device=trainer.device)
    if trainer.world > 1:
        dist.all_reduce(totals)
    return totals


def mid_epoch_checkpoint(
    trainer: Trainer, run: EpochRun, position: Position, elapsed: float, args: argparse.Namespace
) -> None:
    """Every rank: the checkpoint keeps the epoch's figures so far, so a resumed run reports the whole epoch."""
    totals = summed(trainer, run)
    if trainer.rank == 0:
        sums = EpochRun(int(totals[0]), float(totals[1]), int(totals[2]), elapsed)
        saved = trainer.checkpoint(Path(args.checkpoint_dir), position, sums)
        print(f"checkpoint at step {position.step}: {saved}", flush=True)
    if trainer.world > 1:
        dist.barrier()


def end_epoch(
    trainer: Trainer, run: EpochRun, position: Position, val_loader: DataLoader, args: argparse.Namespace
) -> dict[str, float | int]:
    """The epoch is done (`position`: the start of the next): sum its figures over the ranks, take rank 0's
    BatchNorm statistics, evaluate, checkpoint (with the metrics) and log on rank 0; return rank 0's metrics
    ({} elsewhere)."""
    totals = summed(trainer, run)
    if trainer.world > 1:
        for buffer in trainer.model.buffers():  # BatchNorm statistics: every replica takes rank 0's
            dist.broadcast(buffer, 0)
    metrics: dict[str, float | int] = {}
    if trainer.rank == 0:
        seen = max(float(totals[0]), 1.0)
        metrics = {
            "epoch": position.epoch - 1,
            "loss": round(float(totals[1]) / seen, 4),
            "train_acc": round(float(totals[2]) / seen, 4),
            "val_acc": round(evaluate(trainer.model, val_loader, trainer.device), 4),
            "images_per_sec": round(float(totals[0]) / max(run.elapsed, 1e-9), 1),
            "world_size": trainer.world,
            "step": position.step,
        }
        trainer.metrics = metrics
        saved = trainer.checkpoint(Path(args.checkpoint_dir), position)
        print(
            f"epoch={metrics['epoch']}/{args.epochs} loss={metrics['loss']:.4f} train_acc={metrics['train_acc']:.4f} "
            f"val_acc={metrics['val_acc']:.4f} images_per_sec={metrics['images_per_sec']} "
            f"time={run.elapsed:.1f}s checkpoint={saved}",
            flush=True,
        )
    if trainer.world > 1:
        dist.barrier()  # nobody runs ahead while rank 0 writes the checkpoint
    return metrics


def save_model(trainer: Trainer, model_dir: Path, metrics: dict[str, float | int]) -> None:
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / f"fingerprint-rank{trainer.rank}.txt").write_text(fingerprint(trainer.model) + "\n")
    if trainer.rank == 0:
        torch.save(trainer.model.state_dict(), model_dir / "model.pt")
        (model_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
        # Not "val_acc=": the epoch line's value would count twice in the metrics read from the logs.
        print(f"saved model to {model_dir / 'model.pt'} (validation accuracy {metrics.get('val_acc')})", flush=True)


def agree(flag: bool, world: int, device: torch.device) -> bool:
    """True on every rank when it is true on any (a stop signal may reach the ranks between steps)."""
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    if world > 1:
        dist.all_reduce(value)
    return bool(value.item() > 0)


def train(
    trainer: Trainer, data: tuple[Dataset, DataLoader], position: Position, stop: StopRequest, args: argparse.Namespace
) -> None:
    """The epochs from `position` to --epochs; the model is saved when the last one ends (not on a stop)."""
    (train_set, val_loader), rank, world = data, trainer.rank, trainer.world
    for epoch in range(position.epoch, args.epochs + 1):
        position = Position(epoch=epoch, consumed=position.consumed if epoch == position.epoch else 0,
                            step=position.step)  # fmt: skip
        run = train_epoch(trainer, train_set, position, stop, args)
        if run.stopped and position.consumed < len(train_set):
            if rank == 0:
                print(f"stop requested ({stop.name or 'another rank'}): checkpoint at step {position.step} is saved; "
                      f"exiting", flush=True)  # fmt: skip
            return
        position = Position(epoch=epoch + 1, consumed=0, step=position.step)
        end_epoch(trainer, run, position, val_loader, args)
        if args.epoch_sleep:
            time.sleep(args.epoch_sleep)  # before the stop check: a signal during the pause stops at this epoch's end
        if run.stopped or agree(stop.requested, world, trainer.device):
            if rank == 0:
                print(f"stop requested ({stop.name or 'another rank'}): checkpoint after epoch {epoch} is saved; "
                      f"exiting", flush=True)  # fmt: skip
            return
    save_model(trainer, Path(args.model_dir), trainer.metrics)


def main() -> None:
    args = parse_args()
    for flag, folder in (("--model-dir", args.model_dir), ("--checkpoint-dir", args.checkpoint_dir)):
        if Path(folder).exists() and not Path(folder).is_dir():
            fail(f"{flag} {folder}: a file, not a folder")  # before any process group, data or model is made
    rank, world, local_rank, device = setup()
    # SageMaker stop / spot reclaim (SIGTERM) and Slurm's time-limit warning (SIGUSR1): checkpoint, exit.
    stop = StopRequest().install()
    torch.manual_seed(args.seed)
    train_set, val_set = datasets(args, local_rank, world)
    if val_set is None:
        warn(rank, f"no validation data (no val/ in --data-dir {args.data_dir}, and no --val-dir, SM_CHANNEL_VAL "
                   f"or SM_CHANNEL_VALIDATION): val_acc is measured on the training images")  # fmt: skip
    classes = list(train_set.classes)  # type: ignore[attr-defined]
    val_loader = DataLoader(val_set or train_set, batch_size=64, num_workers=args.workers)
    trainer = make_trainer(args, classes, rank, world, device)
    position = resume(trainer, args)
    if position.epoch > args.epochs:  # a finished run's checkpoint: keep its figures, do not wipe them
        save_model(trainer, Path(args.model_dir), trainer.metrics or final_check(trainer, val_loader, position))
    else:
        if rank == 0:
            print(
                f"training {args.arch} on {len(train_set)} images ({len(classes)} classes), validating on "
                f"{len(val_set or train_set)} images, world_size={world}, "
                f"batch={args.batch_size}/process, device={device.type}, precision={precision_name(trainer)}, "
                f"backend={dist.get_backend() if dist.is_initialized() else 'none'}, "
                f"epochs={args.epochs}",
                flush=True,
            )
        train(trainer, (train_set, val_loader), position, stop, args)
    if dist.is_initialized():
        dist.destroy_process_group()


def final_check(trainer: Trainer, val_loader: DataLoader, position: Position) -> dict[str, float | int]:
    """A complete checkpoint from before checkpoints kept metrics: evaluate its model once (rank 0)."""
    if trainer.rank != 0:
        return {}
    val_acc = round(evaluate(trainer.model, val_loader, trainer.device), 4)
    return {"epoch": position.epoch - 1, "val_acc": val_acc, "world_size": trainer.world, "step": position.step}


if __name__ == "__main__":
    main()
    # Leave without Python's shutdown: torch 2.14's gloo worker threads can still be releasing the last
    # collective then, and abort a finished run with SIGABRT (pytorch/pytorch#190489).
    sys.stdout.flush()
    os._exit(0)
