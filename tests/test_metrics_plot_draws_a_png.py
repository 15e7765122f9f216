"""`cloudddp metrics JOB --plot FILE.png` (cloudddp/metrics_plot.py): a chart per metric, a line per node (and rank),
drawn with matplotlib from the plot extra; without it, exit 2 naming the extra. Pixels are not tested."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import cli

from cloudddp.errors import CloudDDPError
from cloudddp.metrics import DEFAULT_METRICS, Sample, extract
from cloudddp.metrics_plot import figure_of, plot

PNG = b"\x89PNG\r\n\x1a\n"


def is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == PNG and path.stat().st_size > 5000  # a blank canvas is smaller


def test_a_history_is_drawn_a_chart_per_metric_a_line_per_rank(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    history = [Sample(m, v, f"algo-{r + 1}", timestamp=t, rank=r)
               for t, (m, v) in enumerate([("loss", 0.9), ("val_acc", 0.5), ("loss", 0.4), ("val_acc", 0.8)])
               for r in (0, 1)]  # fmt: skip
    assert plot(history, tmp_path / "h.png", "job-1") == 2
    assert is_png(tmp_path / "h.png")


def test_values_from_the_logs_are_drawn_by_their_number(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    found = extract(["[algo-1] epoch=0/2 loss=0.69", "[algo-1] epoch=1/2 loss=0.40", "loss=0.3"], DEFAULT_METRICS)
    assert plot(found, tmp_path / "logs.png", "job-1") == 1
    assert is_png(tmp_path / "logs.png")
    assert plot(found, tmp_path / "logs.svg", "job-1") == 1  # the suffix picks the format
    assert (tmp_path / "logs.svg").read_text().lstrip().startswith("<?xml")


def test_value_numbers_are_whole_even_for_a_single_value() -> None:
    pytest.importorskip("matplotlib")
    (ax,) = figure_of(extract(["[algo-1] epoch=1/1 loss=0.69"], DEFAULT_METRICS), "job-1").axes
    ticks = [tick for tick in ax.get_xticks() if ax.get_xlim()[0] <= tick <= ax.get_xlim()[1]]
    assert ticks and all(float(tick).is_integer() for tick in ticks), ticks  # 0.96, 0.98, ... before


def test_nothing_to_draw_or_nowhere_to_write_is_said(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    with pytest.raises(CloudDDPError, match="no values to plot"):
        plot([], tmp_path / "none.png", "job-1")
    with pytest.raises(CloudDDPError, match="--plot"):
        plot([Sample("loss", 1.0, "n")], tmp_path / "no" / "such" / "folder.png", "job-1")


def test_without_matplotlib_plot_exits_2_naming_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import raises ImportError
    refused = cli("metrics", "latest", "--plot", str(tmp_path / "m.png"), cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "pip install 'cloudddp[plot]'" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "m.png").exists()
