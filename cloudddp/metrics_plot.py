"""`cloudddp metrics JOB --plot FILE.png`: one chart per metric, a line per node (and rank, where the history
knows it), with matplotlib from the `plot` extra. The figure is drawn on matplotlib's Agg canvas without pyplot,
so nothing global changes (a notebook's backend stays as it is)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.metrics import Sample

INCH_PER_CHART = 2.6


def require_matplotlib() -> Any:
    """matplotlib's Figure, or an error (exit 2) naming the extra that brings it."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise CloudDDPError(
            "--plot draws with matplotlib, which is not installed: pip install 'cloudddp[plot]' (or matplotlib)."
        ) from None
    return Figure


def series_label(sample: Sample) -> str:
    node = sample.node or "job"
    return f"{node} rank {sample.rank}" if sample.rank is not None else node


def plot(samples: list[Sample], path: Path, title: str) -> int:
    """Write the charts to `path` (its suffix picks the format: .png, .svg, .pdf); return how many metrics."""
    if not samples:
        raise CloudDDPError(f"no values to plot in {path.name}: no metric was found.", exit_code=1)
    figure = figure_of(samples, title)
    try:
        figure.savefig(path, dpi=100)
    except (OSError, ValueError) as exc:  # a folder that does not exist; a suffix matplotlib has no writer for
        raise CloudDDPError(f"--plot {path}: {exc}", exit_code=1) from None
    return len(figure.axes)


def figure_of(samples: list[Sample], title: str) -> Any:
    """The charts as a matplotlib Figure: one per metric, a line per node (and rank)."""
    figure_class = require_matplotlib()
    from matplotlib.ticker import MaxNLocator

    by_metric: dict[str, dict[str, list[tuple[float, float]]]] = {}
    start = min((s.timestamp for s in samples if s.timestamp is not None), default=None)
    for sample in samples:
        series = by_metric.setdefault(sample.metric, {}).setdefault(series_label(sample), [])
        # x: seconds since the job's first value (a history), else the value's number in its series (the logs)
        x = sample.timestamp - start if sample.timestamp is not None and start is not None else len(series) + 1
        series.append((x, sample.value))
    figure = figure_class(figsize=(7.0, INCH_PER_CHART * len(by_metric)), layout="constrained")
    axes = figure.subplots(len(by_metric), 1, squeeze=False)[:, 0]
    x_label = "seconds since the first value" if start is not None else "value number"
    for ax, (metric, series) in zip(axes, by_metric.items(), strict=True):
        for label, points in series.items():
            ax.plot([x for x, _ in points], [y for _, y in points], marker="o", markersize=3, label=label)
        ax.set_title(metric, loc="left")
        ax.set_xlabel(x_label)
        if start is None:  # value numbers are whole: no 0.96 ... 1.04 around a single value
            ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
        ax.grid(alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize="small")
    figure.suptitle(title)
    return figure
