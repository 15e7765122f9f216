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

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from cloudddp.errors import CloudDDPError
from cloudddp.providers.batch.base import BatchRequest
from cloudddp.providers.batch.shell import (
    activation_lines,
    check_directive_value,
    data_variables,
    export_lines,
    launcher_words,
    quote,
    shared_folder,
    split_environment,
    walltime,
)
from cloudddp.providers.pbs.settings import PBSSettings

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

NODE_SCRIPT = "node.sh"
# qsub splits a #PBS line into words: whitespace separates them, ' or " group them (nothing is escaped inside),
# a backslash outside quotes takes the next character as it is (openpbs/openpbs src/cmds/qsub.c make_argv,
# commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a).
NEEDS_QUOTES = re.compile(r"""[\s'"\\#,]""")


class QsubRequest(BatchRequest):
    """`qsub FILE` with `script` written to a file in the runs folder; the secrets pass by name in -v."""

    @property
    def argv(self) -> list[str]:
        return ["qsub"]


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


def pbs_value(field: str, value: str) -> str:
    """`value` as one word of a #PBS line, in double quotes where it needs them (it cannot hold a `"`)."""
    check_directive_value(field, value)
    if not NEEDS_QUOTES.search(value):
        return value
    if '"' in value:
        raise CloudDDPError(f"{field}={value!r}: a double quote cannot go into a #PBS directive's quoted value.")
    return f'"{value}"'


def variables_directive(runs_dir: Path, field: str, secret: list[str]) -> str:
    """`-v CLOUDDDP_RUNS_DIR=PATH,SECRET...`: the run folder by value (`status` and `logs` read it back from the
    job's Variable_List) and the secrets by name. A value with commas or spaces goes in single quotes and the list
    in double quotes, as qsub(1B) -v says (openpbs/openpbs doc/man1/qsub.1B and src/cmds/qsub.c copy_env_value,
    commit cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a): the path then cannot hold a quote or a backslash."""
    path = check_directive_value(field, str(runs_dir))
    if not NEEDS_QUOTES.search(path):
        return f"#PBS -v {','.join(['CLOUDDDP_RUNS_DIR=' + path, *secret])}"
    if re.search(r"""['"\\]""", path):
        raise CloudDDPError(
            f"{field}={path!r}: qsub's -v list cannot carry a quote or a backslash in the run folder's path; "
            f"choose a folder without one."
        )
    listed = ",".join([f"CLOUDDDP_RUNS_DIR='{path}'", *secret])
    return f'#PBS -v "{listed}"'


def directives(spec: JobSpec, settings: PBSSettings, runs_dir: Path, secret: list[str]) -> list[str]:
    if spec.nodes > 1 and settings.resources == "select" and "pack" in (settings.place or "").split(":"):
        # node.sh starts once per distinct host: packed chunks would train on one node, not spec.nodes.
        raise CloudDDPError(
            f"pbs.place={settings.place!r} puts all {spec.nodes} chunks on one host, and cloudddp starts one "
            f"launcher per host; use scatter (the default) for a {spec.nodes}-node job."
        )
    lines = [f"#PBS -N {pbs_value('name', spec.name)}", resource_line(spec, settings)]
    if settings.place and settings.resources == "select":
        lines.append(f"#PBS -l place={settings.place}")
    limit = spec.runtime_limit(None)  # none given: the queue's (resources_default.walltime, else none)
    given = settings.walltime or (walltime(limit) if limit is not None else None)
    if given:
        lines.append(f"#PBS -l walltime={given}")
    else:  # a comment among the directives: qsub reads on to the first command
        lines.append("# no walltime: max_runtime not given, so the queue's walltime applies")
    if settings.queue:
        lines.append(f"#PBS -q {pbs_value('pbs.queue', settings.queue)}")
    if settings.account:
        lines.append(f"#PBS -A {pbs_value('pbs.account', settings.account)}")
    lines.append("#PBS -j oe")
    # Secrets by name only: qsub takes the values from its own environment, so they stay out of this file.
    lines.append(variables_directive(runs_dir, "output" if spec.output else "pbs.runs_dir", secret))
    # Whole options the user wrote for qsub, split by qsub as they are; only a line break is refused.
    lines += [f"#PBS {check_directive_value(f'pbs.qsub_args[{i}]', a)}" for i, a in enumerate(settings.qsub_args)]
    return lines


def node_script(spec: JobSpec, settings: PBSSettings) -> str:
    """What every node runs: the user's environment, the CLOUDDDP_* folders, then cloudddp-launch."""
    if spec.nproc_per_node is None and settings.ngpus:
        # One process per GPU asked for. The launcher's default counts the visible GPUs, and OpenPBS narrows
        # CUDA_VISIBLE_DEVICES to the job's GPUs only through its cgroups hook (openpbs/openpbs cd7ab5ed
        # src/hooks/cgroups/pbs_cgroups.PY): without it every GPU of the node is visible.
        spec = spec.model_copy(update={"nproc_per_node": settings.ngpus})
    plain, _ = split_environment(spec)
    variables = data_variables(spec, "pbs")
    if spec.checkpoint:
        variables["CLOUDDDP_CHECKPOINT_DIR"] = str(shared_folder(spec.checkpoint, "checkpoint", "pbs"))
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


def render_qsub(spec: JobSpec, settings: PBSSettings, runs_dir: Path, secret: list[str]) -> QsubRequest:
    """The script and how qsub takes it; BatchProvider.render checked the spec and found runs_dir and secret."""
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
