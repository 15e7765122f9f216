"""Metrics from a job's log lines, with SageMaker's semantics, on every provider.

A metric is a name and a regular expression, as SageMaker's `MetricDefinitions` take them
(`{"Name": ..., "Regex": ...}`): the expression is searched in every log line, and its first group,
parsed as a float, is one value of the metric. SageMaker applies them to the job's CloudWatch
logs itself; here they are applied to the lines `cloudddp logs` prints ("[node] text"), so
`cloudddp metrics JOB` works the same for every provider. Without definitions of its own a
job gets `DEFAULT_METRICS`, which read the `key=value` epoch lines of `sources/train_ddp.py`.

On the job side the launcher applies the definitions (`CLOUDDDP_METRICS`, see `job_environment`) to its workers'
output and appends each value to a JSON-lines history beside the job's output (`HISTORY_GLOB`, one file per node,
with `DEFINITIONS_FILE` naming the definitions it used): `read_history` reads it back.

Standard library only: the job side may import it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A number as Python's float() and Java's Double.parseDouble read it (no hex, no underscores).
NUMBER = r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:nan|inf|Infinity|NaN))"
# The `key=value` figures each epoch line of sources/train_ddp.py prints
# ("epoch=1/5 loss=0.6931 train_acc=0.5000 val_acc=0.5000 images_per_sec=123.4 ...").
DEFAULT_METRICS: dict[str, str] = {
    name: rf"\b{name}={NUMBER}" for name in ("loss", "train_acc", "val_acc", "images_per_sec")
}
NODE_PREFIX = re.compile(r"^\[(?P<node>[^\]]+)\] ")
FORMATS = ("text", "json", "csv")
# The definitions a job's launcher applies (a JSON object NAME -> REGEX; absent: DEFAULT_METRICS).
ENVIRONMENT_VARIABLE = "CLOUDDDP_METRICS"
# The job side's history: one file per node (`history_name`), and the definitions it was written with beside it.
HISTORY_GLOB = "metrics-*.jsonl"
DEFINITIONS_FILE = "metric-definitions.json"


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


def job_environment(spec_metrics: Mapping[str, str] | None) -> dict[str, str]:
    """The variable that gives the job's launcher the spec's own definitions (none: the launcher's defaults)."""
    return {ENVIRONMENT_VARIABLE: json.dumps(dict(spec_metrics))} if spec_metrics else {}


def with_history_asked(spec: Any, applied_by_service: bool) -> Any:
    """The job spec (a pydantic JobSpec) with `CLOUDDDP_METRICS` in its environment where it has definitions of its
    own and the provider's service does not apply them itself (`applies_metric_definitions`: SageMaker), so each
    node's launcher keeps a history with them. A `CLOUDDDP_METRICS` the user set is kept."""
    if applied_by_service or not spec.metrics:
        return spec
    return spec.model_copy(update={"environment": {**job_environment(spec.metrics), **spec.environment}})


def definitions_from_environment(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The definitions `CLOUDDDP_METRICS` gives (absent or empty: DEFAULT_METRICS), and why any were left out."""
    raw = environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if not raw:
        return dict(DEFAULT_METRICS), []
    try:
        given = json.loads(raw)
    except ValueError as exc:
        return {}, [f"{ENVIRONMENT_VARIABLE} is not JSON ({exc}): no metrics are recorded"]
    if not isinstance(given, dict):
        return {}, [f"{ENVIRONMENT_VARIABLE} is not a JSON object of NAME: REGEX: no metrics are recorded"]
    kept: dict[str, str] = {}
    problems: list[str] = []
    for name, regex in given.items():
        problem = definition_problem(name, regex) if isinstance(regex, str) else f"metric {name!r} has no regex"
        if problem:
            problems.append(f"{ENVIRONMENT_VARIABLE}: {problem}; left out")
        else:
            kept[name] = regex
    return kept, problems


def compile_definitions(metrics: Mapping[str, str]) -> list[tuple[str, re.Pattern[str]]]:
    return [(name, re.compile(regex)) for name, regex in metrics.items()]


def values_in(text: str, compiled: Iterable[tuple[str, re.Pattern[str]]]) -> list[tuple[str, float]]:
    """(metric, value) for each definition whose regex is found in `text` with a first group that is a number."""
    found: list[tuple[str, float]] = []
    for name, regex in compiled:
        match = regex.search(text)
        if match is None or match.group(1) is None:
            continue
        try:
            found.append((name, float(match.group(1))))
        except ValueError:
            continue  # SageMaker drops a value it cannot parse, too
    return found


@dataclass(frozen=True)
class Sample:
    metric: str
    value: float
    node: str  # "" where the line names none
    line: int | None = None  # the line's number in the log, from 1 (read from the logs)
    timestamp: float | None = None  # seconds since the epoch (read from the job side's history)
    rank: int | None = None  # the worker's global rank (history; None where the launcher did not know it)


def extract(lines: Iterable[str], metrics: Mapping[str, str]) -> list[Sample]:
    """Every value the definitions find, in log order (a line may hold several metrics)."""
    compiled = compile_definitions(metrics)
    found: list[Sample] = []
    for number, line in enumerate(lines, start=1):
        prefix = NODE_PREFIX.match(line)
        node, text = (prefix["node"], line[prefix.end() :]) if prefix else ("", line)
        found += [Sample(name, value, node, number) for name, value in values_in(text, compiled)]
    return found


def history_name(node: str) -> str:
    """A node's history file name: `metrics-<node>.jsonl`, the node's name kept to safe characters."""
    return "metrics-" + (re.sub(r"[^A-Za-z0-9._-]", "_", node) or "node") + ".jsonl"


def history_record(metric: str, value: float, node: str, rank: int | None, timestamp: float) -> str:
    """One line of the history (ends with a newline)."""
    record = {"timestamp": round(timestamp, 6), "metric": metric, "value": value, "node": node, "rank": rank}
    return json.dumps(record) + "\n"


def read_history(files: Iterable[str | Path]) -> list[Sample]:
    """The values in the history files, by time (a line cut short by a job that died mid-write is skipped)."""
    found: list[Sample] = []
    for file in files:
        with open(file, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                    sample = Sample(str(record["metric"]), float(record["value"]), str(record.get("node") or ""),
                                    timestamp=float(record["timestamp"]), rank=record.get("rank"))  # fmt: skip
                except (ValueError, TypeError, KeyError, AttributeError):
                    continue
                found.append(sample)
    return sorted(found, key=lambda s: s.timestamp or 0.0)


def histories_under(folder: Path) -> tuple[list[Path], dict[str, str] | None]:
    """The history files below `folder` and the definitions they were written with (None where the files do not
    agree on them or do not say)."""
    files = sorted(folder.rglob(HISTORY_GLOB))
    seen: list[dict[str, str] | None] = []
    for directory in sorted({file.parent for file in files}):
        try:
            seen.append(json.loads((directory / DEFINITIONS_FILE).read_text()))
        except (OSError, ValueError):
            seen.append(None)
    definitions = seen[0] if seen and all(s == seen[0] for s in seen) else None
    return files, definitions


def history_in(folder: Path, metrics: Mapping[str, str]) -> list[Sample] | None:
    """The job side's history below `folder` where it was written with exactly these definitions, else None."""
    files, written_with = histories_under(folder)
    return read_history(files) if files and written_with == dict(metrics) else None


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


def job_samples(provider: Any, job_id: str, metrics: Mapping[str, str]) -> list[Sample]:
    """A job's values: the job side's history where this machine can read it (a provider that keeps its runs in a
    folder here: `find_run`) and it was written with these definitions, else the provider's logs read here."""
    find_run = getattr(provider, "find_run", None)
    recorded = history_in(Path(str(find_run(job_id))), metrics) if callable(find_run) else None
    return recorded if recorded is not None else extract(provider.logs(job_id), metrics)


LOG_FIELDS = ("metric", "value", "node", "line")
HISTORY_FIELDS = ("timestamp", "metric", "value", "node", "rank")


def fields_of(samples: list[Sample]) -> tuple[str, ...]:
    """The columns the samples have: a history's (timestamp, rank) or the logs' (line)."""
    return HISTORY_FIELDS if any(s.timestamp is not None for s in samples) else LOG_FIELDS


def sample_rows(samples: list[Sample]) -> list[dict[str, Any]]:
    """One dict per value with the columns the samples have (`fields_of`), in their order."""
    fields = fields_of(samples)
    return [{field: getattr(sample, field) for field in fields} for sample in samples]


def render(samples: list[Sample], form: str) -> str:
    """`text`: the summary table; `json`: the history (one object per value); `csv`: the history."""
    fields = fields_of(samples)
    if form == "json":
        return json.dumps(sample_rows(samples), indent=2) + "\n"
    if form == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(fields)
        for row in sample_rows(samples):
            writer.writerow(repr(row[f]) if f == "value" else ("" if row[f] is None else row[f]) for f in fields)
        return out.getvalue()
    rows = [("METRIC", "LAST", "MIN", "MAX", "COUNT")]
    rows += [(r.metric, f"{r.last:g}", f"{r.minimum:g}", f"{r.maximum:g}", str(r.count)) for r in summarize(samples)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in rows
    )
