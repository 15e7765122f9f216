"""`--provider local`: N simulated nodes on this machine, DDP over 127.0.0.1.

Each node is a `cloudddp-launch` process under the emulated platform's environment
(see `layout.py`); a detached runner (`runner.py`) starts them and records the outcome
in the run folder `<runs_dir>/<name>-<timestamp>/`, which holds the rendered request,
one log per node and the artifacts (`model/` is node 0's model folder).

`latest` is the run launched last: `launched` (time.time_ns() at launch) in state.json, never its
modification time (the runner rewrites state.json whenever a node ends).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cloudddp.cluster.environment import EmulatedNode
from cloudddp.elastic import is_elastic
from cloudddp.errors import CloudDDPError
from cloudddp.launcher.supervisor import is_running
from cloudddp.providers.base import FINISHED_STATES, JOB_STATES, JobEvent, JobHandle, JobRequest, JobStatus, Provider
from cloudddp.providers.local import LocalSettings
from cloudddp.providers.local.console_fold import ConsoleFold
from cloudddp.providers.local.elastic import check_elastic_emulation, elastic_launcher_args, share_node0_folders
from cloudddp.providers.local.entry_module import require_module
from cloudddp.providers.local.events import run_events
from cloudddp.providers.local.layout import node_layouts
from cloudddp.providers.local.orphans import is_same_process, live_nodes, stop_orphaned_nodes
from cloudddp.providers.local.runner import CANCEL_REQUEST, write_state
from cloudddp.providers.log_tail import folder_lines
from cloudddp.redact import redact_text

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec


def free_port() -> int:
    """A free master port whose neighbour is free too: the launcher's fail-fast channel listens on the master
    port + 1 (launcher/cli.py), and an ephemeral port's neighbour is often some other connection's."""
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
            if port == 65535:
                continue
            with socket.socket() as neighbour, contextlib.suppress(OSError):
                neighbour.bind(("127.0.0.1", port + 1))
                return port
    raise CloudDDPError("found no two free neighbouring ports on 127.0.0.1 for the local run's rendezvous")


def unused_name(runs_dir: Path, name: str) -> str:
    """`name`, or `name-2`, `name-3`... when a run folder of that name exists (two launches in one second)."""
    candidate, number = name, 1
    while (runs_dir / candidate).exists():
        number += 1
        candidate = f"{name}-{number}"
    return candidate


def shown(value: str, most: int = 120) -> str:
    """`value` quoted for a message, its middle left out when it is long (a 5000-character run id)."""
    if len(value) <= most:
        return repr(value)
    return f"{value[: most // 2] + '...' + value[-20:]!r} ({len(value)} characters)"


def has_state(folder: Path) -> bool:
    """True when `folder` holds a state.json; False for a path this file system cannot even look up."""
    try:
        return (folder / "state.json").is_file()
    except (OSError, ValueError):  # a name too long (ENAMETOOLONG), a NUL byte
        return False


def launch_order(run_dir: Path) -> tuple[int, str]:
    """When the run was launched (ns since the epoch), then its name to break a tie. Without `launched` in
    state.json (a run from before it was recorded, or a damaged state file): request.yaml's mtime, written once
    at launch. A damaged run still counts: `latest` must never fall back to an older run (and cancel it)."""
    launched = None
    with contextlib.suppress(OSError, ValueError):
        state = json.loads((run_dir / "state.json").read_text())
        launched = state.get("launched") if isinstance(state, dict) else None
    if not isinstance(launched, int):
        for written_once in (run_dir / "request.yaml", run_dir / "state.json"):
            with contextlib.suppress(OSError):
                launched = written_once.stat().st_mtime_ns
                break
    return (launched if isinstance(launched, int) else 0, run_dir.name)


def failure_text(failure: Any) -> str:
    """The failing node's own error and its log, after the reason: what the user reads first about a failure."""
    if not isinstance(failure, dict) or not failure.get("log"):
        return ""
    error = f": {failure['error']}" if failure.get("error") else ""
    return f"{error} (its log: {failure['log']})"


def full_disk(run_dir: Path) -> str:
    """Why a runner may have died where its run folder lives: ": the file system ... is full", or ""."""
    try:
        stats = os.statvfs(run_dir)
    except OSError:
        return ""
    if stats.f_bavail * stats.f_frsize >= FULL_DISK_BYTES:
        return ""
    return f": the file system holding {run_dir} is full ({stats.f_bavail * stats.f_frsize} bytes free)"


FULL_DISK_BYTES = 1 << 20  # under this much free space the runner cannot record a node's end
RUN_STATES = (*JOB_STATES, "INTERRUPTED")  # INTERRUPTED: a managed-spot emulation between its two rounds
# How long after launch a run may have no runner.pid: `submit` writes it right after starting the runner.
RUNNER_START_GRACE = 60.0


def state_damage(state: Any) -> str | None:
    """What is wrong with a parsed state.json, or None when it has a run state's shape (runner.write_state)."""
    if not isinstance(state, dict):
        return f"a JSON {type(state).__name__}, not an object"
    if state.get("state") not in RUN_STATES:
        return f"its state is {state.get('state')!r}, not one of {', '.join(RUN_STATES)}"
    nodes = state.get("nodes", {})
    if not isinstance(nodes, dict) or not all(isinstance(record, dict) for record in nodes.values()):
        return "its nodes are not a mapping of node name to record"
    for field in ("runner_pid", "launched", "exit_code"):
        if state.get(field) is not None and not isinstance(state[field], int):
            return f"its {field} is {state[field]!r}, not a number"
    return None


def node_label(name: str, record: dict[str, Any], recorded: str, orphans: dict[str, int] | None) -> str:
    """A node's line in `status`: its exit code, "running", or "ended (exit code unknown)" where the runner that
    would have read the code is gone (`orphans`: the nodes still running then) or the run ended without it."""
    if record.get("exit_code") is not None:
        # A node the fail-fast channel stopped exits with the failing node's code: say it did not fail itself.
        cause = f" (stopped because {record['stopped_by']} failed)" if record.get("stopped_by") else ""
        return f"exit {record['exit_code']}{cause}"
    if recorded in FINISHED_STATES or (orphans is not None and name not in orphans):
        return "ended (exit code unknown)"
    return "running"


def _is_uri(value: str) -> bool:
    return "://" in value


MOST_LOCAL_PROCESSES = 64
# The local provider's own limit for a job without max_runtime (spec.runtime_limit): 24 h, as before it was a rule.
LOCAL_MAX_RUNTIME = 24 * 3600


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def check_process_count(spec: JobSpec) -> None:
    """Every emulated node's processes run on this machine: a typo like --nodes 500 would start hundreds of
    process groups (and --nodes 100000 ran out of memory rendering their host lists)."""
    processes = spec.nodes * (spec.nproc_per_node if isinstance(spec.nproc_per_node, int) else 1)
    most = max(MOST_LOCAL_PROCESSES, 4 * available_cores())
    if processes > most:
        raise CloudDDPError(
            f"nodes={spec.nodes} x nproc_per_node={spec.nproc_per_node or 1} is {processes} training processes on "
            f"this machine; the local emulation takes at most {most} (4 per core, at least {MOST_LOCAL_PROCESSES}). "
            f"Use fewer nodes, or a cluster provider."
        )


def make_folder(folder: Path, field: str) -> None:
    """FOLDER as a folder (made if missing), or a CloudDDPError naming FIELD."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):  # writable, not just there (a read-only mount, another owner)
            pass
    except OSError as exc:
        reason = "it is a file" if folder.is_file() else (exc.strerror or str(exc))
        raise CloudDDPError(f"{field}: {str(folder)!r} cannot be used as a folder: {reason}.") from None


@dataclass
class LocalNode:
    """One emulated node as rendered: its platform layout and the command that starts it."""

    layout: EmulatedNode
    env: dict[str, str]
    launcher: list[str]  # python -m cloudddp.launcher
    launcher_options: list[str]  # the emulation's flags, then --nproc-per-node
    program: list[str]  # the script (or -m module) and its arguments
    cwd: Path
    inputs: dict[str, Path]  # channel -> the local data that appears in the node's channel folder

    def argv(self, master_port: int | None = None) -> list[str]:
        """The node's command; `submit` adds the master port it picked (render does not bind ports)."""
        port = [f"--master-port={master_port}"] if master_port else []
        return [*self.launcher, *port, *self.launcher_options, *self.program]

    def to_document(self, master_port: int | None = None) -> dict[str, Any]:
        document = self.layout.to_dict()
        document["env"] = self.env
        document.update(command=self.argv(master_port), cwd=str(self.cwd))
        document["inputs"] = {channel: str(path) for channel, path in self.inputs.items()}
        return document

    def prepare(self, link_inputs: bool, checkpoint: Path | None) -> None:
        """The node's folders and files, its input channels and checkpoint folder, before it starts."""
        self.layout.write_files()
        for channel, target in self.layout.channels.items():
            source = self.inputs[channel]
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir() and link_inputs:
                target.symlink_to(source, target_is_directory=True)
            elif source.is_dir():
                shutil.copytree(source, target)
            else:  # a channel is a folder on every platform: a single file goes in one, linked or copied
                target.mkdir(parents=True, exist_ok=True)
                if link_inputs:
                    (target / source.name).symlink_to(source)
                else:
                    shutil.copy2(source, target)
        ckpt = self.layout.checkpoint_dir
        if checkpoint and ckpt:
            # Stands in for the platform's checkpoint sync (SageMaker: CheckpointConfig.S3Uri).
            checkpoint.mkdir(parents=True, exist_ok=True)
            if ckpt.is_dir() and not any(ckpt.iterdir()):
                ckpt.rmdir()
            ckpt.symlink_to(checkpoint, target_is_directory=True)


@dataclass
class LocalRequest:
    """The local provider's request: the run folder and every node, as `--dry-run` prints it."""

    run_dir: Path
    emulate: str
    checkpoint: Path | None
    output: Path | None
    max_runtime: int
    master_port: int | None
    link_inputs: bool
    nodes: list[LocalNode]
    elastic: bool = False  # a node's loss does not end the job: the others re-form (providers/local/elastic.py)
    interrupt_after: float | None = None  # managed spot's interruption and restart (providers/local/interruption.py)

    def to_document(self, master_port: int | None = None) -> dict[str, Any]:
        """The dry run's `request:`; with `master_port`, what the runner is given."""
        return {
            "run_dir": str(self.run_dir),
            "emulate": self.emulate,
            "checkpoint": str(self.checkpoint) if self.checkpoint else None,
            "output": str(self.output) if self.output else None,
            "max_runtime": self.max_runtime,
            "master_port": self.master_port,
            "link_inputs": self.link_inputs,
            "elastic": self.elastic,
            "interrupt_after": self.interrupt_after,
            "nodes": [node.to_document(master_port) for node in self.nodes],
        }


def render_node(spec: JobSpec, layout: EmulatedNode, threads: int, job_name: str) -> LocalNode:
    options = [*layout.launcher_args, *elastic_launcher_args(spec, layout, job_name)]
    if spec.nproc_per_node is not None:
        options.append(f"--nproc-per-node={spec.nproc_per_node}")
    # A script named like an option follows "--", as the Slurm provider writes it (batch/shell.py).
    program = ["-m", spec.entry_point] if spec.module else (["--"] if spec.entry_point.startswith("-") else [])
    program += [] if spec.module else [spec.entry_point]
    # SageMaker's toolkit passes hyperparameters itself (from hyperparameters.json); elsewhere we do.
    program += list(spec.args) if spec.local.emulate == "sagemaker" else spec.script_args()
    env = {**spec.environment, **layout.env}
    env.setdefault("OMP_NUM_THREADS", str(threads))
    return LocalNode(
        layout=layout, env=env, launcher=[sys.executable, "-m", "cloudddp.launcher"], launcher_options=options,
        program=program, cwd=Path(spec.source_dir).resolve(),
        inputs={channel: Path(where).resolve() for channel, where in spec.inputs.items()},
    )  # fmt: skip


class LocalProvider(Provider):
    name = "local"

    def __init__(self, runs_dir: str | Path | None = None) -> None:
        self.runs_dir_override = Path(runs_dir) if runs_dir else None

    # -- render -------------------------------------------------------------------------
    def runs_dir(self, spec: JobSpec | None = None) -> Path:
        if self.runs_dir_override:
            return self.runs_dir_override
        # A runs_dir the spec sets (--runs-dir, Estimator(runs_dir=...)) wins; else $CLOUDDDP_RUNS_DIR, which
        # status/logs/cancel read too, so a launch lands where `status latest` looks.
        if spec is not None and "runs_dir" in spec.local.model_fields_set:
            return Path(spec.local.runs_dir)
        return Path(os.environ.get("CLOUDDDP_RUNS_DIR") or LocalSettings().runs_dir)

    def validate(self, spec: JobSpec) -> None:
        spec.require_source()
        if spec.module:
            require_module(spec.entry_point, Path(spec.source_dir).resolve(), spec.environment)
        check_elastic_emulation(spec)
        check_process_count(spec)
        if spec.local.interrupt_after and spec.local.emulate != "sagemaker":
            raise CloudDDPError(
                f"local.interrupt_after={spec.local.interrupt_after:g} emulates SageMaker's managed spot "
                f"interruption; it needs --emulate sagemaker (got {spec.local.emulate!r})."
            )
        for channel, where in spec.inputs.items():
            if _is_uri(where):
                raise CloudDDPError(
                    f"inputs.{channel}={where!r}: the local provider reads local folders only; "
                    f"download the data first or run on the cloud provider."
                )
            if not Path(where).exists():
                raise CloudDDPError(f"inputs.{channel}={where!r} does not exist.")
        for name in ("output", "checkpoint"):
            where = getattr(spec, name)
            if where and _is_uri(where):  # as a path, s3://b/x became the folder ./s3:/b/x (and a URL lost its //)
                raise CloudDDPError(
                    f"{name}={redact_text(where)!r}: the local provider writes the {name} to a local folder; give a "
                    f"folder, or leave it out (the run folder keeps it), and copy it to the URI afterwards."
                )

    def render(self, spec: JobSpec) -> JobRequest[LocalRequest]:
        self.validate(spec)
        job_name = unused_name(self.runs_dir(spec), f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}")
        run_dir = (self.runs_dir(spec) / job_name).resolve()
        local_procs = spec.nproc_per_node if isinstance(spec.nproc_per_node, int) else 1
        # Every simulated node shares this machine's cores: split them, don't oversubscribe.
        threads = max(1, available_cores() // (spec.nodes * local_procs))
        request = LocalRequest(
            run_dir=run_dir, emulate=spec.local.emulate,
            checkpoint=Path(spec.checkpoint).resolve() if spec.checkpoint else None,
            output=Path(spec.output).resolve() if spec.output else None,
            max_runtime=spec.runtime_limit(LOCAL_MAX_RUNTIME), master_port=spec.local.master_port, link_inputs=spec.local.link_inputs,
            nodes=[render_node(spec, layout, threads, job_name) for layout in node_layouts(spec, run_dir, job_name)],
            elastic=is_elastic(spec), interrupt_after=spec.local.interrupt_after,
        )  # fmt: skip
        if request.elastic:
            share_node0_folders(request.nodes)
        return JobRequest(provider=self.name, name=job_name, spec=spec, request=request)

    # -- submit -------------------------------------------------------------------------
    def submit(self, job: JobRequest[LocalRequest]) -> JobHandle:
        """Create the run folder and the nodes' files, then hand the rendered nodes to a detached runner."""
        request = job.request
        run_dir = request.run_dir
        # The user's folders first: a checkpoint or output that cannot be a folder fails before anything is written.
        for field, folder in (("checkpoint (--checkpoint)", request.checkpoint), ("output (--output)", request.output)):
            if folder:
                make_folder(folder, field)
        make_folder(run_dir.parent, "the runs folder (--runs-dir)")
        try:
            run_dir.mkdir(mode=0o700)  # only its owner reads a run (a SageMaker emulation's hyperparameters.json)
        except FileExistsError:
            raise CloudDDPError(
                f"the run folder {run_dir} appeared after rendering (another launch?); launch again."
            ) from None
        launched = time.time_ns()  # what `latest` goes by: the run launched last
        user_umask = os.umask(0o077)  # every file of the run (the runner's too) is its owner's alone
        try:
            self.write_run_folder(job, launched)
            runner = subprocess.Popen(
                [sys.executable, "-m", "cloudddp.providers.local.runner", str(run_dir)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=open(run_dir / "runner.log", "ab"),  # noqa: SIM115
                start_new_session=True,
            )  # fmt: skip
            (run_dir / "runner.pid").write_text(str(runner.pid))
        except OSError as exc:
            shutil.rmtree(run_dir, ignore_errors=True)  # no half-written run for `status` or `latest` to find
            raise CloudDDPError(f"cannot prepare the run folder {run_dir}: {exc}") from None
        finally:
            os.umask(user_umask)
        assert runner.stdin is not None
        # The environments and the secret values the runner masks in the logs go through a pipe, never a file.
        document = {**request.to_document(request.master_port or free_port()), "launched": launched,
                    "secrets": job.secrets(), "umask": user_umask}  # fmt: skip
        runner.stdin.write(json.dumps(document).encode())
        runner.stdin.close()
        return JobHandle(provider=self.name, job_id=str(run_dir), details={"run_dir": str(run_dir), "pid": runner.pid})

    def write_run_folder(self, job: JobRequest[LocalRequest], launched: int) -> None:
        """The nodes' folders and files, the dry run itself and the PENDING state (`launched`: time.time_ns())."""
        request, run_dir = job.request, job.request.run_dir
        for node in request.nodes:
            node.prepare(request.link_inputs, request.checkpoint)
        # to_yaml hides the job's secrets (variables, hyperparameters, a script's `--api-key=...`), as --dry-run does.
        (run_dir / "request.yaml").write_text(job.to_yaml())
        write_state(run_dir, {"state": "PENDING", "launched": launched, "nodes": {}})
        model = request.nodes[0].layout.model_dir
        if model:
            (run_dir / "model").symlink_to(model, target_is_directory=True)

    # -- follow-up calls ----------------------------------------------------------------
    def find_run(self, job_id: str) -> Path:
        """A run folder from its path or its name under the runs folder; "latest": the run launched last."""
        candidates = [self.latest_run()] if job_id == "latest" else [Path(job_id), self.runs_dir() / job_id]
        for candidate in candidates:
            if candidate is not None and has_state(candidate):
                return candidate
        raise CloudDDPError(
            f"no local run {shown(job_id)}: looked for a run folder with state.json in {self.runs_dir()}."
        )

    def latest_run(self) -> Path | None:
        """The run launched last (`launched` in state.json), whatever was written since."""
        try:
            folders = [folder for folder in self.runs_dir().iterdir() if has_state(folder)]
        except OSError:
            return None
        return max(folders, key=launch_order) if folders else None

    def read_state(self, run_dir: Path) -> dict[str, Any]:
        """state.json, checked for shape. Written only by replacing the file whole (runner.write_state), so a
        damaged one was damaged from outside (a full disk, an editor): one paragraph, never a traceback."""
        try:
            state = json.loads((run_dir / "state.json").read_text())
            damage = state_damage(state)
        except (OSError, ValueError) as exc:
            damage = f"cannot be read: {exc}"
        if damage:
            raise CloudDDPError(
                f"the local run {run_dir.name} has a damaged state file, {run_dir / 'state.json'}: {damage}. Its "
                f"status is unknown; `cloudddp cancel {run_dir}` still stops its runner if that is running."
            )
        return state  # type: ignore[no-any-return]

    def runner_alive(self, run_dir: Path, state: dict[str, Any]) -> bool:
        """True while the run's detached runner runs, or is still being started (no pid recorded anywhere yet,
        within RUNNER_START_GRACE of the launch)."""
        if state.get("runner_pid"):
            return is_same_process(state["runner_pid"], state.get("runner_start_time"), b"local.runner")
        try:
            return is_running(int((run_dir / "runner.pid").read_text()))
        except FileNotFoundError:  # `submit` writes it right after starting the runner; later, it never started
            launched = state.get("launched")
            return isinstance(launched, int) and time.time() - launched / 1e9 < RUNNER_START_GRACE
        except (OSError, ValueError):
            return False

    def status(self, job_id: str) -> JobStatus:
        run_dir = self.find_run(job_id)
        state = self.read_state(run_dir)
        current = state["state"]
        orphans: dict[str, int] | None = None  # the nodes still running, where no runner watches them
        if current not in FINISHED_STATES and not self.runner_alive(run_dir, state):
            started = state.get("runner_pid") or (run_dir / "runner.pid").exists()
            reason = "the local runner process died" if started else "the local runner never started"
            current, state["reason"], orphans = "FAILED", reason + full_disk(run_dir), live_nodes(state)
        nodes = {name: node_label(name, record, state["state"], orphans)
                 for name, record in state.get("nodes", {}).items()}  # fmt: skip
        return JobStatus(
            job_id=str(run_dir), state=current, reason=state.get("reason", "") + failure_text(state.get("failure")),
            exit_code=state.get("exit_code"),
            nodes=nodes, artifacts=self.artifacts(run_dir, state, current),
        )  # fmt: skip

    def events(self, job_id: str) -> list[JobEvent]:
        run_dir = self.find_run(job_id)
        return run_events(run_dir, self.read_state(run_dir))

    def dry_run(self, job_id: str) -> str | None:
        """request.yaml: written at submit by the same to_yaml as the dry run (secrets masked)."""
        try:
            return (self.find_run(job_id) / "request.yaml").read_text().rstrip()
        except OSError:
            return None

    def artifacts(self, run_dir: Path, state: dict[str, Any], current: str) -> str | None:
        """Where this job's finished model is: only a job that succeeded has one (a failed job's --output may
        hold an earlier run's model, which must not pass for this job's)."""
        if current != "SUCCEEDED":
            return None
        return state.get("output") or str(run_dir / "model")

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        """Every line of every node's log, as written (`cloudddp logs`)."""
        for node, line in self.node_lines(self.find_run(job_id), follow):
            yield f"[{node}] {line}"

    def console(self, job_id: str, full: bool = False) -> Iterator[str]:
        """What `launch` prints while it follows the job: its nodes' lines with each traceback folded into its
        exception line and torchrun's failure and stop reports left to the logs (console_fold.py); `full`: every
        line, as `logs --follow` prints them."""
        if full:
            yield from self.logs(job_id, follow=True)
            return
        run_dir = self.find_run(job_id)
        fold = ConsoleFold(run_dir / "logs")
        for node, line in self.node_lines(run_dir, follow=True):
            yield from fold.feed(node, line)
        yield from fold.end()

    def node_lines(self, run_dir: Path, follow: bool) -> Iterator[tuple[str, str]]:
        """(node, line) for each line of the nodes' logs; with `follow`, until the job has ended."""
        return folder_lines(run_dir / "logs", lambda: not follow or self.status(str(run_dir)).done, 0.2)

    def cancel(self, job_id: str) -> None:
        """Stop the run: SIGTERM to its runner, which stops the nodes; a runner that has not recorded its pid yet
        reads the cancel request before it starts any node; a dead runner's nodes are stopped here."""
        run_dir = self.find_run(job_id)
        try:
            state = self.read_state(run_dir)
        except CloudDDPError:
            return self.cancel_damaged(run_dir)
        self.refuse_if_ended(run_dir, state)
        try:
            # Before the state is read again: a runner that has not recorded its pid by then reads this later.
            (run_dir / CANCEL_REQUEST).touch()
        except OSError as exc:
            raise CloudDDPError(f"cannot cancel the local run {run_dir}: {exc}") from None
        state = self.read_state(run_dir)
        self.refuse_if_ended(run_dir, state)
        if self.runner_alive(run_dir, state):
            if state.get("runner_pid"):
                with contextlib.suppress(ProcessLookupError):  # it has just ended by itself
                    os.kill(state["runner_pid"], signal.SIGTERM)
            return
        state = self.read_state(run_dir)  # the runner may have ended the run just now
        self.refuse_if_ended(run_dir, state)
        stop_orphaned_nodes(run_dir, state)

    def cancel_damaged(self, run_dir: Path) -> None:
        """Cancel a run whose state.json is damaged: its runner (runner.pid) still knows its nodes and stops them
        (and writes the state again). Without a running runner nothing is known to stop: an error, not a claim."""
        try:
            pid = int((run_dir / "runner.pid").read_text())
        except (OSError, ValueError):
            pid = 0
        if is_same_process(pid, None, b"local.runner"):
            with contextlib.suppress(OSError):
                (run_dir / CANCEL_REQUEST).touch()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            return
        raise CloudDDPError(
            f"cannot cancel the local run {run_dir.name}: its state file {run_dir / 'state.json'} is damaged and its "
            f"runner is not running (runner.pid: {pid or 'missing or unreadable'}), so no node of it is known to "
            f"stop; if any still runs, stop it by hand."
        )

    def refuse_if_ended(self, run_dir: Path, state: dict[str, Any]) -> None:
        if state.get("state") in FINISHED_STATES:
            raise CloudDDPError(f"the local run {run_dir.name} already ended ({state['state']}); nothing to stop.")
