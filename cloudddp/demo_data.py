"""A small deterministic two-class image dataset for demos and tests (no download).

Class `horizontal` holds images of horizontal stripes, class `vertical` of vertical
ones, each with a random colour pair, stripe width, phase and pixel noise. A ResNet-18
separates them within a few epochs on 2 CPU cores. Written as PNG files in torchvision
ImageFolder layout (train/<class>/*.png, val/<class>/*.png), like hymenoptera_data.
Standard library only, so the client needs no torch or Pillow to make it.
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

from cloudddp.errors import CloudDDPError

CLASSES = ("horizontal", "vertical")
SIZE = 32


def png_bytes(pixels: list[list[tuple[int, int, int]]]) -> bytes:
    """An RGB PNG, written by hand: 8-bit, no filtering."""
    height, width = len(pixels), len(pixels[0])
    raw = b"".join(b"\x00" + bytes(c for px in row for c in px) for row in pixels)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def stripe_image(rng: random.Random, vertical: bool) -> list[list[tuple[int, int, int]]]:
    width = rng.randint(2, 5)
    phase = rng.randint(0, 2 * width)
    a = tuple(rng.randint(0, 255) for _ in range(3))
    b = tuple(255 - c for c in a)  # complementary colour: contrast is always high
    noise = 40
    rows = []
    for y in range(SIZE):
        row = []
        for x in range(SIZE):
            along = x if vertical else y
            base = a if ((along + phase) // width) % 2 == 0 else b
            row.append(tuple(min(255, max(0, c + rng.randint(-noise, noise))) for c in base))
        rows.append(row)
    return rows  # type: ignore[return-value]


def write_demo_dataset(
    directory: str | Path, *, train_per_class: int = 160, val_per_class: int = 32, seed: int = 0
) -> dict[str, int]:
    """Write the dataset; the same arguments always give the same bytes."""
    root = Path(directory)
    if root.exists() and not root.is_dir():
        raise CloudDDPError(f"demo-data: {str(root)!r} is a file; give a folder to write train/ and val/ into.")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CloudDDPError(f"demo-data: cannot make the folder {str(root)!r}: {exc.strerror or exc}.") from None
    rng = random.Random(seed)
    counts = {"train": 0, "val": 0}
    for split, per_class in (("train", train_per_class), ("val", val_per_class)):
        for label, name in enumerate(CLASSES):
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for index in range(per_class):
                image = stripe_image(rng, vertical=bool(label))
                (folder / f"{name}-{index:04d}.png").write_bytes(png_bytes(image))
                counts[split] += 1
            # A larger set written here before would leave its extra images in the dataset the counts describe.
            for stale in folder.glob(f"{name}-[0-9][0-9][0-9][0-9].png"):
                if int(stale.stem.rsplit("-", 1)[1]) >= per_class:
                    stale.unlink()
    return counts
