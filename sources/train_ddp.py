"""ResNet-18 image classification with PyTorch DDP, runnable anywhere cloudddp runs it.

Where things come from (first found wins):
- training data: --data-dir, SM_CHANNEL_TRAIN (SageMaker), CLOUDDDP_CHANNEL_TRAIN (other
  cloudddp providers); an ImageFolder root holding train/ and val/ (like hymenoptera_data),
  or a train root with the validation root in --val-dir / SM_CHANNEL_VAL / CLOUDDDP_CHANNEL_VAL.
  Either as plain files or as `cloudddp stage --shards` left it: tar shards plus
  `_cloudddp_index.json` (each image read straight from its shard at the indexed offset).
  `--dataset cifar10` downloads CIFAR-10 instead (real clouds only: needs internet).
- model folder: --model-dir, SM_MODEL_DIR, CLOUDDDP_MODEL_DIR, ./model
- checkpoints: --checkpoint-dir, SageMaker's checkpointconfig.json LocalPath,
  CLOUDDDP_CHECKPOINT_DIR, ./checkpoints. Saved every epoch; a restart resumes from them.

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
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torchvision
from PIL import Image
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler
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
    p.add_argument("--data-dir", default=first(env("SM_CHANNEL_TRAIN"), env("CLOUDDDP_CHANNEL_TRAIN")))
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
    p.add_argument("--no-resume", action="store_true")
    p.add_argument("--epoch-sleep", type=float, default=0.0, help="pause after each epoch (tests use it)")
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


def build_model(num_classes: int, pretrained: bool) -> nn.Module:
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


def save_atomically(obj: object, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def main() -> None:
    args = parse_args()
    rank, world, _, device = setup()
    stop = {"requested": False}
    # SageMaker spot interruption / Slurm preemption: finish the epoch, checkpoint, exit.
    signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))

    torch.manual_seed(args.seed)
    train_set, val_set, num_classes = datasets(args)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers)
    val_loader = DataLoader(val_set, batch_size=64, num_workers=args.workers)

    model = build_model(num_classes, args.pretrained).to(device)
    ddp = DistributedDataParallel(model) if world > 1 else model
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=1e-4)
    use_amp = device.type == "cuda"
    amp_dtype = torch.bfloat16 if use_amp and torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=use_amp and amp_dtype == torch.float16)
    loss_fn = nn.CrossEntropyLoss()

    ckpt_dir = Path(args.checkpoint_dir)
    ckpt_path = ckpt_dir / "checkpoint.pt"
    start_epoch = 1
    if ckpt_path.is_file() and not args.no_resume:
        state = torch.load(ckpt_path, map_location=device, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        start_epoch = state["epoch"] + 1
        if rank == 0:
            print(f"resumed from {ckpt_path} after epoch {state['epoch']}; starting at epoch {start_epoch}", flush=True)
    if rank == 0:
        print(
            f"training resnet18 on {len(train_set)} images ({num_classes} classes), world_size={world}, "
            f"batch={args.batch_size}/process, device={device.type}, epochs={args.epochs}",
            flush=True,
        )

    metrics: dict[str, float | int] = {}
    for epoch in range(start_epoch, args.epochs + 1):
        sampler.set_epoch(epoch)
        started, seen, loss_sum, correct = time.perf_counter(), 0, 0.0, 0
        for images, labels in train_loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=use_amp):
                logits = ddp(images)
                loss = loss_fn(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            seen += len(labels)
            loss_sum += float(loss.detach()) * len(labels)
            correct += int((logits.argmax(1) == labels).sum())
        totals = torch.tensor([seen, loss_sum, correct], dtype=torch.float64, device=device)
        if world > 1:
            dist.all_reduce(totals)
            for buffer in model.buffers():  # BatchNorm statistics: every replica takes rank 0's
                dist.broadcast(buffer, 0)
        elapsed = time.perf_counter() - started
        if rank == 0:
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
            save_atomically({**state, "scaler": scaler.state_dict()}, ckpt_path)
            val_acc = evaluate(model, val_loader, device)
            metrics = {
                "epoch": epoch,
                "loss": round(float(totals[1] / totals[0]), 4),
                "train_acc": round(float(totals[2] / totals[0]), 4),
                "val_acc": round(val_acc, 4),
                "images_per_sec": round(float(totals[0]) / elapsed, 1),
                "world_size": world,
            }
            print(
                f"epoch={epoch}/{args.epochs} loss={metrics['loss']:.4f} train_acc={metrics['train_acc']:.4f} "
                f"val_acc={metrics['val_acc']:.4f} images_per_sec={metrics['images_per_sec']} "
                f"time={elapsed:.1f}s checkpoint={ckpt_path}",
                flush=True,
            )
        if world > 1:
            dist.barrier()  # nobody runs ahead while rank 0 writes the checkpoint
        flag = torch.tensor([1.0 if stop["requested"] else 0.0], device=device)
        if world > 1:
            dist.all_reduce(flag)
        if flag.item() > 0:
            if rank == 0:
                print(f"stop requested: checkpoint after epoch {epoch} is saved; exiting", flush=True)
            break
        if args.epoch_sleep:
            time.sleep(args.epoch_sleep)
    else:
        model_dir = Path(args.model_dir)
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / f"fingerprint-rank{rank}.txt").write_text(fingerprint(model) + "\n")
        if rank == 0:
            torch.save(model.state_dict(), model_dir / "model.pt")
            (model_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
            print(f"saved model to {model_dir / 'model.pt'} (val_acc={metrics.get('val_acc')})", flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
