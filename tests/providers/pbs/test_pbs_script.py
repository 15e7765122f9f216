"""The qsub script: its directives, and its body run for real on this machine under a faked
PBS_NODEFILE with a `pbsdsh` stand-in that starts each per-node command on 127.0.0.1 in a
UTS namespace named after the host (so each launcher finds its own host in the node file,
as on a cluster). No PBS server exists here: directives are checked as text."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import PYTHON, SOURCES, clean_env, run_tree

from cloudddp.cluster.plan import JOB_PORT_SLOTS, port_from_job_id
from cloudddp.job_spec import build_spec
from cloudddp.providers.pbs.provider import PBSProvider

# `pbsdsh -h HOST -- PROGRAM ARGS`: runs PROGRAM with the job's environment, here under hostname HOST.
PBSDSH = """#!/bin/bash
set -euo pipefail
host=""
while [ $# -gt 0 ]; do
  case "$1" in -h) host=$2; shift 2 ;; --) shift; break ;; *) echo "pbsdsh stand-in: unexpected $1" >&2; exit 2 ;; esac
done
[ -n "$host" ] || { echo "pbsdsh stand-in: -h HOST missing" >&2; exit 2; }
exec unshare --uts bash -c 'hostname "$1"; shift; exec "$@"' _ "$host" "$@"
"""

# `mpiexec -n N -ppn 1 PROGRAM ARGS` as MPICH's Hydra runs it under PBS: one process per host of
# $PBS_NODEFILE, in order, each with PMI_RANK / PMI_SIZE / MPI_LOCALRANKID / MPI_LOCALNRANKS (pmodels/mpich
# src/pm/hydra/proxy/pmip_cb.c launch_procs, commit 7ebf82ddd22fc572850529c33c8ef3430134868c); here each
# runs under its host's name, and mpiexec fails if any process failed.
MPIEXEC = """#!/bin/bash
set -uo pipefail
n=""; ppn=""
while [ $# -gt 0 ]; do
  case "$1" in -n) n=$2; shift 2 ;; -ppn) ppn=$2; shift 2 ;; *) break ;; esac
done
[ -n "$n" ] && [ "$ppn" = 1 ] || { echo "mpiexec stand-in: needs -n N -ppn 1" >&2; exit 2; }
mapfile -t hosts < <(awk 'NF && !seen[$1]++ {print $1}' "$PBS_NODEFILE")
[ "${#hosts[@]}" -ge "$n" ] || { echo "mpiexec stand-in: $n processes, ${#hosts[@]} hosts" >&2; exit 2; }
pids=()
for ((rank = 0; rank < n; rank++)); do
  PMI_RANK=$rank PMI_SIZE=$n MPI_LOCALRANKID=0 MPI_LOCALNRANKS=1 \
    unshare --uts bash -c 'hostname "$1"; shift; exec "$@"' _ "${hosts[$rank]}" "$@" & pids+=($!)
done
code=0
for pid in "${pids[@]}"; do wait "$pid" || code=1; done
exit "$code"
"""


def spec_data(tmp_path: Path, **pbs: Any) -> dict[str, Any]:
    return {
        "name": "check", "entry_point": "allreduce_check.py", "source_dir": str(SOURCES), "nodes": 2,
        "args": ["--out-dir", str(tmp_path / "out")], "environment": {"MODE": "fast", "MY_SECRET": "swordfish"},
        "pbs": {"launcher": f"{PYTHON} -m cloudddp.launcher", "runs_dir": str(tmp_path / "runs"),
                "host_map": {"node1": "127.0.0.1", "node2": "127.0.0.1"}, **pbs},
    }  # fmt: skip


def script_for(tmp_path: Path, **pbs: Any) -> str:
    return str(PBSProvider().render(build_spec(spec_data(tmp_path, **pbs))).request.script)


def directives(script: str) -> list[str]:
    return [line.removeprefix("#PBS ") for line in script.splitlines() if line.startswith("#PBS ")]


def test_directives_ask_for_one_chunk_per_node_with_the_resources() -> None:
    script = script_for(
        Path("/tmp/x"), ncpus=8, ngpus=2, mem="32gb", queue="gpu", account="proj42", walltime="36:00:00"
    )
    assert directives(script) == [
        "-N check", "-l select=2:ncpus=8:ngpus=2:mem=32gb", "-l place=scatter", "-l walltime=36:00:00", "-q gpu",
        "-A proj42", "-j oe", "-v CLOUDDDP_RUNS_DIR=/tmp/x/runs,MY_SECRET",
    ]  # fmt: skip


# Size forms from OpenPBS's parser (openpbs/openpbs src/lib/Libattr/attr_fn_size.c to_size, commit
# cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a); placements from its qalter(1B) grammar (doc/man1/qalter.1B, same commit).
@pytest.mark.parametrize("mem", ["32gb", "32GB", "500mb", "1tb", "4096", "64kw", "8b"])
def test_every_size_form_pbs_takes_is_accepted(mem: str) -> None:
    assert f":mem={mem}" in directives(script_for(Path("/tmp/x"), mem=mem))[1]


@pytest.mark.parametrize("place", ["scatter", "scatter:excl", "vscatter:shared:group=switch", "exclhost", "free"])
def test_placements_pbs_takes_reach_the_script(place: str) -> None:
    assert f"-l place={place}" in directives(script_for(Path("/tmp/x"), place=place))


def test_torque_resources_use_nodes_and_ppn() -> None:
    assert directives(script_for(Path("/tmp/x"), resources="nodes", ncpus=4, ngpus=1))[1] == "-l nodes=2:ppn=4:gpus=1"


@pytest.mark.parametrize(("nproc", "ngpus", "expected"), [(None, 2, "--nproc-per-node=2"), (4, 2, "--nproc-per-node=4"),
                                                        (None, 0, None)])  # fmt: skip
def test_each_node_starts_one_process_per_gpu_it_asked_for(nproc: int | None, ngpus: int, expected: str | None) -> None:
    # Without OpenPBS's cgroups hook every GPU of the node is visible: the launcher's default would count them all.
    spec = build_spec({**spec_data(Path("/tmp/x"), ngpus=ngpus), "nproc_per_node": nproc})
    launch = next(
        line for line in PBSProvider().render(spec).request.script.splitlines() if "cloudddp.launcher" in line
    )
    assert (expected in launch) if expected else "--nproc-per-node" not in launch, launch


def stand_ins(tmp_path: Path) -> Path:
    """A folder holding the pbsdsh and mpiexec stand-ins."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, stand_in in (("pbsdsh", PBSDSH), ("mpiexec", MPIEXEC)):
        (bin_dir / name).write_text(stand_in)
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.mark.process
@pytest.mark.parametrize(
    ("argv", "message"),
    [(["pbsdsh", "--", "true"], "-h HOST missing"), (["pbsdsh", "-u", "--", "true"], "unexpected -u"),
     (["mpiexec", "-n", "2", "true"], "needs -n N -ppn 1"), (["mpiexec", "-n", "3", "-ppn", "1", "true"], "3 processes, 2 hosts")],
)  # fmt: skip
def test_the_stand_ins_refuse_what_they_do_not_model(tmp_path: Path, argv: list[str], message: str) -> None:
    bin_dir = stand_ins(tmp_path)
    (tmp_path / "nodefile").write_text("node1\nnode1\nnode2\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PBS_NODEFILE": str(tmp_path / "nodefile")}
    result = subprocess.run([str(bin_dir / argv[0]), *argv[1:]], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and message in result.stderr


@pytest.fixture
def job_id() -> str:
    """A PBS job id whose ports (its master port and the fail-fast one above it) are free: with a fixed id, tests
    running side by side (pytest -n) rendezvoused on one port and joined each other's jobs."""
    for number in random.sample(range(JOB_PORT_SLOTS), 100):
        port = port_from_job_id(str(number))
        with contextlib.suppress(OSError):
            for candidate in (port, port + 1):
                socket.create_server(("127.0.0.1", candidate)).close()
            return f"{number}.pbs-test"
    raise RuntimeError("no free port pair in PBS's job-port range")


def run_job_body(script: str, tmp_path: Path, hosts: list[str], job_id: str) -> subprocess.CompletedProcess[str]:
    """What PBS would do on the first node: the job's variables (-v ones included), then bash SCRIPT."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("the pbsdsh stand-in needs unshare and root (a UTS namespace per node)")
    bin_dir = stand_ins(tmp_path)
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{host}\n{host}\n" for host in hosts))  # one line per slot, as PBS writes it
    variables = next(line for line in directives(script) if line.startswith("-v ")).removeprefix("-v ").split(",")
    passed = dict(item.split("=", 1) for item in variables if "=" in item)
    passed.update({name: "swordfish" for name in variables if "=" not in name})  # qsub's own environment
    env = clean_env({
        **passed, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PBS_NODEFILE": str(nodefile), "PBS_JOBID": job_id,
        "PBS_JOBNAME": re.search(r"^#PBS -N (\S+)$", script, re.M)[1], "PBS_ENVIRONMENT": "PBS_BATCH",  # type: ignore[index]
        "PBS_O_WORKDIR": str(tmp_path),
    })  # fmt: skip
    (tmp_path / "job.pbs").write_text(script)
    return run_tree(["bash", str(tmp_path / "job.pbs")], cwd=tmp_path, env=env, timeout=300)


def qstat_stand_in(tmp_path: Path, job_id: str, name: str) -> Path:
    """A `qstat` printing a finished job's record in OpenPBS's JSON layout, runs folder in Variable_List."""
    record = {"Jobs": {job_id: {"Job_Name": name, "job_state": "F", "Exit_status": 0, "exec_host": "node1/0+node2/0",
                                "Variable_List": {"CLOUDDDP_RUNS_DIR": str(tmp_path / "runs")}}}}  # fmt: skip
    folder = tmp_path / "qstat-bin"
    folder.mkdir()
    (folder / "record.json").write_text(json.dumps(record))
    (folder / "qstat").write_text(f"#!/bin/sh\ncat {folder / 'record.json'}\n")
    (folder / "qstat").chmod(0o755)
    return folder


@pytest.mark.slow
def test_script_body_runs_one_launcher_per_host_and_they_all_reduce(tmp_path: Path, job_id: str) -> None:
    result = run_job_body(script_for(tmp_path), tmp_path, ["node1", "node2"], job_id)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ranks = [json.loads((tmp_path / "out" / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world_size"], r["sum"]) for r in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]
    run = tmp_path / "runs" / f"check-{job_id}"
    node2 = (run / "logs" / "node2.log").read_text()
    # Each launcher found its host's position in PBS_NODEFILE; the port came from PBS_JOBID (20000 + 2 * number).
    port = port_from_job_id(job_id)
    assert "provider=pbs node 1/2" in node2 and f"rdzv=static@127.0.0.1:{port}" in node2
    assert sorted(p.name for p in (run / "exit").iterdir()) == ["node1", "node2"]
    # The provider reads the nodes' outcome from their exit files when qstat gives no exit status.
    assert PBSProvider.node_exit_code(run) == 0
    # status and logs as the provider reads them: qstat's record (OpenPBS's JSON layout, see
    # test_pbs_commands.py) names the runs folder; the lines are what the two launchers printed.
    provider = PBSProvider(environ={"PATH": f"{qstat_stand_in(tmp_path, job_id, 'check')}:/usr/bin:/bin"})
    assert provider.status(job_id).artifacts == str(run / "model")
    lines = list(provider.logs(job_id))
    assert f"[node1] cloudddp: provider=pbs node 0/2 nproc_per_node=1 rdzv=static@127.0.0.1:{port}" in lines
    assert "[node2] rank 1/2: all_reduce sum=3 (expected 3)" in lines


@pytest.mark.slow
def test_the_mpiexec_starter_runs_one_launcher_per_host_ranked_by_pmi_rank(tmp_path: Path, job_id: str) -> None:
    script = script_for(tmp_path, starter="mpiexec")
    assert 'mpiexec -n "$nnodes" -ppn 1 bash "$CLOUDDDP_RUN_DIR/node.sh"' in script
    result = run_job_body(script, tmp_path, ["node1", "node2"], job_id)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ranks = [json.loads((tmp_path / "out" / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world_size"], r["sum"]) for r in ranks] == [(0, 2, 3.0), (1, 2, 3.0)]
    run = tmp_path / "runs" / f"check-{job_id}"
    # One launcher per host, each with its node rank (Hydra gives PMI_RANK in node-file order).
    assert "provider=pbs node 1/2" in (run / "logs" / "node2.log").read_text()
    assert sorted(p.name for p in (run / "exit").iterdir()) == ["node1", "node2"]


@pytest.mark.slow
def test_a_failing_node_fails_the_job(tmp_path: Path, job_id: str) -> None:
    data = spec_data(tmp_path)
    data["args"] += ["--fail-rank", "1", "--fail-code", "3"]
    script = str(PBSProvider().render(build_spec(data)).request.script)
    result = run_job_body(script, tmp_path, ["node1", "node2"], job_id)
    run = tmp_path / "runs" / f"check-{job_id}"
    # pbsdsh does not pass the task's exit code on: the script reads the nodes' exit files instead.
    code = int((run / "exit" / "node2").read_text())
    assert code != 0 and result.returncode == code, result.stdout[-3000:]
    assert f"cloudddp: node node2 exited with {code}" in result.stdout
    assert "failing on purpose with exit code 3" in (run / "logs" / "node2.log").read_text()
    assert PBSProvider.node_exit_code(run) == code


def test_status_takes_the_nodes_exit_code_by_the_job_scripts_rule(tmp_path: Path) -> None:
    """A node stopped by another's failure may record its own code (1: its peer was lost) before the fail-fast
    channel gives it the failing node's: status must then agree with the job script's exit (the last non-zero)."""
    (tmp_path / "exit").mkdir()
    for host, code in {"node1": "1", "node2": "3", "node3": "0"}.items():
        (tmp_path / "exit" / host).write_text(code + "\n")
    assert PBSProvider.node_exit_code(tmp_path) == 3
