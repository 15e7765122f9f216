"""SIGTERM and SIGHUP to `cloudddp launch` (local provider) stop the job as Ctrl-C does.

What the user cares about: `timeout 600 cloudddp launch ...`, a CI job's cancel, `kill PID` (SIGTERM) or a
closed terminal (SIGHUP) must not leave the nodes training on until max_runtime (24 h): every process of the
job ends, state.json says STOPPED, and the exit code is 128 + the signal. They used to end `launch` at once
(Python's default action) with every launcher, torchrun and worker left running and the state RUNNING.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from faults.jobs import alive, job_processes, state
from helpers import PYTHON, REPO, SOURCES, clean_env

CHECK = str(SOURCES / "allreduce_check.py")
# As a login shell starts `launch`: both signals at their default action (a test runner may ignore SIGHUP).
CLI_WITH_DEFAULT_SIGNALS = [
    "-c",
    "import signal; signal.signal(signal.SIGTERM, signal.SIG_DFL); signal.signal(signal.SIGHUP, signal.SIG_DFL); "
    "from cloudddp.console import main; main()",
]


def every_job_process(run: Path) -> list[int]:
    """The runner, each node's launcher and everything below it (torchrun, the workers), from /proc."""
    return [int(state(run)["runner_pid"]), *job_processes(run)]


def kill_all(proc: subprocess.Popen[str], pids: list[int]) -> None:
    """`launch` and the job's processes, whatever state a failed test left them in."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_to_launch_stops_every_node(tmp_path: Path, sig: signal.Signals) -> None:
    out, runs = tmp_path / "out", tmp_path / "runs"
    proc = subprocess.Popen(
        [PYTHON, *CLI_WITH_DEFAULT_SIGNALS, "launch", "--nodes", "2", "--runs-dir", str(runs),
         CHECK, "--", "--out-dir", str(out), "--sleep", "300"],
        cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    before: list[int] = []
    try:
        deadline = time.monotonic() + 180
        # Both ranks all-reduced: every launcher, torchrun and worker is up (the workers then sleep 300 s).
        while not all((out / f"rank{r}.json").exists() for r in range(2)):
            assert time.monotonic() < deadline and proc.poll() is None, "the job never reached its all-reduce"
            time.sleep(0.2)
        run = next(runs.iterdir())
        before = every_job_process(run)
        before += [pid for p in out.glob("pid-rank*.txt") if (pid := int(p.read_text())) not in before]  # workers
        assert len(before) >= 7, before  # runner + launcher, torchrun, worker per node
        proc.send_signal(sig)
        try:
            output, _ = proc.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"launch had not exited 150 s after {sig.name}; it printed:\n{proc.communicate()[0][-4000:]}")
        assert proc.returncode == 128 + sig, output[-3000:]
        assert "job STOPPED: stopped on request" in output, output[-3000:]
        assert state(run)["state"] == "STOPPED"
        left = [pid for pid in before if alive(pid)]
        assert not left, f"still running after {sig.name}: {left}"
    finally:  # whatever happened, nothing of the job outlives the test
        kill_all(proc, before)


# `run_job` with a stand-in provider whose log stream is interrupted by SIGTERM: prints what it was asked to do.
FOLLOWED_BY_SIGTERM = """import os, signal, sys, time
from types import SimpleNamespace
from cloudddp.providers import JobHandle, JobStatus
from cloudddp.providers.base import Provider as BaseProvider
from cloudddp.session import run_job
from cloudddp.job_spec import JobSpec

class Provider(BaseProvider):
    name = sys.argv[1]
    def render(self, spec):
        return SimpleNamespace(to_yaml=lambda: "")
    def submit(self, request):
        return JobHandle(provider=self.name, job_id="job-1")
    def logs(self, job_id, follow=False):
        yield "training"
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
    def cancel(self, job_id):
        print("CANCELLED", job_id, flush=True)
    def status(self, job_id):
        return JobStatus(job_id=job_id, state="STOPPED")
    wait = lambda self, job_id, poll=0, on_status=None: self.status(job_id)

signal.signal(signal.SIGTERM, signal.SIG_DFL)
sys.exit(run_job(Provider(), JobSpec(entry_point="train.py")))
"""


@pytest.mark.process
@pytest.mark.parametrize(("provider", "stopped"), [("local", True), ("sagemaker", False), ("oci", False)])
def test_sigterm_does_what_ctrl_c_does_for_each_provider(provider: str, stopped: bool) -> None:
    """SIGTERM stops the job only where Ctrl-C does (the local provider's own processes); a cloud job is left
    running as after Ctrl-C with nobody to ask, and nobody is asked: the exit code is 143 either way."""
    result = subprocess.run([PYTHON, "-c", FOLLOWED_BY_SIGTERM, provider], cwd=REPO, env=clean_env(),
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 143, (result.stdout, result.stderr)
    assert ("CANCELLED job-1" in result.stdout) is stopped, result.stdout
    if not stopped:
        assert f"left job-1 running; `cloudddp cancel job-1 -p {provider}` stops it" in result.stdout


@pytest.mark.process
def test_estimator_fit_interrupted_by_sigterm_says_so_with_its_exit_code() -> None:
    # fit() took only 130 for an interruption: after SIGTERM (143) it reached `assert current is not None`.
    driver = FOLLOWED_BY_SIGTERM.replace(
        'sys.exit(run_job(Provider(), JobSpec(entry_point="train.py")))',
        "from cloudddp import CloudDDPError, Estimator\n"
        'estimator = Estimator(provider="local", entry_point="train.py", source_dir=".")\n'
        "estimator._providers['local'] = Provider()\n"
        'estimator.spec = lambda inputs: JobSpec(entry_point="train.py")\n'
        "try:\n    estimator.fit()\nexcept CloudDDPError as error:\n"
        "    print('FIT', error, error.exit_code, flush=True)\n",
    )
    assert driver != FOLLOWED_BY_SIGTERM
    result = subprocess.run([PYTHON, "-c", driver, "local"], cwd=REPO, env=clean_env(), stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "FIT interrupted while following job-1. 143" in result.stdout, (result.stdout, result.stderr)
    assert "AssertionError" not in result.stderr


@pytest.mark.slow
def test_launch_whose_output_pipe_closes_stops_every_node(tmp_path: Path) -> None:
    # `cloudddp launch ... | head -3`: the reader went away, the next line was a BrokenPipeError, and launch exited 1
    # with the job left training until max_runtime. Now it is a closed terminal's path, with SIGPIPE's code.
    script, runs = tmp_path / "ticks.py", tmp_path / "runs"
    script.write_text("import time\nwhile True:\n    print('tick', flush=True)\n    time.sleep(0.2)\n")
    proc = subprocess.Popen(
        [PYTHON, *CLI_WITH_DEFAULT_SIGNALS, "launch", "--nodes", "2", "--runs-dir", str(runs), str(script)],
        cwd=REPO, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    before: list[int] = []
    try:
        assert proc.stdout is not None
        ticked: set[str] = set()
        while len(ticked) < 2:  # both nodes' scripts run: every launcher, torchrun and worker is up
            line = proc.stdout.readline()
            assert line, "launch ended before both nodes printed"
            if line.rstrip().endswith("] tick"):
                ticked.add(line.split("]", 1)[0])
        run = next(runs.iterdir())
        before = every_job_process(run)
        assert len(before) >= 7, before  # runner + launcher, torchrun, worker per node
        proc.stdout.close()  # as `head` exits: launch's next line finds no reader
        assert proc.wait(timeout=150) == 128 + signal.SIGPIPE
        assert state(run)["state"] == "STOPPED"
        assert not [pid for pid in before if alive(pid)]
    finally:
        kill_all(proc, before)
