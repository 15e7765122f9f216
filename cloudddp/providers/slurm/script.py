"""The sbatch script for a job spec: pure rendering, nothing touches Slurm here.

One task per node (`srun --ntasks-per-node=1 --kill-on-bad-exit=1`), each running
`cloudddp-launch`, which reads SLURM_* (node list, node id, job id) and starts torchrun.
`--signal=B:USR1@N` warns the batch shell before the time limit; the shell forwards USR1
to the job step (srun passes USR1 on to its tasks: SchedMD/slurm src/srun/signals.c,
commit 284c3b95f08a2dc2478499837b03355e1b9c5c75), and cloudddp-launch hands it to the
training processes so they can checkpoint.

Elastic jobs (`min_nodes` set) ask for a node range (`--nodes=MIN-MAX`: Slurm allocates as many as
it can without delaying the start, and SLURM_JOB_NUM_NODES says how many) and run torchrun's c10d
rendezvous on the step's first node (or etcd-v2). A lost node must not take the others down: by
default Slurm ends the whole allocation when a node fails and srun ends the step when a task fails
(sbatch(1) and srun(1) `--no-kill`, `--kill-on-bad-exit`, `--wait`, SchedMD/slurm doc/man/man1 at
284c3b95f08a2dc2478499837b03355e1b9c5c75; in 22.05.8, d525b6872a106d32916b33a8738f12510ec7cf04,
src/plugins/launch/slurm/launch_slurm.c `_task_finish` signals the step only when kill-on-bad-exit is
set, and starts the `--wait` timer after the first task ends). So the allocation and the step get
`--no-kill`, srun `--kill-on-bad-exit=0 --wait=0`, and since srun's exit code is then the highest of
every task's (a lost node's 137 included), each launcher records its own (`CLOUDDDP_EXIT_DIR`, see
cloudddp/launcher/exit_record.py): the job succeeds when some node finished and none failed.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cloudddp.elastic import is_elastic, node_range
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
)
from cloudddp.providers.slurm.settings import SlurmSettings, slurm_walltime

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec


@dataclass
class SbatchRequest(BatchRequest):
    """`sbatch --parsable` with `script` on stdin; the secrets pass through its exported environment (--export=ALL)."""

    # False when the user's sbatch_args choose --export themselves.
    export_all: bool = True

    @property
    def argv(self) -> list[str]:
        """`--export=ALL` on the command line: it overrides a site's SBATCH_EXPORT=NONE (input environment variables
        override #SBATCH directives, options override both), which would keep the secrets passed by name and the
        venv's PATH from the job; with ALL sbatch sets no SLURM_EXPORT_ENV, so srun exports all too (srun(1)
        --export=NONE; SchedMD/slurm src/sbatch/opt.c at slurm-22-05-8-1 sets it only for values other than ALL)."""
        return ["sbatch", "--export=ALL", "--parsable"] if self.export_all else ["sbatch", "--parsable"]


def node_count(spec: JobSpec) -> list[str]:
    """`--nodes=N --ntasks-per-node=1`; elastic: `--nodes=MIN-MAX` alone.

    With a range, `--ntasks-per-node=1` makes the job one of MIN tasks, and Slurm (22.05.8, measured on
    the test cluster) then allocates MIN nodes even when MAX are idle; without it, as many as are free.
    The job step still runs one task per node (srun --ntasks-per-node=1).
    """
    if is_elastic(spec):
        return [f"--nodes={spec.min_nodes}-{spec.nodes}"]
    return [f"--nodes={spec.nodes}", "--ntasks-per-node=1"]


# sbatch splits a #SBATCH line into words: whitespace separates them, ' or " group them (whitespace and # kept),
# a backslash takes the next character as it is, and an unquoted # starts a comment (SchedMD/slurm
# src/sbatch/opt.c get_argument, commit 284c3b95f08a2dc2478499837b03355e1b9c5c75).
NEEDS_QUOTES = re.compile(r"""[\s#'"\\]""")


def sbatch_value(field: str, value: str) -> str:
    """`value` as one word of a #SBATCH line: double-quoted, with \\ and \" escaped, where it needs it."""
    check_directive_value(field, value)
    if not NEEDS_QUOTES.search(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def output_pattern(runs_dir: Path, field: str) -> str:
    """`--output`'s filename pattern: % is doubled (%% is a literal %), and a backslash would turn off the %x-%j
    replacements for the whole name (sbatch(1) "filename pattern", SchedMD/slurm doc/man/man1/sbatch.1 at
    284c3b95f08a2dc2478499837b03355e1b9c5c75)."""
    if "\\" in str(runs_dir):
        raise CloudDDPError(
            f"{field}={str(runs_dir)!r}: sbatch reads a backslash in the log file's name as 'no %-replacements', "
            f"so every job would write the same file; choose a folder without a backslash."
        )
    return sbatch_value(field, str(runs_dir).replace("%", "%%") + "/%x-%j.out")


def directives(spec: JobSpec, settings: SlurmSettings, runs_dir: Path) -> list[str]:
    """The #SBATCH lines, in the order sbatch's man page lists the common ones."""
    runs_field = "output" if spec.output else "slurm.runs_dir"
    limit = slurm_walltime(settings, spec.runtime_limit(None))  # none given: the partition's
    options = [
        f"--job-name={sbatch_value('name', spec.name)}",
        *node_count(spec),
        *([f"--time={limit}"] if limit else []),
        f"--output={output_pattern(runs_dir, runs_field)}",
        f"--chdir={sbatch_value('source_dir', str(Path(spec.source_dir).resolve()))}",
    ]
    if settings.gpus_per_node:
        options.append(f"--gpus-per-node={settings.gpus_per_node}")
    if settings.cpus_per_task:
        options.append(f"--cpus-per-task={settings.cpus_per_task}")
    for flag in ("mem", "partition", "account", "qos"):
        if getattr(settings, flag):
            options.append(f"--{flag}={sbatch_value(f'slurm.{flag}', getattr(settings, flag))}")
    if settings.signal_seconds:
        options.append(f"--signal=B:USR1@{settings.signal_seconds}")
    if settings.requeue:
        options += ["--requeue", "--open-mode=append"]  # a requeued run appends to the same log
    if is_elastic(spec):
        options.append("--no-kill")  # a failed node does not end the allocation
    # Whole options the user wrote for sbatch, split by sbatch as they are; only a line break is refused.
    options += [check_directive_value(f"slurm.sbatch_args[{i}]", arg) for i, arg in enumerate(settings.sbatch_args)]
    lines = [f"#SBATCH {option}" for option in options]
    if not limit:  # a comment where --time would be: sbatch reads directives on to the first command
        lines.insert(1 + len(node_count(spec)), "# no --time: max_runtime not given, so the partition's limit applies")
    return lines


def step_command(spec: JobSpec, settings: SlurmSettings) -> str:
    """`srun ... cloudddp-launch ...`: one launcher per node; --label prefixes each line with its task."""
    if is_elastic(spec):  # the survivors of a lost node carry on (module docstring)
        srun = ["srun", "--no-kill", "--kill-on-bad-exit=0", "--wait=0", "--ntasks-per-node=1", "--label"]
    else:
        srun = ["srun", "--kill-on-bad-exit=1", "--ntasks-per-node=1", "--label"]
    if settings.container_image:
        srun += [
            f"--container-image={settings.container_image}",
            f"--container-workdir={Path(spec.source_dir).resolve()}",
        ]
        if settings.container_mounts:
            srun.append(f"--container-mounts={','.join(settings.container_mounts)}")
    extra = [*elastic_launcher_args(spec), *settings.launcher_args]  # the user's flags last: they win
    return quote([*srun, *launcher_words(spec, settings.launcher, settings.host_map, extra)])


def elastic_launcher_args(spec: JobSpec) -> list[str]:
    """torchrun's dynamic rendezvous for an elastic spec; the c10d store runs on the step's first node."""
    if not is_elastic(spec):
        return []
    args = [
        f"--nnodes={node_range(spec)}",
        f"--rdzv-backend={spec.rdzv_backend}",
        f"--max-restarts={spec.max_restarts}",
    ]
    if spec.rdzv_endpoint:
        args.append(f"--rdzv-endpoint={spec.rdzv_endpoint}")
    return args


def job_variables(spec: JobSpec, runs_dir: Path) -> list[str]:
    """Where the script finds data, writes the model and keeps checkpoints (CLOUDDDP_* as in every provider)."""
    plain, _ = split_environment(spec)
    lines = [f'export CLOUDDDP_RUN_DIR={shlex.quote(str(runs_dir))}/"$SLURM_JOB_NAME-$SLURM_JOB_ID"']
    lines.append('export CLOUDDDP_MODEL_DIR="$CLOUDDDP_RUN_DIR/model"')
    if spec.checkpoint:  # shared by reruns of the spec (resume); else this run's own folder
        lines += export_lines({"CLOUDDDP_CHECKPOINT_DIR": str(shared_folder(spec.checkpoint, "checkpoint", "slurm"))})
    else:
        lines.append('export CLOUDDDP_CHECKPOINT_DIR="$CLOUDDDP_RUN_DIR/checkpoints"')
    lines += export_lines(data_variables(spec, "slurm"))
    lines += export_lines(plain)
    lines.append('mkdir -p "$CLOUDDDP_MODEL_DIR"')
    if is_elastic(spec):  # each launcher records its exit code here; a requeued run starts with none
        lines += ['export CLOUDDDP_EXIT_DIR="$CLOUDDDP_RUN_DIR/exit"', 'rm -rf "$CLOUDDDP_EXIT_DIR"']
    return lines


# The step runs in the background so the batch shell can take USR1 and pass it on.
STEP_SUPERVISION = """step=$!
trap 'echo "cloudddp: USR1 (time limit or preemption ahead): passing it to the job step"; kill -USR1 "$step"' USR1
code=0
while :; do
  wait "$step" && code=0 || code=$?
  kill -0 "$step" 2>/dev/null || break  # wait returned early for the trap: keep waiting
done
"""
STATIC_EXIT = 'exit "$code"'
# srun's code is the highest of every task's, a lost node's too: ask the launchers' own records instead.
ELASTIC_EXIT = """finished=0; failed=0; lost=""
for ((node = 0; node < SLURM_JOB_NUM_NODES; node++)); do
  record=$(cat "$CLOUDDDP_EXIT_DIR/node-$node" 2>/dev/null || true)
  case "$record" in 0) finished=$((finished + 1)) ;; "") lost="$lost $node" ;; *) failed=$((failed + 1)) ;; esac
done
failed=$((failed + $(ls "$CLOUDDDP_EXIT_DIR" 2>/dev/null | grep -c '^unplanned-' || true)))
if [ "$code" != 0 ] && [ "$finished" -gt 0 ] && [ "$failed" = 0 ]; then
  echo "cloudddp: srun exited with $code, but node(s)${lost} were lost and the other $finished finished: the elastic job succeeded"
  code=0
fi
exit "$code"
"""


def render_sbatch(spec: JobSpec, settings: SlurmSettings, runs_dir: Path, secret: list[str]) -> SbatchRequest:
    """The script and how sbatch takes it; BatchProvider.render checked the spec and found runs_dir and secret."""
    lines = [
        "#!/bin/bash",
        f"# cloudddp job {spec.name!r}: {node_range(spec)} node(s), one cloudddp-launch per node. Submit: sbatch --parsable FILE",
        *directives(spec, settings, runs_dir),
        "set -euo pipefail",
        *activation_lines(settings.conda_env, settings.venv, settings.setup),
        *job_variables(spec, runs_dir),
        f"{step_command(spec, settings)} &",
        STEP_SUPERVISION + (ELASTIC_EXIT if is_elastic(spec) else STATIC_EXIT),
    ]
    script = "\n".join(lines)
    export_all = not any(arg.lstrip().startswith("--export") for arg in settings.sbatch_args)
    return SbatchRequest(script=script, runs_dir=str(runs_dir), secret_names=secret, export_all=export_all)
