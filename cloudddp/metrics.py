"""Metrics from a job's log lines, with SageMaker's semantics, on every provider.

A metric is a name and a regular expression, as SageMaker's `MetricDefinitions` take them
(`{"Name": ..., "Regex": ...}`): the expression is searched in every log line, and its first group,
parsed as a float, is one value of the metric. SageMaker applies them to the job's CloudWatch
logs itself; here they are applied to the lines `cloudddp logs` prints ("[node] text"), so
`cloudddp metrics JOB` works the same for every provider. Without definitions of its own a
job gets `DEFAULT_METRICS`, which read the `key=value` epoch lines of `sources/train_ddp.py`.

Standard library only: the job side may import it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

# A number as Python's float() and Java's Double.parseDouble read it (no hex, no underscores).
NUMBER = r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:nan|inf|Infinity|NaN))"
# The `key=value` figures each epoch line of sources/train_ddp.py prints
# ("epoch=1/5 loss=0.6931 train_acc=0.5000 val_acc=0.5000 images_per_sec=123.4 ...").
DEFAULT_METRICS: dict[str, str] = {
    name: rf"\b{name}={NUMBER}" for name in ("loss", "train_acc", "val_acc", "images_per_sec")
}
NODE_PREFIX = re.compile(r"^\[(?P<node>[^\]]+)\] ")
FORMATS = ("text", "json", "csv")


def definition_problem(name: str, regex: str) -> str | None:
    """Why `regex` cannot define the metric `name` (one sentence), or None."""
    if not name.strip():
        return "a metric needs a name"
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        return f"the regex of metric {name!r} is not a regular expression ({exc})"
    if compiled.groups < 1:
        return f"the regex of metric {name!r} has no group: its first group (...) is the value, as SageMaker reads it"
    return None


def as_definitions(metrics: Mapping[str, str]) -> list[dict[str, str]]:
    """The definitions as SageMaker's MetricDefinitions (and the SDK v2's `metric_definitions`) carry them."""
    return [{"Name": name, "Regex": regex} for name, regex in metrics.items()]


@dataclass(frozen=True)
class Sample:
    metric: str
    value: float
    node: str  # "" where the line names none
    line: int  # the line's number in the log, from 1


def extract(lines: Iterable[str], metrics: Mapping[str, str]) -> list[Sample]:
    """Every value the definitions find, in log order (a line may hold several metrics)."""
    compiled = [(name, re.compile(regex)) for name, regex in metrics.items()]
    found: list[Sample] = []
    for number, line in enumerate(lines, start=1):
        prefix = NODE_PREFIX.match(line)
        node, text = (prefix["node"], line[prefix.end() :]) if prefix else ("", line)
        for name, regex in compiled:
            match = regex.search(text)
            if match is None or match.group(1) is None:
                continue
            try:
                value = float(match.group(1))
            except ValueError:
                continue  # SageMaker drops a value it cannot parse, too
            found.append(Sample(name, value, node, number))
    return found


@dataclass(frozen=True)
class Summary:
    metric: str
    last: float
    minimum: float
    maximum: float
    count: int


def summarize(samples: Iterable[Sample]) -> list[Summary]:
    """Per metric, in order of first appearance: the last value, the least, the greatest and how many."""
    by_metric: dict[str, list[float]] = {}
    for sample in samples:
        by_metric.setdefault(sample.metric, []).append(sample.value)
    rows = []
    for metric, values in by_metric.items():
        finite = [v for v in values if not math.isnan(v)] or values
        rows.append(Summary(metric, values[-1], min(finite), max(finite), len(values)))
    return rows


def render(samples: list[Sample], form: str) -> str:
    """`text`: the summary table; `json`: the history (one object per value); `csv`: the history."""
    if form == "json":
        return json.dumps([asdict(s) for s in samples], indent=2) + "\n"
    if form == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["metric", "value", "node", "line"])
        writer.writerows([s.metric, repr(s.value), s.node, s.line] for s in samples)
        return out.getvalue()
    rows = [("METRIC", "LAST", "MIN", "MAX", "COUNT")]
    rows += [(r.metric, f"{r.last:g}", f"{r.minimum:g}", f"{r.maximum:g}", str(r.count)) for r in summarize(samples)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in rows
    )
