"""Writes notebooks/local_metrics.ipynb (run it after editing the cells below; then execute it, see the end).

Local first: no cloud account. Two emulated SageMaker hosts on this machine train `sources/train_ddp.py` on the
small demo dataset; the job's metric definitions make each node's launcher keep a history, which
`Estimator.metrics()` reads back as a DataFrame and the notebook plots per epoch.
"""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell
from notebook_file import notebook_of, write_beside

CELLS = [
    new_markdown_cell(
        "# Metrics of a local DDP run\n\n"
        "Train `sources/train_ddp.py` on **2 emulated nodes** on this machine (no cloud account, no Docker), with "
        "metric definitions as SageMaker takes them (a name and a regex whose first group is the value), then "
        "read every value back as a DataFrame and plot loss and accuracy per epoch. The same `Estimator` runs on "
        "SageMaker, OCI, Kubernetes, Slurm or PBS by changing `provider`; see docs/guides/metrics.md."
    ),
    new_code_cell(
        "import tempfile\n"
        "from pathlib import Path\n\n"
        "import matplotlib.pyplot as plt\n\n"
        "from cloudddp import Estimator\n"
        "from cloudddp.demo_data import write_demo_dataset\n\n"
        'REPO = Path.cwd().parent if Path.cwd().name == "notebooks" else Path.cwd()\n'
        "# The dataset and the run folders: the last cell removes this folder (as does the kernel when it shuts\n"
        "# down, if you stop before).\n"
        'work = tempfile.TemporaryDirectory(prefix="cloudddp-notebook-")\n'
        "WORK = Path(work.name)\n"
        'data = WORK / "data"\n'
        "write_demo_dataset(data, train_per_class=32, val_per_class=8)"
    ),
    new_markdown_cell(
        "## 1. Train on 2 emulated nodes\n"
        "`metrics=` are the job's own definitions: each node's launcher applies them to its workers' output and "
        "appends every value (time, metric, value, node, rank) to a history beside the run. `train_ddp.py` "
        "prints one `epoch=N/4 loss=... train_acc=... val_acc=...` line per epoch on rank 0: the regexes read "
        "those lines only."
    ),
    new_code_cell(
        "est = Estimator(\n"
        '    provider="local",\n'
        '    entry_point="train_ddp.py",\n'
        '    source_dir=str(REPO / "sources"),\n'
        "    instance_count=2,\n"
        '    hyperparameters={"epochs": 4, "arch": "tiny", "batch-size": 16},\n'
        '    metrics={name: rf"epoch=\\d+/\\d+ .*\\b{name}=([0-9.]+)" for name in ("loss", "train_acc", "val_acc")},\n'
        '    runs_dir=str(WORK / "runs"),\n'
        ")\n"
        'status = est.fit({"train": str(data)}, logs=False)\n'
        "status.state"
    ),
    new_markdown_cell(
        "## 2. Every value as a DataFrame\n"
        "Read from the nodes' histories (the logs where no history can be read here), as `cloudddp metrics "
        "latest --format csv` prints them."
    ),
    new_code_cell(
        "frame = est.metrics()\n"
        'frame["epoch"] = frame.groupby("metric").cumcount() + 1\n'
        'per_epoch = frame.pivot(index="epoch", columns="metric", values="value")\n'
        "per_epoch"
    ),
    new_markdown_cell("## 3. Loss and accuracy per epoch"),
    new_code_cell(
        "fig, (left, right) = plt.subplots(1, 2, figsize=(7, 2.4), dpi=60)\n"
        'per_epoch["loss"].plot(ax=left, marker="o", title="loss")\n'
        'per_epoch[["train_acc", "val_acc"]].plot(ax=right, marker="o", title="accuracy")\n'
        "fig.tight_layout()\n"
        "plt.show()"
    ),
    new_markdown_cell(
        "## 4. Each node's timeline\n"
        "When each node started and how it ended (started, succeeded, failed, stopped), as the local provider "
        "recorded the run (`cloudddp ui` shows the same timeline)."
    ),
    new_code_cell(
        "from cloudddp.providers import get_provider\n\n"
        'events = get_provider("local", runs_dir=str(WORK / "runs")).events(est.latest_job.job_id)\n'
        "t0 = events[0].time\n"
        "for event in events:\n"
        "    print(f\"{event.time - t0:5.1f} s  {event.node or '(job)':8} {event.what}\")\n\n"
        "nodes = sorted({e.node for e in events if e.node})\n"
        "fig, ax = plt.subplots(figsize=(7, 1.2), dpi=60)\n"
        "for row, node in enumerate(nodes):\n"
        "    mine = [e for e in events if e.node == node]\n"
        "    begin, end = mine[0].time - t0, mine[-1].time - t0\n"
        "    ax.barh(row, end - begin, left=begin)\n"
        '    ax.text(end, row, f" {mine[-1].what}", va="center")\n'
        "ax.set_xlim(0, (events[-1].time - t0) * 1.3)  # room for the labels\n"
        "ax.set_yticks(range(len(nodes)), nodes)\n"
        'ax.set_xlabel("seconds since submitted")\n'
        "fig.tight_layout()\n"
        "plt.show()"
    ),
    new_markdown_cell("Clean up: the dataset and the run folders go."),
    new_code_cell('work.cleanup()\nprint("removed", WORK)'),
]


def build() -> nbformat.NotebookNode:
    return notebook_of(CELLS)


if __name__ == "__main__":
    write_beside(__file__, build())
