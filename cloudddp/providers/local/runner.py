"""The detached process that runs one local job: starts every node, records the outcome.

Started by `LocalProvider.submit` in a session of its own, so the job outlives a closed
terminal and `cloudddp status/logs/cancel` work from anywhere. It reads the node
commands (with their environments, which may hold secrets) from stdin, never from a
file. `state.json` in the run folder is the record of truth:
{"state": ..., "runner_pid": ..., "nodes": {name: {"pid", "exit_code"}}, "exit_code"}.

A node that fails takes the job down: peers are given `PEER_GRACE` seconds to notice
(the launchers' fail-fast channel stops them within about 2 s), then stopped. The job's exit
code is the first failing node's, not that of a node stopped because of it. Which node that is comes
from the launchers' exit records (cloudddp/launcher/exit_record.py, in `exits/`): a node stopped by the
fail-fast channel names the node that caused it, and exits with its code tens of milliseconds later, often
within one poll of this runner, so the order the runner sees nodes end in cannot tell. In an elastic job
(`"elastic": true`) a lost node is not fatal: the others re-form, and the job succeeded when they did.
With `"interrupt_after": SECONDS` the job is interrupted and restarted once, as SageMaker's managed
spot training does (interruption.py).

`cloudddp cancel` signals the runner (SIGTERM). A cancel that comes before the runner has recorded its pid
leaves `CANCEL_REQUEST` in the run folder instead: the runner records its pid first and then reads the
request, before it starts any node, so one of the two always reaches it. Each node's process start time
(`start_time`) is recorded beside its pid: if the runner dies, `cancel` stops the nodes itself
(orphans.py) and must not signal another process that got the same pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cloudddp.cluster.oci import append_metadata
from cloudddp.launcher.exit_record import read_exit
from cloudddp.launcher.supervisor import die_with_parent
from cloudddp.providers.local.interruption import sync_down, sync_up
from cloudddp.providers.local.log_pump import finish_log_pumps, first_exception, start_log_pump

PEER_GRACE = 10.0
CANCEL_REQUEST = "cancel-requested"  # written by `cancel` into the run folder


def process_start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks since boot, /proc/PID/stat field 22): with the pid, names one process
    for good, since pids are reused. None where there is no /proc or no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        # The command name may hold spaces or parentheses: count the fields after the last ")".
        return int(stat[stat.rfind(b")") + 2 :].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def write_state(run_dir: Path, state: dict[str, Any]) -> None:
    tmp = run_dir / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, run_dir / "state.json")  # readers never see a half-written file


def copy_as_the_user(source: Path, target: Path, umask: int | None) -> None:
    """`source`'s files into `target`, made with the user's umask: the private run folder's 0700 and 0600 (this
    runner's umask is 077) must not follow the model into the user's own folder, as copytree's copystat made them."""
    previous = os.umask(0o077)
    os.umask(previous if umask is None else umask)
    try:
        for folder, _, files in os.walk(source):
            destination = target / Path(folder).relative_to(source)
            destination.mkdir(parents=True, exist_ok=True)
            for name in files:
                shutil.copyfile(Path(folder) / name, destination / name)
    finally:
        os.umask(previous)


class Runner:
    def __init__(self, run_dir: Path, job: dict[str, Any]) -> None:
        self.run_dir = run_dir
        self.exits = run_dir / "exits"  # each launcher's exit record (CLOUDDDP_EXIT_DIR)
        self.job = job
        self.seen_ended: dict[str, float] = {}  # node -> when this runner saw it end (time.time())
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.pumps: list[threading.Thread] = []  # one per node started: its output, masked, into its log
        self.stopping = False
        self.state: dict[str, Any] = {
            "state": "RUNNING",
            "launched": job.get("launched"),  # kept from the PENDING state: `latest` is the run launched last
            "runner_pid": os.getpid(),
            "runner_start_time": process_start_time(os.getpid()),
            "started": time.time(),
            "nodes": {},
        }

    def on_stop(self, signum: int, _frame: object) -> None:
        if self.stopping:
            return
        self.stopping = True
        self.state["state"] = "STOPPING"
        # Not the nodes' 143s, which would read as failures: the job was stopped (max_runtime sets its own reason).
        self.state.setdefault(
            "reason",
            "stopped on request (cloudddp cancel, or Ctrl-C, SIGTERM, SIGHUP or a closed output pipe on launch)",
        )
        write_state(self.run_dir, self.state)
        self.signal_nodes(signal.SIGTERM)

    def signal_nodes(self, sig: int) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, sig)

    def start_nodes(self) -> None:
        logs = self.run_dir / "logs"
        logs.mkdir(exist_ok=True)
        shutil.rmtree(self.exits, ignore_errors=True)  # a restart after an interruption: this round's records only
        for node in self.job["nodes"]:
            if self.stopping:  # cancelled while the nodes were being started: start no more
                break
            metadata = node["env"].get("CLUSTER_NODES_METADATA_FILE")
            process = subprocess.Popen(
                node["command"], cwd=node["cwd"], env={**os.environ, **node["env"], "CLOUDDDP_EXIT_DIR": str(self.exits)},
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=die_with_parent,  # a runner killed (kill -9, OOM) takes its nodes with it
                umask=self.job.get("umask", -1),  # the user's: the run folder's privacy is not imposed on the job
            )  # fmt: skip
            self.procs[node["name"]] = process
            assert process.stdout is not None
            self.pumps.append(start_log_pump(process.stdout, logs / f"{node['name']}.log", self.job.get("secrets", [])))
            pid = process.pid
            self.state["nodes"][node["name"]] = {"pid": pid, "start_time": process_start_time(pid), "exit_code": None}
            if metadata:
                append_metadata(Path(metadata), node["rank"])
        if self.stopping:  # a stop that came while a node was being started may have missed it
            self.signal_nodes(signal.SIGTERM)
        write_state(self.run_dir, self.state)

    def wait(self, deadline: float | None = None) -> bool:
        """Until every node has ended (True), or until the wall-clock `deadline` passes (False)."""
        first_failure: float | None = None
        while True:
            if deadline is not None and not self.stopping and time.time() > deadline:
                return False
            running = 0
            for name, proc in self.procs.items():
                code = proc.poll()
                if code is None:
                    running += 1
                    continue
                record = self.state["nodes"][name]
                if record["exit_code"] is None:
                    record["exit_code"] = code if code >= 0 else 128 - code
                    self.seen_ended[name] = time.time()
                    if code != 0 and first_failure is None and not self.job.get("elastic"):
                        first_failure = time.monotonic()  # which node failed first: `finish`, from the records
                    write_state(self.run_dir, self.state)
            if running == 0:
                return True
            if not self.stopping and time.time() - self.state["started"] > self.job.get("max_runtime", float("inf")):
                # As on the platforms: past max_runtime the job is stopped (SageMaker: MaxRuntimeExceeded).
                self.state["reason"] = f"max_runtime of {self.job['max_runtime']} s reached"
                self.on_stop(signal.SIGTERM, None)
            if first_failure is not None and time.monotonic() - first_failure > PEER_GRACE:
                self.signal_nodes(signal.SIGTERM)
                first_failure = float("inf")  # signal once; node launchers escalate themselves
            time.sleep(0.2)

    def stopped_by(self) -> dict[str, str]:
        """node -> the node whose failure (or loss) made the node's launcher stop, as its exit record says."""
        names = {node["rank"]: node["name"] for node in self.job["nodes"]}
        causes: dict[str, str] = {}
        for node in self.job["nodes"]:
            cause = names.get(read_exit(self.exits / f"node-{node['rank']}")[1])
            if cause and cause != node["name"]:
                causes[node["name"]] = cause
        return causes

    def ended_at(self, name: str) -> float:
        """When the node ended: its launcher's record is written as it ends; else (a killed node) when seen ended."""
        rank = next((node["rank"] for node in self.job["nodes"] if node["name"] == name), None)
        with contextlib.suppress(OSError):
            return (self.exits / f"node-{rank}").stat().st_mtime
        return self.seen_ended.get(name, float("inf"))

    def failures(self) -> tuple[list[str], list[str]]:
        """The failed nodes: those that failed on their own, first failure first; those stopped because of one."""
        causes = self.stopped_by()
        for name, cause in causes.items():
            self.state["nodes"][name]["stopped_by"] = cause
        failed = sorted((name for name, n in self.state["nodes"].items() if n["exit_code"] not in (0, None)),
                        key=self.ended_at)  # fmt: skip
        own = [name for name in failed if name not in causes]
        if not own:  # every record blames another node (one that did not fail?): keep every failure
            return failed, []
        return own, [name for name in failed if name in causes]

    def finish(self) -> int:
        finish_log_pumps(self.pumps)  # every line in the logs before they are read, and before the state says ended
        codes = [n["exit_code"] for n in self.state["nodes"].values()]
        failed = [c for c in codes if c not in (0, None)]
        own, stopped = self.failures()
        if own and own[0] in self.procs and not self.job.get("elastic"):
            self.state["first_failure"] = own[0]
        first = self.state.get("first_failure")
        exit_code = self.state["nodes"][first]["exit_code"] if first else (failed[0] if failed else 0)
        if self.stopping:
            self.state["state"] = "STOPPED"
            exit_code = exit_code or 143
        elif self.job.get("elastic") and 0 in codes:
            # torchrun's agents exit 0 only when the worker group finished: the survivors completed the
            # job, whatever happened to the nodes that were lost on the way.
            self.state["state"], exit_code = "SUCCEEDED", 0
            self.state["lost_nodes"] = [name for name, n in self.state["nodes"].items() if n["exit_code"] != 0]
            failed = []
        else:
            self.state["state"] = "FAILED" if failed else "SUCCEEDED"
        if failed and not self.state.get("reason"):
            own_codes = ", ".join(str(self.state["nodes"][name]["exit_code"]) for name in own)
            it = "it" if len(own) == 1 else "them"
            because = f" ({', '.join(stopped)} stopped because of {it})" if stopped else ""
            self.state["reason"] = f"node(s) {', '.join(own)} exited with code(s) {own_codes}{because}"
            log = self.run_dir / "logs" / f"{own[0]}.log"
            self.state["failure"] = {"node": own[0], "error": first_exception(log), "log": str(log)}
        self.state["exit_code"] = exit_code
        self.copy_output()
        self.state["ended"] = time.time()
        write_state(self.run_dir, self.state)
        return exit_code

    def copy_output(self) -> None:
        """The spec's `output`: node 0's model folder is copied there when the job has succeeded. A job that did
        not leaves it as it was: an earlier run's model there is neither overwritten by a half-trained one nor
        reported as this job's (this run's own model folder stays in the run folder)."""
        target, model = self.job.get("output"), self.job["nodes"][0].get("model_dir")
        if not target or not model or not Path(model).is_dir() or self.state["state"] != "SUCCEEDED":
            return
        try:
            copy_as_the_user(Path(model), Path(target), self.job.get("umask"))
            self.state["output"] = target
        except OSError as exc:
            self.state["reason"] = (
                self.state.get("reason", "") + f"; could not copy the model to {target}: {exc}"
            ).lstrip("; ")

    def run(self) -> int:
        try:
            return self.run_job()
        except OSError as exc:  # the run folder cannot be written (a full disk): stop the nodes, end
            self.signal_nodes(signal.SIGTERM)
            for proc in self.procs.values():
                proc.wait()  # each launcher escalates to SIGKILL after its own --grace-period
            print(f"cloudddp local runner: {exc}; stopped the nodes", file=sys.stderr, flush=True)
            return 1

    def run_job(self) -> int:
        signal.signal(signal.SIGTERM, self.on_stop)
        signal.signal(signal.SIGINT, self.on_stop)
        write_state(self.run_dir, self.state)  # runner_pid recorded: from here on `cancel` signals us
        if (self.run_dir / CANCEL_REQUEST).exists():  # a cancel that came before that: start nothing
            self.stopping = True
            self.state["reason"] = "cancelled before the nodes started"
        try:
            self.start_nodes()
        except Exception as exc:  # record why, stop what started, and never leave the job "RUNNING"
            self.signal_nodes(signal.SIGTERM)
            self.state["reason"] = f"could not start the nodes: {exc}"
            for name, proc in self.procs.items():
                self.state["nodes"][name]["exit_code"] = proc.wait()
            self.state["nodes"].setdefault("runner", {"pid": os.getpid(), "exit_code": 1})
        interrupt_after = self.job.get("interrupt_after")
        if interrupt_after and not self.wait(deadline=self.state["started"] + interrupt_after):
            self.interrupt_and_restart()
        self.wait()
        return self.finish()

    def interrupt_and_restart(self) -> None:
        """Managed spot's reclaim and restart (see interruption.py): SIGTERM every host, wait, start again."""
        self.state["state"] = "INTERRUPTED"
        write_state(self.run_dir, self.state)
        self.signal_nodes(signal.SIGTERM)
        for proc in self.procs.values():
            proc.wait()  # each launcher escalates to SIGKILL after its own --grace-period
        codes = {name: proc.returncode for name, proc in self.procs.items()}
        self.state.setdefault("interruptions", []).append({"at": time.time(), "exit_codes": codes})
        sync_down(self.job, sync_up(self.job, self.run_dir))
        if self.stopping:  # cancelled while interrupted: the job ends here
            return
        self.state["state"] = "RUNNING"
        self.procs.clear()
        self.start_nodes()


def main() -> int:
    run_dir = Path(sys.argv[1])
    job = json.loads(sys.stdin.read())
    return Runner(run_dir, job).run()


if __name__ == "__main__":
    sys.exit(main())
