"""ResNet-18 image classification with PyTorch DDP, runnable anywhere cloudddp runs it.

Where things come from (first found wins):
- training data: --data-dir, SM_CHANNEL_TRAIN (SageMaker), CLOUDDDP_CHANNEL_TRAIN (other
  cloudddp providers), else the channel "training" (what `fit("s3://...")` names one input, as in the
  SageMaker SDK): SM_CHANNEL_TRAINING, CLOUDDDP_CHANNEL_TRAINING; an ImageFolder root holding train/ and val/ (like hymenoptera_data),
  or a train root with the validation root in --val-dir / SM_CHANNEL_VAL / CLOUDDDP_CHANNEL_VAL.
  Either as plain files or as `cloudddp stage --shards` left it: tar shards plus
  `_cloudddp_index.json` (each image read straight from its shard at the indexed offset).
  `--dataset cifar10` downloads CIFAR-10 instead (real clouds only: needs internet).
- model folder: --model-dir, SM_MODEL_DIR, CLOUDDDP_MODEL_DIR, ./model
- checkpoints: --checkpoint-dir, SageMaker's checkpointconfig.json LocalPath,
  CLOUDDDP_CHECKPOINT_DIR, ./checkpoints. Saved every epoch (and every --checkpoint-every steps)
  by checkpointing.py: atomic, newest complete one resumed, at the same step with the data order
  continuing. SIGTERM (stop, spot reclaim) and SIGUSR1 (Slurm's warning) checkpoint and exit.

Runs under torchrun (RANK/WORLD_SIZE/LOCAL_RANK set) or as a plain single process for
debugging. gloo on CPU, nccl on GPU with mixed precision. Rank 0 logs one parseable
line per epoch (`epoch=2/3 loss=... images_per_sec=... val_acc=...`), saves the model
(model.pt), metrics.json, and every rank writes a fingerprint of its final weights
(fingerprint-rank<R>.txt) so tests can prove the replicas are identical.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torchvision
from checkpointing import Position, ResumableSampler, StopRequest, load_latest, position_of, save_checkpoint
from PIL import Image
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from torchvision import transforms


def first(*values: str | None) -> str | None:
    return next((v for v in values if v), None)


def sagemaker_checkpoint_dir() -> str | None:
    config = os.environ.get("SM_INPUT_CONFIG_DIR")
    path = Path(config) / "checkpointconfig.json" if config else None
    if path and path.is_file():
        return json.loads(path.read_text()).get("LocalPath")
    return None


def parse_args() -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    train = (env("SM_CHANNEL_TRAIN"), env("CLOUDDDP_CHANNEL_TRAIN"))
    training = (env("SM_CHANNEL_TRAINING"), env("CLOUDDDP_CHANNEL_TRAINING"))  # fit("s3://..."): one channel
    p.add_argument("--data-dir", default=first(*train, *training))
    p.add_argument("--val-dir", default=first(env("SM_CHANNEL_VAL"), env("CLOUDDDP_CHANNEL_VAL")))
    p.add_argument("--dataset", choices=("folder", "cifar10"), default="folder")
    p.add_argument("--model-dir", default=first(env("SM_MODEL_DIR"), env("CLOUDDDP_MODEL_DIR"), "model"))
    p.add_argument(
        "--checkpoint-dir",
        default=first(sagemaker_checkpoint_dir(), env("CLOUDDDP_CHECKPOINT_DIR"), "checkpoints"),
    )
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16, help="per process")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pretrained", action="store_true", help="ImageNet weights (downloads them)")
    p.add_argument("--arch", choices=("resnet18", "tiny"), default="resnet18", help="tiny: a small CNN for tests")
    p.add_argument("--no-resume", action="store_true")
    p.add_argument("--epoch-sleep", type=float, default=0.0, help="pause after each epoch (tests use it)")
    p.add_argument("--step-sleep", type=float, default=0.0, help="pause after each step (tests use it)")
    p.add_argument(
        "--hold-while",
        metavar="PATH",
        help="after each step and its checkpoint, wait while PATH exists or until a stop signal "
        "(tests use it to keep a job training until they have done what they came to do)",
    )
    p.add_argument("--checkpoint-every", type=int, default=0, help="also checkpoint every N steps (0: epochs only)")
    p.add_argument("--log-steps", action="store_true", help="rank 0 prints a line per step")
    return p.parse_args()


def setup() -> tuple[int, int, int, torch.device]:
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return rank, world, local_rank, device


def datasets(args: argparse.Namespace) -> tuple[torch.utils.data.Dataset, torch.utils.data.Dataset, int]:
    normalize = transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    if args.dataset == "cifar10":
        root = args.data_dir or "data"
        tf = transforms.Compose([transforms.ToTensor(), normalize])
        train = torchvision.datasets.CIFAR10(root, train=True, download=True, transform=tf)
        val = torchvision.datasets.CIFAR10(root, train=False, download=True, transform=tf)
        return train, val, 10
    if not args.data_dir:
        raise SystemExit("no training data: pass --data-dir or run where SM_CHANNEL_TRAIN is set")
    root = Path(args.data_dir)
    if (root / SHARD_INDEX).is_file():
        return sharded_datasets(root, args)
    train_root, val_root = (root / "train", root / "val") if (root / "train").is_dir() else (root, None)
    if args.val_dir:
        val_root = Path(args.val_dir) / "val" if (Path(args.val_dir) / "val").is_dir() else Path(args.val_dir)
    size = args.image_size
    tf = transforms.Compose([transforms.Resize((size, size)), transforms.ToTensor(), normalize])
    train = torchvision.datasets.ImageFolder(str(train_root), transform=tf)
    val = torchvision.datasets.ImageFolder(str(val_root or train_root), transform=tf)
    return train, val, len(train.classes)


SHARD_INDEX = "_cloudddp_index.json"  # written by `cloudddp stage --shards` (cloudddp/staging/shards.py)


class ShardedImageFolder(torch.utils.data.Dataset):
    """ImageFolder semantics (class = first folder under `prefix`, sorted) over tar shards and their index."""

    def __init__(self, root: Path, prefix: str, transform: object) -> None:
        index = json.loads((root / SHARD_INDEX).read_text())
        extensions = tuple(torchvision.datasets.folder.IMG_EXTENSIONS)
        members = [
            (shard["name"], m["offset"], m["size"], m["path"][len(prefix) :])
            for shard in index["shards"]
            for m in shard["members"]
            if m["path"].startswith(prefix)
            and m["path"].lower().endswith(extensions)
            and "/" in m["path"][len(prefix) :]
        ]
        self.classes = sorted({path.split("/", 1)[0] for *_, path in members})
        label = {name: i for i, name in enumerate(self.classes)}
        self.samples = [(shard, offset, size, label[path.split("/", 1)[0]]) for shard, offset, size, path in members]
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


def sharded_datasets(
    root: Path, args: argparse.Namespace
) -> tuple[torch.utils.data.Dataset, torch.utils.data.Dataset, int]:
    """The shard layout: train/ and val/ inside the shards, like the plain layout's folders."""
    normalize = transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    tf = transforms.Compose([transforms.Resize((args.image_size, args.image_size)), transforms.ToTensor(), normalize])
    paths = [m["path"] for s in json.loads((root / SHARD_INDEX).read_text())["shards"] for m in s["members"]]
    split = any(p.startswith("train/") for p in paths)
    train = ShardedImageFolder(root, "train/" if split else "", tf)
    has_val = split and any(p.startswith("val/") for p in paths)
    val = ShardedImageFolder(root, "val/", tf) if has_val else train
    return train, val, len(train.classes)


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
class Trainer:
    """The model and what a step and a checkpoint need. `model` is the plain module (checkpoints, evaluation,
    fingerprints); `ddp` runs the steps (the DDP wrapper when there are several processes)."""

    model: nn.Module
    ddp: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    device: torch.device
    use_amp: bool  # mixed precision: on the GPU, bf16 where supported, else fp16 with loss scaling
    amp_dtype: torch.dtype
    rank: int
    world: int
    loss_fn: nn.Module = field(default_factory=nn.CrossEntropyLoss)

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

    def state(self, position: Position) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(), "epoch": position.epoch - 1,  # epochs completed
            "position": vars(position).copy(), "world_size": self.world,
        }  # fmt: skip

    def restore(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])

    def checkpoint(self, folder: Path, position: Position) -> Path:
        """Rank 0 only: the others hold the same weights (DDP)."""
        return save_checkpoint(folder, self.state(position), position.step)


def make_trainer(args: argparse.Namespace, num_classes: int, rank: int, world: int, device: torch.device) -> Trainer:
    model = build_model(num_classes, args.pretrained, args.arch).to(device)
    ddp = DistributedDataParallel(model) if world > 1 else model
    use_amp = device.type == "cuda"
    amp_dtype = torch.bfloat16 if use_amp and torch.cuda.is_bf16_supported() else torch.float16
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp and amp_dtype == torch.float16)
    return Trainer(model, ddp, optimizer, scaler, device, use_amp, amp_dtype, rank, world)


def resume(trainer: Trainer, args: argparse.Namespace) -> Position:
    """Where training starts: the newest complete checkpoint's position, else the beginning."""
    found = None if args.no_resume else load_latest(Path(args.checkpoint_dir), map_location=trainer.device)
    if not found:
        return Position()
    path, state = found
    trainer.restore(state)
    position = position_of(state)
    if trainer.rank == 0 and position.consumed == 0:
        print(f"resumed from {path} after epoch {position.epoch - 1}; starting at epoch {position.epoch}", flush=True)
    elif trainer.rank == 0:
        print(f"resumed from {path} at step {position.step} (epoch {position.epoch}, {position.consumed} "
              f"samples of it done); world_size={trainer.world}", flush=True)  # fmt: skip
    return position


@dataclass
class EpochRun:
    """What one pass over (the rest of) an epoch did on this rank."""

    seen: int = 0
    loss_sum: float = 0.0
    correct: int = 0
    elapsed: float = 0.0
    stopped: bool = False  # a stop signal reached some rank, and every rank agreed to stop


def train_epoch(
    trainer: Trainer, train_set: torch.utils.data.Dataset, position: Position, stop: StopRequest,
    args: argparse.Namespace,
) -> EpochRun:  # fmt: skip
    """Steps from `position` (advanced in place) to the end of its epoch, or to an agreed stop. A stop, or every
    `--checkpoint-every` steps, saves a checkpoint mid-epoch; the epoch's end is saved by end_epoch."""
    run, started, size = EpochRun(), time.perf_counter(), len(train_set)
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
            if trainer.rank == 0:
                saved = trainer.checkpoint(Path(args.checkpoint_dir), position)
                print(f"checkpoint at step {position.step}: {saved}", flush=True)
            if trainer.world > 1:
                dist.barrier()
        if run.stopped:
            break
        while args.hold_while and Path(args.hold_while).exists() and not stop.requested:
            time.sleep(0.05)
    run.elapsed = time.perf_counter() - started
    return run


def end_epoch(
    trainer: Trainer, run: EpochRun, position: Position, val_loader: DataLoader, args: argparse.Namespace
) -> dict[str, float | int]:
    """The epoch is done (`position`: the start of the next): sum its figures over the ranks, take rank 0's
    BatchNorm statistics, checkpoint, evaluate and log on rank 0; return rank 0's metrics ({} elsewhere)."""
    totals = torch.tensor([run.seen, run.loss_sum, run.correct], dtype=torch.float64, device=trainer.device)
    if trainer.world > 1:
        dist.all_reduce(totals)
        for buffer in trainer.model.buffers():  # BatchNorm statistics: every replica takes rank 0's
            dist.broadcast(buffer, 0)
    metrics: dict[str, float | int] = {}
    if trainer.rank == 0:
        saved = trainer.checkpoint(Path(args.checkpoint_dir), position)
        seen = max(float(totals[0]), 1.0)
        metrics = {
            "epoch": position.epoch - 1,
            "loss": round(float(totals[1]) / seen, 4),
            "train_acc": round(float(totals[2]) / seen, 4),
            "val_acc": round(evaluate(trainer.model, val_loader, trainer.device), 4),
            "images_per_sec": round(float(totals[0]) / run.elapsed, 1),
            "world_size": trainer.world,
            "step": position.step,
        }
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
        print(f"saved model to {model_dir / 'model.pt'} (val_acc={metrics.get('val_acc')})", flush=True)


def agree(flag: bool, world: int, device: torch.device) -> bool:
    """True on every rank when it is true on any (a stop signal may reach the ranks between steps)."""
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    if world > 1:
        dist.all_reduce(value)
    return bool(value.item() > 0)


def main() -> None:
    args = parse_args()
    rank, world, _, device = setup()
    # SageMaker stop / spot reclaim (SIGTERM) and Slurm's time-limit warning (SIGUSR1): checkpoint, exit.
    stop = StopRequest().install()
    torch.manual_seed(args.seed)
    train_set, val_set, num_classes = datasets(args)
    val_loader = DataLoader(val_set, batch_size=64, num_workers=args.workers)
    trainer = make_trainer(args, num_classes, rank, world, device)
    position = resume(trainer, args)
    if rank == 0:
        print(
            f"training {args.arch} on {len(train_set)} images ({num_classes} classes), world_size={world}, "
            f"batch={args.batch_size}/process, device={device.type}, epochs={args.epochs}",
            flush=True,
        )
    metrics: dict[str, float | int] = {}
    for epoch in range(position.epoch, args.epochs + 1):
        position = Position(epoch=epoch, consumed=position.consumed if epoch == position.epoch else 0,
                            step=position.step)  # fmt: skip
        run = train_epoch(trainer, train_set, position, stop, args)
        if run.stopped and position.consumed < len(train_set):
            if rank == 0:
                print(f"stop requested ({stop.name or 'another rank'}): checkpoint at step {position.step} is saved; "
                      f"exiting", flush=True)  # fmt: skip
            break
        position = Position(epoch=epoch + 1, consumed=0, step=position.step)
        metrics = end_epoch(trainer, run, position, val_loader, args)
        if args.epoch_sleep:
            time.sleep(args.epoch_sleep)  # before the stop check: a signal during the pause stops at this epoch's end
        if run.stopped or agree(stop.requested, world, device):
            if rank == 0:
                print(f"stop requested ({stop.name or 'another rank'}): checkpoint after epoch {epoch} is saved; "
                      f"exiting", flush=True)  # fmt: skip
            break
    else:  # no break: no stop, the last epoch ended
        save_model(trainer, Path(args.model_dir), metrics)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
