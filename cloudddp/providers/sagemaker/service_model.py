"""CreateTrainingJob's limits as SageMaker states them: botocore's bundled service model, read at run time.

botocore sends a request without checking a member's pattern or maximum, so a value SageMaker refuses is only
refused by CreateTrainingJob, after the uploads; moto accepts most of them. cloudddp checks them first, against
the model of the botocore that is installed (botocore/data/sagemaker/2017-07-24/service-2.json), so a newer
botocore brings newer limits with no copy to keep in step. `check_shape("Environment.key", name)` says in words
what a value breaks, or None; the callers name the user's setting.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sized
from typing import Any

# The model's patterns are Java's: "." matches no line terminator, "\d" only ASCII digits (re.ASCII here).
LINE_TERMINATORS = "\n\r\x85\u2028\u2029"


@functools.cache
def model() -> Any:
    """The SageMaker service model (read once; the loader reads botocore's bundled data only, no AWS config)."""
    from botocore.loaders import create_loader
    from botocore.model import ServiceModel

    return ServiceModel(create_loader().load_service_model("sagemaker", "service-2"), "sagemaker")


@functools.cache
def shape(path: str) -> Any:
    """The shape at `path` in CreateTrainingJob's input: members by name, `key`/`value` of a map, `member` of a
    list ("Environment.key", "VpcConfig.Subnets.member"); a path starting with a shape's own name is that shape
    ("S3Uri")."""
    first, *rest = path.split(".")
    members = model().operation_model("CreateTrainingJob").input_shape.members
    found = members[first] if first in members else model().shape_for(first)
    for step in rest:
        found = getattr(found, step) if step in ("key", "value", "member") else found.members[step]
    return found


def bounds(path: str) -> tuple[int, int | None]:
    """(min, max): a string's length, a list's or map's number of entries, an integer's value."""
    metadata = shape(path).metadata
    return int(metadata.get("min", 0)), metadata.get("max")


def maximum(path: str) -> int:
    top = bounds(path)[1]
    assert top is not None, f"{path} has no maximum in the service model"
    return int(top)


@functools.cache
def pattern(path: str) -> re.Pattern[str] | None:
    """The shape's pattern as Python reads it, to use with fullmatch; None where it has none, or uses Java's
    Unicode classes (\\p{L}), which Python's re lacks (the caller checks those itself)."""
    text = shape(path).metadata.get("pattern")
    if text is None or "\\p{" in text:
        return None
    return re.compile(java_dots(text), re.ASCII)


def java_dots(text: str) -> str:
    """`text` with each "." that stands for any character made Java's: any but a line terminator."""
    out, escaped, in_class = [], False, False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        elif char == "." and not in_class:
            out.append(f"[^{LINE_TERMINATORS}]")
            continue
        out.append(char)
    return "".join(out)


def check_shape(path: str, value: str | Sized | int) -> str | None:
    """What `value` breaks of the shape at `path`, in words ("is 70 characters; SageMaker allows at most 63"),
    or None where SageMaker takes it."""
    low, high = bounds(path)
    if isinstance(value, int):
        if value < low or (high is not None and value > high):
            return f"is {value}; SageMaker takes {low} to {high}" if high is not None else f"is below {low}"
        return None
    size, unit = len(value), "characters" if isinstance(value, str) else "entries"
    if size > (high if high is not None else size) or size < low:
        return (
            f"is {size} {unit}; SageMaker allows {low}-{high}"
            if low
            else f"is {size} {unit}; SageMaker allows at most {high}"
        )
    rule = pattern(path)
    if isinstance(value, str) and rule is not None and not rule.fullmatch(value):
        return f"does not match SageMaker's pattern {rule.pattern}"
    return None
