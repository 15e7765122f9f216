"""Against a real Slurm (the test cluster): a site's SBATCH_EXPORT=NONE, and a run folder with % in its path.

SBATCH_EXPORT=NONE starts the batch shell without the user's environment and has srun export nothing, so the
venv's cloudddp-launch was not found and secrets passed by name never arrived; cloudddp now runs sbatch with
--export=ALL. A % in the folder is written %% in --output, and Slurm 22.05 shows StdOut with the %% kept.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import run_cli
from helpers.slurm_cluster import SlurmCluster, slurm_cluster

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

TRAIN = "import os\nprint('RANK', os.environ.get('RANK'), 'HF_TOKEN set:', os.environ.get('HF_TOKEN') == 'hf_secret')\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with slurm_cluster(tmp_path_factory.mktemp("slurm"), nodes=2) as running:
        yield running


def test_a_job_under_sbatch_export_none_gets_the_venv_and_its_secret(cluster: SlurmCluster, tmp_path: Path) -> None:
    venv = Path(sys.prefix)
    if not (venv / "bin" / "activate").is_file():
        pytest.skip(f"the tests do not run in a virtual environment ({venv} has no bin/activate)")
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text(TRAIN)
    runs = tmp_path / "runs 50%"
    spec = {"name": "export", "entry_point": "train.py", "source_dir": str(source), "nodes": 2, "nproc_per_node": 1,
            "output": str(runs), "environment": {"HF_TOKEN": "hf_secret"},
            "slurm": {"venv": str(venv), "host_map": {"n1": "127.0.0.1", "n2": "127.0.0.1"}}}  # fmt: skip
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    path = os.pathsep.join(p for p in cluster.env["PATH"].split(os.pathsep) if not p.startswith(str(venv)))
    env = {**cluster.env, "PATH": path, "SBATCH_EXPORT": "NONE"}
    result = run_cli("launch", "-p", "slurm", "-f", str(tmp_path / "job.yaml"), env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    job_id = result.stdout.split("submitted ", 1)[1].split()[0]
    # Both nodes ran, the secret arrived, and the lines came back through the real (un-doubled) output file.
    assert "[n1] RANK 0 HF_TOKEN set: True" in result.stdout and "[n2] RANK 1 HF_TOKEN set: True" in result.stdout
    assert f"model: {runs}/export-{job_id}/model" in result.stdout + result.stderr
    logs = run_cli("logs", "-p", "slurm", job_id, env=env)
    assert "HF_TOKEN set: True" in logs.stdout and "hf_secret" not in logs.stdout
