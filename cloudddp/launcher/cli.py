"""`cloudddp-launch`: the program every node of a job runs.

    cloudddp-launch [options] [--] SCRIPT [ARGS...]
    cloudddp-launch [options] -m MODULE [ARGS...]

Reads the platform's environment, prints this node's plan, and runs torchrun for the
script under supervision. `--dry-run` prints the plan as JSON (a public interface,
documented in the README) and starts nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shlex
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cloudddp.cluster import platform_torchrun_args, platform_worker_environment, resolve_plan, sagemaker
from cloudddp.cluster.kubeflow import split_endpoint
from cloudddp.cluster.options import DetectOptions
from cloudddp.cluster.plan import (
    MAX_PORT,
    NPROC_WORDS,
    ClusterPlan,
    is_node_range,
    parse_int,
    parse_nnodes,
    parse_port,
    split_host_port,
)
from cloudddp.cluster.sagemaker import hyperparameter_args
from cloudddp.errors import CloudDDPError
from cloudddp.launcher import exit_barrier, metric_history
from cloudddp.launcher.command import (
    RDZV_CONF,
    Target,
    direct_argv,
    job_environment,
    local_process_count,
    resolve_nproc,
    torchrun_argv,
)
from cloudddp.launcher.diagnostics import check, rendezvous_failure, rendezvous_meeting, rendezvous_verdict
from cloudddp.launcher.exit_record import record_exit
from cloudddp.launcher.failure_reason import failing_rank_error, failure_text, node_error_message
from cloudddp.launcher.network import parse_host_map, resolves, wait_for_host
from cloudddp.launcher.peers import PeerWatch
from cloudddp.launcher.supervisor import Supervisor

RDZV_BACKENDS = ("static", "c10d", "etcd", "etcd-v2")


def seconds(text: str) -> float:
    """A duration option: finite and not negative (nan or inf would wait forever or never)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (finite, 0 or more)")
    return value


class LauncherParser(argparse.ArgumentParser):
    """argparse's parser, remembering each option's action (argparse keeps them in its private `_actions`),
    so the command line can be split at the script before argparse reads it (split_command_line)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.options: dict[str, argparse.Action] = {}  # before argparse's init, which adds --help
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options.update(dict.fromkeys(action.option_strings, action))
        return action


def build_parser() -> LauncherParser:
    parser = LauncherParser(
        prog="cloudddp-launch",
        description="Run a PyTorch DDP script on this node of a multi-node job: detect the platform "
        "(SageMaker, OCI, Kubeflow, Slurm, PBS, AWS Batch, SkyPilot), then start a supervised torchrun.",
        epilog="examples:\n"
        "  cloudddp-launch train.py --epochs 2\n"
        "  cloudddp-launch --dry-run train.py          # print this node's plan as JSON\n"
        "  cloudddp-launch --provider slurm --host-map n1=127.0.0.1 -m mypkg.train",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--provider", help="skip detection: sagemaker, oci, kubeflow, slurm, pbs, awsbatch, skypilot, standalone")
    add("--nnodes", help="number of nodes (or MIN:MAX for elastic rendezvous)")
    add("--node-rank", help="this node's rank")
    add("--nproc-per-node", help="processes per node: N, gpu, cpu, xpu or auto (default: visible GPUs, else 1)")
    add("--master-addr", help="rendezvous host (default: the platform's first host)")
    add("--master-port", help="rendezvous port")
    add("--local-addr", help="this node's address as other nodes reach it (torchrun --local-addr)")
    add("--rdzv-backend", choices=RDZV_BACKENDS, help="static (default), c10d, etcd or etcd-v2")
    add("--rdzv-endpoint", help="HOST:PORT for c10d/etcd rendezvous (default: master address and port)")
    add("--rdzv-id", help="rendezvous id shared by all nodes (default: the platform's job id)")
    add("--rdzv-timeout", help="seconds to wait for all nodes at rendezvous (a fraction is rounded up)")
    add("--max-restarts", help="worker group restarts before failing (default 0)")
    add("--torchrun-arg", action="append", default=[], metavar="ARG", help="pass ARG to torchrun (repeatable)")
    add("--host-map", default=None, help="NAME=ADDR,... for host names that don't resolve (env CLOUDDDP_HOST_MAP)")
    add("--metadata-timeout", type=seconds, default=600.0, help="OCI: seconds to wait for every node (600)")
    add("--instance-groups", help="SageMaker heterogeneous clusters: groups that join (default: all)")
    add("--dns-timeout", type=seconds, default=120.0, help="seconds to wait for the master to resolve (120)")
    add("--control-port", default=None,
        help="node 0's fail-fast port (default: master port + 1; 0 turns fail-fast off)")  # fmt: skip
    add("--grace-period", type=seconds, default=60.0, help="seconds between SIGTERM and SIGKILL on stop (60)")
    add("--hyperparameters-as-args", action="store_true",
        help="SageMaker: append hyperparameters.json to the script's arguments as --key value")  # fmt: skip
    add("--dry-run", action="store_true", help="print the plan as JSON and exit")
    add("--check", action="store_true",
        help="run on every node: DNS of every host, the master port from this node, clock skew against "
             "node 0; one verdict line per node, exit 1 on a problem; starts nothing (SCRIPT optional)")  # fmt: skip
    add("--check-window", type=seconds, default=60.0, help="--check: seconds node 0 waits for the others (60)")
    add("-m", "--module", action="store_true", help="run SCRIPT as a Python module")
    # Filled in by parse_command_line, not by argparse: everything after SCRIPT is the script's, verbatim.
    add("script", nargs="?", help="the training script (or module with -m); a leading -- ends the options")
    add("script_args", nargs=argparse.REMAINDER, help="arguments for the script, passed as they are")
    return parser


def option_takes_value(parser: LauncherParser, word: str) -> bool:
    """Whether the launcher option `word` (exact, or a unique prefix as argparse allows) takes a value."""
    options = parser.options
    if "=" in word or (not word.startswith("--") and len(word) > 2):
        return False  # --name=value, or -xVALUE: the value is in the word already
    matches = [name for name in options if name == word] or [name for name in options if name.startswith(word)]
    return len(matches) == 1 and options[matches[0]].nargs != 0


def split_command_line(parser: LauncherParser, argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the launcher's options, [SCRIPT, ARGS...]): SCRIPT is the first word that is no option or an
    option's value, or the word after a "--". Everything after SCRIPT goes to the script as it is, a "--"
    included, as torchrun does; argparse alone would drop the script's first "--"."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return list(argv[:index]), list(argv[index + 1 :])
        if not word.startswith("-") or word == "-":
            return list(argv[:index]), list(argv[index:])
        index += 2 if option_takes_value(parser, word) else 1
    return list(argv), []


def join_option_values(parser: LauncherParser, options: Sequence[str]) -> list[str]:
    """`--torchrun-arg --log-dir=/x` as `--torchrun-arg=--log-dir=/x`: argparse takes a value that starts with "-"
    for an option and stops ("expected one argument"), though split_command_line read it as the option's value."""
    joined: list[str] = []
    index = 0
    while index < len(options):
        word = options[index]
        value = options[index + 1] if index + 1 < len(options) else None
        if word.startswith("--") and value is not None and value.startswith("-") and option_takes_value(parser, word):
            joined.append(f"{word}={value}")
            index += 2
        else:
            joined.append(word)
            index += 1
    return joined


def parse_command_line(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = build_parser()
    options, program = split_command_line(parser, sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(join_option_values(parser, options))
    args.script, args.script_args = (program[0], program[1:]) if program else (None, [])
    return args


def apply_overrides(plan: ClusterPlan, args: argparse.Namespace) -> None:
    """Command-line options win over detected values; remember that they did."""
    if args.nnodes is not None:
        plan.set("nnodes", parse_nnodes(args.nnodes, "--nnodes"), "--nnodes")
    if args.node_rank is not None:
        plan.set("node_rank", parse_int(args.node_rank, "--node-rank", minimum=0), "--node-rank")
    if args.nproc_per_node is not None:
        value = args.nproc_per_node
        if value not in NPROC_WORDS:
            value = parse_int(value, "--nproc-per-node", minimum=1)
        plan.set("nproc_per_node", value, "--nproc-per-node")
    for name in ("master_addr", "local_addr", "rdzv_backend", "rdzv_endpoint", "rdzv_id"):
        if getattr(args, name) is not None:
            plan.set(name, getattr(args, name), "--" + name.replace("_", "-"))
    if args.master_port is not None:
        plan.set("master_port", parse_port(args.master_port, "--master-port"), "--master-port")
    if plan.rdzv_endpoint:
        # Every port, digits or not ("127.0.0.1:abc" ended in torchrun's traceback): as torch reads an endpoint.
        split_endpoint(plan.rdzv_endpoint, plan.sources.get("rdzv_endpoint", "the rendezvous endpoint"), prefix="")
    if args.max_restarts is not None:
        plan.set("max_restarts", parse_int(args.max_restarts, "--max-restarts", minimum=0), "--max-restarts")
    settle_rendezvous(plan)
    if not 0 <= plan.node_rank < plan.max_nodes:
        raise CloudDDPError(
            f"node rank {plan.node_rank} (from {plan.sources.get('node_rank', 'default')}) is out of range "
            f"for nnodes={plan.nnodes} (from {plan.sources.get('nnodes', 'default')})."
        )


def settle_rendezvous(plan: ClusterPlan) -> None:
    """A node range needs a dynamic rendezvous, and only a dynamic rendezvous has an endpoint of its own.

    torchrun's static handler takes MAX of MIN:MAX as the world size and waits for all of them
    (torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py, world_size = params.max_nodes): a
    range on the default backend gets c10d, a store on the master's port, as elastic jobs do (README).
    """
    nnodes_from = plan.sources.get("nnodes", "default")
    backend_from = plan.sources.get("rdzv_backend")
    if is_node_range(plan.nnodes) and plan.rdzv_backend == "static":
        if backend_from is not None:
            raise CloudDDPError(
                f"nnodes={plan.nnodes!r} (from {nnodes_from}) is an elastic range, but the rendezvous backend "
                f"is static (from {backend_from}), which waits for all {plan.max_nodes} nodes; "
                f"use --rdzv-backend c10d (or etcd-v2), or a fixed --nnodes N."
            )
        plan.set("rdzv_backend", "c10d", f"default (c10d, as nnodes from {nnodes_from} is a range)")
    if plan.rdzv_endpoint and plan.rdzv_backend == "static":
        # Kubeflow refuses PET_RDZV_ENDPOINT with a static backend the same way (cluster/kubeflow.py): the
        # static rendezvous meets at the master, so an endpoint beside it would be ignored or contradict it.
        host, port = split_host_port(plan.rdzv_endpoint)
        raise CloudDDPError(
            f"the rendezvous endpoint {plan.rdzv_endpoint!r} (from "
            f"{plan.sources.get('rdzv_endpoint', 'default')}) needs a dynamic rendezvous backend (c10d, etcd, "
            f"etcd-v2), but the backend is static (from {backend_from or 'default'}), which meets at the master "
            f"address and port; pass --master-addr {host}"
            + (f" --master-port {port}" if port else "")
            + " instead, or --rdzv-backend c10d."
        )


def make_target(args: argparse.Namespace, environ: Mapping[str, str]) -> Target:
    if args.script is None:
        raise CloudDDPError("no training script: cloudddp-launch [options] SCRIPT [ARGS...] (or -m MODULE).")
    script_args = list(args.script_args)  # as given, a leading "--" included (parse_command_line)
    if args.hyperparameters_as_args:
        script_args += hyperparameter_args(environ)
    if not args.module and not script_is_file(args.script):
        raise CloudDDPError(
            f"the training script {args.script!r} does not exist (looked in {os.getcwd()}). "
            f"Pass a path to a .py file, or -m MODULE for a module."
        )
    program = args.script
    if not args.module and program.startswith("-"):
        # torchrun starts each worker as `python -u SCRIPT ...` (torch/distributed/run.py, config_from_args),
        # where such a name would read as Python's own option: name the same file as ./SCRIPT.
        program = os.path.join(os.curdir, program)
    return Target(program=program, args=script_args, is_module=args.module)


def script_is_file(script: str) -> bool:
    """Whether SCRIPT is a file; a path that cannot be looked at (a folder without permission, a name too long) is
    an error naming it: pathlib's is_file() lets such an OSError out (Python 3.11 swallows only ENOENT, ENOTDIR,
    EBADF, ELOOP), which was a traceback, exit 1, and no exit record."""
    try:
        return Path(script).is_file()
    except OSError as exc:
        raise CloudDDPError(
            f"the training script {script!r} cannot be looked at ({exc.strerror or exc}; looked in {os.getcwd()}). "
            f"Pass a path to a readable .py file, or -m MODULE for a module."
        ) from None


def plan_for(args: argparse.Namespace, environ: Mapping[str, str]) -> ClusterPlan:
    return finish_plan(detected_plan(args, environ), args, environ)


def detected_plan(args: argparse.Namespace, environ: Mapping[str, str]) -> ClusterPlan:
    """The platform's plan with the command line's overrides, its host names as the job gives them."""
    groups = [g for g in (args.instance_groups or "").split(",") if g] or None
    options = DetectOptions(metadata_timeout=args.metadata_timeout, instance_groups=groups)
    plan = resolve_plan(environ, args.provider, options)
    apply_overrides(plan, args)
    return plan


def finish_plan(plan: ClusterPlan, args: argparse.Namespace, environ: Mapping[str, str]) -> ClusterPlan:
    """The host map applied (after the overrides: a --master-addr NAME is mapped too), processes per node a number,
    a rendezvous that numbers the nodes planned as MIN:MAX, a lone static node meeting on 127.0.0.1."""
    plan.map_hosts(host_map_of(args, environ))
    # Our default ("gpus-or-1") becomes a number here, so every printed plan (--check too) shows one.
    plan.set("nproc_per_node", resolve_nproc(plan.nproc_per_node, environ),
             plan.sources.get("nproc_per_node", "default"))  # fmt: skip
    if isinstance(plan.nnodes, int) and plan.rank_from_rendezvous():
        # The rendezvous numbers the nodes (a Workers-only PyTorchJob with a fixed PET_NNODES: the operator sets no
        # rank without a Master, envvar.go): every node would plan itself node 0, start the fail-fast channel as
        # node 0 and report ranks it does not know. As MIN:MAX it is planned as the rendezvous job it is.
        plan.set("nnodes", f"{plan.nnodes}:{plan.nnodes}", f"{plan.sources.get('nnodes', 'default')}, node ranks "
                 f"assigned by the {plan.rdzv_backend} rendezvous")  # fmt: skip
    if plan.nnodes == 1 and plan.rdzv_backend == "static" and not resolves(plan.master_addr):
        # torchrun would retry the name for ever (c10d "cannot be retrieved"), and a one-node job meets only
        # itself: Slurm node names, SageMaker's algo-1 outside SageMaker's network need not resolve.
        plan.set("master_addr", "127.0.0.1", f"loopback: {plan.master_addr!r} does not resolve, and one node "
                 f"meets only itself")  # fmt: skip
    return plan


def rdzv_timeout_of(args: argparse.Namespace) -> int | None:
    """--rdzv-timeout in whole seconds: torch reads the rendezvous timeouts with int() (static_tcp_rendezvous.py;
    dynamic_rendezvous.py get_as_int), so a fraction is rounded up; nan, inf and values <= 0 are refused."""
    raw = args.rdzv_timeout
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise CloudDDPError(
            f"--rdzv-timeout={raw!r} is not a positive, finite number of seconds; torchrun takes whole "
            f"seconds, so a fraction such as 0.5 is rounded up (to 1)."
        )
    return math.ceil(seconds)


def launcher_command() -> str:
    """This process's command line: what the toolkit names as the Command (it started the bootstrap, this)."""
    return shlex.join([sys.executable, *sys.argv])


def write_failure(failure_file: str | None, exit_code: int, message: str) -> None:
    """SageMaker shows the first 1024 characters of /opt/ml/output/failure as the job's FailureReason: written in the
    training toolkit's shape (ExecuteUserScriptError, ExitCode, ErrorMessage, Command; failure_reason.py), on every
    image, before the toolkit (which writes only where no file exists) could write a reason without the error."""
    if not failure_file:
        return
    try:
        Path(failure_file).parent.mkdir(parents=True, exist_ok=True)
        Path(failure_file).write_text(failure_text(exit_code, message, launcher_command()))
    except OSError as exc:
        print(f"cloudddp: could not write the failure reason to {failure_file}: {exc}", file=sys.stderr)


@dataclass
class Outcome:
    """What `main` needs to know about a run once it ended, however it ended."""

    node_rank: int | None = None
    planned: bool = False  # this node's plan was made: its failure_file says where a reason goes
    failure_file: str | None = None
    stopped_by: int | None = None  # the rank whose failure or loss made this node stop (fail-fast channel)


def run(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None,
        outcome: Outcome | None = None) -> int:  # fmt: skip
    args = parse_command_line(argv)
    outcome = outcome or Outcome()
    environ = dict(os.environ if environ is None else environ)
    if args.check:
        return run_check(args, environ)
    target = make_target(args, environ)
    under_torchrun = bool(environ.get("TORCHELASTIC_RUN_ID"))
    if under_torchrun:
        # torchrun already started this process per worker: don't nest another torchrun.
        command, plan, port = direct_argv(target), None, 0
    else:
        timeout = rdzv_timeout_of(args)
        plan = plan_for(args, environ)
        outcome.node_rank, outcome.planned, outcome.failure_file = plan.node_rank, True, plan.failure_file
        extra = [*platform_torchrun_args(plan), *args.torchrun_arg]  # the user's --rdzv-conf keys win
        inherited = environ.get("PET_RDZV_CONF", "")
        command = torchrun_argv(plan, target, extra_args=extra, rdzv_timeout=timeout, inherited_conf=inherited)
        port = control_port(plan, args, environ)
    if args.dry_run:
        report = asdict(plan) if plan else {"provider": "torchelastic", "under_torchrun": True}
        report["argv"] = command
        print(json.dumps(report, indent=2))
        return 0
    if plan is None:
        print(f"cloudddp: already under torchrun (TORCHELASTIC_RUN_ID set); running {target.program} directly",
              flush=True)  # fmt: skip
        return Supervisor(command, environ, grace_period=args.grace_period, workers_are_grandchildren=False).run()
    if not plan.participates:
        print(f"cloudddp: {plan.skip_reason}", flush=True)
        return 0
    print(plan.summary(), flush=True)
    if isinstance(plan.nnodes, str) or plan.nnodes > 1:
        wait_for_host(plan.master_addr, args.dns_timeout)
    environ = platform_worker_environment(plan, environ, os.getcwd())
    env = job_environment(plan, environ, local_process_count(plan.nproc_per_node, environ))
    return supervise(plan, command, env, port, args, environ, outcome)


def supervise(
    plan: ClusterPlan, command: list[str], env: dict[str, str], port: int, args: argparse.Namespace,
    environ: Mapping[str, str], outcome: Outcome,
) -> int:  # fmt: skip
    """Run torchrun with the fail-fast channel; when it fails, say why (missing nodes, rendezvous checks)."""
    with tempfile.TemporaryDirectory(prefix="cloudddp-launch-") as scratch:
        # torchrun's @record writes its own error here (workers get files of their own): read to tell a
        # rendezvous failure from a failed script. A path the user chose is left as it is.
        error_file = env.setdefault("TORCHELASTIC_ERROR_FILE", os.path.join(scratch, "torchrun-error.json"))
        if plan.failure_file and not keeps_log_files(args.torchrun_arg, env):
            # Each rank's stderr in a file too (torchrun --tee 2: the console keeps it, prefixed [default<rank>]:),
            # where the failure reason reads the failing rank's error when the script has no @record.
            env["PET_TEE"] = "2"
            env["PET_LOG_DIR"] = os.path.join(scratch, "torchelastic")
        if not keeps_log_files(args.torchrun_arg, env):
            # Else torchrun makes a /tmp/torchelastic_* folder (a worker error.json in it) that nothing removes:
            # one per node and run, thousands on a shared Slurm node or a laptop using the local provider
            # (torch 2.14.1: torch/distributed/elastic/multiprocessing/api.py, DefaultLogsSpecs, mkdtemp).
            # torchrun reads --log-dir from PET_LOG_DIR (torch/distributed/run.py, action=env; argparse_util.env).
            env["PET_LOG_DIR"] = os.path.join(scratch, "torchelastic")
        supervisor = Supervisor(command, env, grace_period=args.grace_period, prepare=torchrun_preparation(plan, env))
        peers = peer_watch(plan, port, supervisor)
        code = supervisor.run(on_start=peers.start if peers else None)
        failure = rendezvous_failure(error_file) if code != 0 else None
        rank_error = failing_rank_error(error_file, log_dir_of(args.torchrun_arg, env)) if code != 0 else None
    why = supervisor.abort_reason or f"torchrun exited with code {code}"
    if peers:
        peers.report_exit(code)
        if supervisor.abort_reason is not None:  # stopped because of that node, not failed on its own
            outcome.stopped_by = peers.stopped_by
        missing = peers.missing_report() if code != 0 else None
        if missing:  # a node that never came up: say which, not only that the rendezvous timed out
            print(missing, file=sys.stderr, flush=True)
        if code != 0 and failure is None and plan.node_rank != 0 and peers.master is None:
            # torchrun's rendezvous met (else its error says so): only the side channel failed. The reason stays
            # torchrun's exit (the script's code), and the log says node 0 may not know.
            verdict = diagnose_rendezvous(plan, args, environ, command, peers)
            print(f"cloudddp: this node never reached node 0's launcher on {plan.master_addr}:{port} (the "
                  f"fail-fast channel), so node 0 may not learn of this failure; checks from this node:\n{verdict}",
                  file=sys.stderr, flush=True)  # fmt: skip
    if failure:  # the nodes never met: run the checks and say why
        verdict = diagnose_rendezvous(plan, args, environ, command, peers)
        why = f"the rendezvous failed ({failure})"
        print(f"cloudddp: {why} on node {plan.node_rank}; checks from this node:\n{verdict}", file=sys.stderr,
              flush=True)  # fmt: skip
        why += f"; {verdict}"
    if code != 0:
        fallback = (f"cloudddp: {why} on node {plan.node_rank} ({socket.gethostname()}); see the failing node's log "
                    f"for its traceback.")  # fmt: skip
        own = rank_error if supervisor.abort_reason is None and failure is None else None  # else another node's
        write_failure(plan.failure_file, code, node_error_message(own, fallback, plan.node_rank))
    return code


def torchrun_preparation(plan: ClusterPlan, env: Mapping[str, str]) -> Callable[[], object] | None:
    """What the forked torchrun does before it runs (supervisor.py `prepare`)."""
    steps: list[Callable[[], object]] = []
    if plan.rdzv_backend != "static":
        # An elastic job's survivors would wait torchrun's 300 s exit barrier for a node lost after their last
        # collective: in the forked torchrun, the barrier is left once the nodes it waits for are known lost.
        steps.append(exit_barrier.install)
    history = metric_history.start(plan, env)
    if history is not None:  # each value of the job's metric definitions in the workers' output, into a file
        steps.append(functools.partial(metric_history.install, history))
    if not steps:
        return None
    return lambda: [step() for step in steps]


def log_dir_of(torchrun_args: Sequence[str], env: Mapping[str, str]) -> str | None:
    """torchrun's log folder: --log-dir (or --log_dir) among the user's torchrun arguments, else PET_LOG_DIR."""
    for arg in torchrun_args:
        for name in ("--log-dir=", "--log_dir="):
            if arg.startswith(name):
                return arg[len(name) :]
    return env.get("PET_LOG_DIR")


def keeps_log_files(torchrun_args: Sequence[str], env: Mapping[str, str]) -> bool:
    """True where the user chose torchrun's log folder or asked for the workers' output in files there
    (--log-dir, --redirects, --tee, as options or as torchrun's PET_* variables): that folder is theirs to keep."""
    named = ("--log-dir", "--log_dir", "--redirects", "--tee", "-r", "-t")
    return any(arg.startswith(named) for arg in torchrun_args) or any(
        env.get(name) for name in ("PET_LOG_DIR", "PET_REDIRECTS", "PET_TEE")
    )


def diagnose_rendezvous(
    plan: ClusterPlan, args: argparse.Namespace, environ: Mapping[str, str], command: list[str],
    peers: PeerWatch | None,
) -> str:  # fmt: skip
    """The DNS, TCP and clock verdict line for a node whose rendezvous failed."""
    conf = ",".join(arg.split("=", 1)[1] for arg in command if arg.startswith(RDZV_CONF))
    hosts_store = (plan.rdzv_backend == "static" and plan.node_rank == 0) or "is_host=true" in conf.split(",")
    if peers is None:
        no_clock = "elastic jobs have no side channel to node 0" if not isinstance(plan.nnodes, int) else (
            "the fail-fast channel is off")  # fmt: skip
    elif plan.node_rank == 0:
        no_clock = "this is node 0"
    else:
        no_clock = "node 0's launcher never answered"
    skew = peers.clock_skew if peers else None
    return rendezvous_verdict(plan, host_map_of(args, environ), hosts_store=hosts_store, clock_skew=skew,
                              no_clock=no_clock)  # fmt: skip


def host_map_of(args: argparse.Namespace, environ: Mapping[str, str]) -> dict[str, str]:
    return parse_host_map(args.host_map or environ.get("CLOUDDDP_HOST_MAP", ""),
                          "--host-map" if args.host_map else "CLOUDDDP_HOST_MAP")  # fmt: skip


def run_check(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """`--check`: this node's plan, then the network and clock checks (diagnostics.py); starts nothing."""
    detected = detected_plan(args, environ)
    named_host = split_host_port(detected.endpoint)[0]  # as the job names it, before --host-map
    plan = finish_plan(detected, args, environ)
    # No node knows its rank before the rendezvous: the endpoint's host serves, not every node as node 0. A job of
    # one node has only node 0, whatever the endpoint.
    numbered_later = plan.rank_from_rendezvous() and plan.max_nodes > 1
    meeting = rendezvous_meeting(plan, named_host, environ) if numbered_later else None
    print(plan.summary(), flush=True)
    code, verdict = check(plan, host_map_of(args, environ), args.check_window, meeting)
    print(verdict, flush=True)
    return code


def control_port(plan: ClusterPlan, args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """The fail-fast channel's port (0 = off): --control-port, CLOUDDDP_CONTROL_PORT, else master port + 1."""
    if not isinstance(plan.nnodes, int) or plan.nnodes < 2:
        return 0  # one node has no peers; elastic jobs reshape instead of failing fast
    for raw, what in ((args.control_port, "--control-port"), (environ.get("CLOUDDDP_CONTROL_PORT"), "CLOUDDDP_CONTROL_PORT")):  # fmt: skip
        if raw is not None and raw != "":
            return 0 if str(raw).strip() == "0" else parse_port(raw, what)
    if plan.master_port >= MAX_PORT:
        raise CloudDDPError(
            f"the fail-fast channel listens on the master port + 1, but the master port is {plan.master_port} "
            f"(from {plan.sources.get('master_port', 'default')}); pass --control-port PORT (or 0 to turn it off)."
        )
    return plan.master_port + 1


def peer_watch(plan: ClusterPlan, port: int, supervisor: Supervisor) -> PeerWatch | None:
    """The fail-fast channel between the nodes' launchers (fixed-size jobs; elastic ones reshape instead)."""
    if port == 0 or not isinstance(plan.nnodes, int):
        return None
    hosts = plan.hosts if plan.hosts and len(plan.hosts) == plan.nnodes else None  # in rank order
    return PeerWatch(plan.node_rank, plan.nnodes, plan.master_addr, port, plan.rdzv_id, supervisor.abort,
                     hosts=hosts)  # fmt: skip


def failure_file_after_error(outcome: Outcome, environ: Mapping[str, str]) -> str | None:
    """Where a launcher error's reason goes: the plan's failure file, else, before a plan existed, SageMaker's
    (SM_OUTPUT_DIR, else /opt/ml/output beside the config folder, as the toolkit and sagemaker.failure_file
    find it): bring-your-own images have no SM_OUTPUT_DIR, only the files."""
    if outcome.planned:
        return outcome.failure_file
    try:
        on_sagemaker = bool(environ.get("SM_OUTPUT_DIR")) or sagemaker.detect(environ)
        return sagemaker.failure_file(environ) if on_sagemaker else None
    except (OSError, CloudDDPError):  # an unreadable config folder: no reason file, the log still has the message
        return None


def main(argv: Sequence[str] | None = None) -> int:
    outcome = Outcome()
    try:
        code = run(argv, outcome=outcome)
    except CloudDDPError as exc:
        print(f"cloudddp-launch: error: {exc}", file=sys.stderr)
        failure_file = failure_file_after_error(outcome, os.environ)
        if failure_file:
            # On SageMaker the reason must reach FailureReason, not only the log.
            write_failure(failure_file, exc.exit_code, f"cloudddp-launch: {exc}")
        code = exc.exit_code
    except KeyboardInterrupt:
        # Ctrl-C outside torchrun's run (waiting for DNS or for the OCI metadata; during the run the
        # Supervisor handles SIGINT itself): one line, no traceback, 128 + SIGINT as a signalled launcher exits.
        print("cloudddp-launch: interrupted (SIGINT); exiting with 130.", file=sys.stderr, flush=True)
        code = 128 + signal.SIGINT
    except (SystemExit, Exception) as exc:
        # argparse's usage errors (SystemExit 2) and anything unforeseen (Python's traceback, exit 1) end this node
        # too: the exit record says so, or an elastic Slurm job would count the node as lost (exit_record.py).
        record_exit(os.environ, outcome.node_rank, exit_code_of(exc), stopped_by=outcome.stopped_by)
        raise
    record_exit(os.environ, outcome.node_rank, code, stopped_by=outcome.stopped_by)
    return code


def exit_code_of(exc: BaseException) -> int:
    """The interpreter's exit code for an exception that leaves `main`: SystemExit's own, else 1."""
    if not isinstance(exc, SystemExit):
        return 1
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else 1  # sys.exit("message") prints it and exits 1
