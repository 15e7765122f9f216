"""The qsub script for a job spec: pure rendering, nothing touches PBS here.

PBS starts the script on the first node only. It writes `node.sh` into the run folder (on the
shared filesystem) and starts it once per distinct host of `$PBS_NODEFILE`:
`pbsdsh -h HOST` (OpenPBS and Torque both have `-h`; OpenPBS's pbsdsh has no `-u`:
openpbs/openpbs src/cmds/pbsdsh.c, commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a) or
`mpiexec -n N -ppn 1`. On each node cloudddp-launch reads PBS_NODEFILE and PBS_JOBID and
takes this host's position (or PMI_RANK under mpiexec) as its node rank, as in the Palmetto seed.
pbsdsh's exit code does not say whether the task failed, so each node writes its own exit code
and the script fails if any node did.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cloudddp.errors import CloudDDPError
from cloudddp.providers.pbs.settings import PBSSettings
from cloudddp.providers.slurm.shell import (
    activation_lines,
    data_variables,
    export_lines,
    launcher_words,
    quote,
    split_environment,
    walltime,
)

if TYPE_CHECKING:
    from cloudddp.spec import JobSpec

NODE_SCRIPT = "node.sh"


@dataclass
class QsubRequest:
    """Exactly what `submit` runs: `qsub` with `script` written to `script_path`."""

    script: str
    runs_dir: str
    secret_names: list[str] = field(default_factory=list)

    def to_document(self) -> dict[str, object]:
        return {"argv": self.argv, "script": self.script, "secrets_passed_by_name": self.secret_names}

    @property
    def argv(self) -> list[str]:
        return ["qsub"]


def runs_dir_of(spec: JobSpec, settings: PBSSettings) -> Path:
    return Path(spec.output or settings.runs_dir).expanduser().resolve()


def resource_line(spec: JobSpec, settings: PBSSettings) -> str:
    if settings.resources == "nodes":  # Torque
        gpus = f":gpus={settings.ngpus}" if settings.ngpus else ""
        return f"#PBS -l nodes={spec.nodes}:ppn={settings.ncpus}{gpus}"
    chunk = f"select={spec.nodes}:ncpus={settings.ncpus}"
    if settings.ngpus:
        chunk += f":ngpus={settings.ngpus}"
    if settings.mem:
        chunk += f":mem={settings.mem}"
    return f"#PBS -l {chunk}"


def directives(spec: JobSpec, settings: PBSSettings, runs_dir: Path, secret: list[str]) -> list[str]:
    if spec.nodes > 1 and settings.resources == "select" and "pack" in (settings.place or "").split(":"):
        # node.sh starts once per distinct host: packed chunks would train on one node, not spec.nodes.
        raise CloudDDPError(
            f"pbs.place={settings.place!r} puts all {spec.nodes} chunks on one host, and cloudddp starts one "
            f"launcher per host; use scatter (the default) for a {spec.nodes}-node job."
        )
    lines = [f"#PBS -N {spec.name}", resource_line(spec, settings)]
    if settings.place and settings.resources == "select":
        lines.append(f"#PBS -l place={settings.place}")
    lines.append(f"#PBS -l walltime={settings.walltime or walltime(spec.max_runtime)}")
    if settings.queue:
        lines.append(f"#PBS -q {settings.queue}")
    if settings.account:
        lines.append(f"#PBS -A {settings.account}")
    lines.append("#PBS -j oe")
    # Names only: qsub takes the values from its own environment, so secrets stay out of this file.
    lines.append(f"#PBS -v {','.join(['CLOUDDDP_RUNS_DIR=' + str(runs_dir), *secret])}")
    lines += [f"#PBS {arg}" for arg in settings.qsub_args]
    return lines


def node_script(spec: JobSpec, settings: PBSSettings) -> str:
    """What every node runs: the user's environment, the CLOUDDDP_* folders, then cloudddp-launch."""
    plain, _ = split_environment(spec)
    variables = data_variables(spec, "pbs")
    if spec.checkpoint:
        variables["CLOUDDDP_CHECKPOINT_DIR"] = str(Path(spec.checkpoint).expanduser().resolve())
    launcher = quote(launcher_words(spec, settings.launcher, settings.host_map, settings.launcher_args))
    lines = [
        "#!/bin/bash",
        "set -uo pipefail",
        'CLOUDDDP_RUN_DIR=$(cd "$(dirname "$0")" && pwd)',
        "host=$(hostname -s)",
        'exec > >(tee -a "$CLOUDDDP_RUN_DIR/logs/$host.log") 2>&1',
        f"cd {shlex.quote(str(Path(spec.source_dir).resolve()))}",
        *activation_lines(settings.conda_env, settings.venv, settings.setup),
        "export CLOUDDDP_RUN_DIR",
        'export CLOUDDDP_MODEL_DIR="$CLOUDDDP_RUN_DIR/model"',
        'export CLOUDDDP_CHECKPOINT_DIR="$CLOUDDDP_RUN_DIR/checkpoints"',  # unless the spec names one (below)
        *export_lines(variables),
        *export_lines(plain),
        launcher,
        "code=$?",
        'echo "$code" > "$CLOUDDDP_RUN_DIR/exit/$host"',
        'exit "$code"',
    ]
    return "\n".join(lines) + "\n"


def start_nodes(settings: PBSSettings) -> list[str]:
    """One node.sh per distinct host (PBS_NODEFILE repeats a host once per slot)."""
    node = '"$CLOUDDDP_RUN_DIR/node.sh"'
    hosts = "hosts=$(awk 'NF && !seen[$1]++ {print $1}' \"$PBS_NODEFILE\")"
    if settings.starter == "mpiexec":
        return [hosts, 'nnodes=$(echo "$hosts" | wc -l)', f'mpiexec -n "$nnodes" -ppn 1 bash {node} || true']
    return [
        hosts,
        "pids=()",
        f'for host in $hosts; do pbsdsh -h "$host" -- bash {node} & pids+=($!); done',
        'for pid in "${pids[@]}"; do wait "$pid" || true; done',
    ]


# Each node wrote its exit code; the job fails if any node failed (pbsdsh itself does not say).
OUTCOME = """code=0
for host in $hosts; do
  node_code=$(cat "$CLOUDDDP_RUN_DIR/exit/$(echo "$host" | cut -d. -f1)" 2>/dev/null || echo 255)
  [ "$node_code" = 0 ] || { echo "cloudddp: node $host exited with $node_code"; code=$node_code; }
done
exit "$code"
"""


def render_qsub(spec: JobSpec, settings: PBSSettings) -> QsubRequest:
    spec.require_source()
    runs_dir = runs_dir_of(spec, settings)
    _, secret = split_environment(spec)
    lines = [
        "#!/bin/bash",
        f"# cloudddp job {spec.name!r}: {spec.nodes} node(s), one cloudddp-launch per node. Submit: qsub FILE",
        *directives(spec, settings, runs_dir, secret),
        "set -euo pipefail",
        'export CLOUDDDP_RUN_DIR="$CLOUDDDP_RUNS_DIR/$PBS_JOBNAME-$PBS_JOBID"',
        'mkdir -p "$CLOUDDDP_RUN_DIR/logs" "$CLOUDDDP_RUN_DIR/exit" "$CLOUDDDP_RUN_DIR/model"',
        f"cat > \"$CLOUDDDP_RUN_DIR/{NODE_SCRIPT}\" <<'CLOUDDDP_NODE_SCRIPT'",
        node_script(spec, settings) + "CLOUDDDP_NODE_SCRIPT",
        *start_nodes(settings),
        OUTCOME,
    ]
    return QsubRequest(script="\n".join(lines), runs_dir=str(runs_dir), secret_names=secret)
