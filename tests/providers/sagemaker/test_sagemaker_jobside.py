# ruff: noqa: F811  (pytest fixtures imported from sagemaker_fixtures are redefined as arguments)
"""What is uploaded actually runs: the archive from (moto) S3, on two emulated SageMaker hosts.

The archive a launch uploaded is extracted into a local-provider SageMaker node layout
(/opt/ml/... under a temp folder, 2-host resourceconfig.json, SM_* variables as the
training toolkit sets them), and each host runs the bootstrap as the container would:
the DLC's toolkit runs `python cloudddp_bootstrap.py --epochs 1`; a bring-your-own image
runs the ContainerArguments shell command. Both hosts train one real epoch with gloo.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from helpers import clean_env
from helpers.sagemaker_fixtures import (  # noqa: F401  (fixtures)
    BUCKET,
    REPO,
    FakeAWS,
    aws,
    aws_env,
    spec_for,
)

from cloudddp.cluster import sagemaker
from cloudddp.cluster.environment import EmulatedCluster, EmulatedNode
from cloudddp.job_spec import JobSpec
from cloudddp.providers.local.provider import free_port

pytestmark = pytest.mark.slow


def sagemaker_nodes(spec: JobSpec, run_dir: Path, job: str) -> list[EmulatedNode]:
    """Each host as SageMaker lays it out (the SageMaker module's own emulation)."""
    cluster = EmulatedCluster(nodes=spec.nodes, job_name=job, run_dir=run_dir, channels=tuple(sorted(spec.inputs)),
                              hyperparameters=dict(spec.hyperparameters))  # fmt: skip
    return sagemaker.emulate(cluster)


def lay_out(spec: JobSpec, run_dir: Path, job: str, archive: Path, data: Path | None) -> list[EmulatedNode]:
    """Each host's /opt/ml as SageMaker prepares it, with the code extracted where the toolkit puts it."""
    nodes = sagemaker_nodes(spec, run_dir, job)
    for node in nodes:
        for folder in node.dirs:
            folder.mkdir(parents=True, exist_ok=True)
        for path, content in node.files.items():
            Path(path).write_text(json.dumps(content))
        for target in node.channels.values():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(data or run_dir, target_is_directory=True)
        with tarfile.open(archive) as tar:
            tar.extractall(node.root / "code", filter="data")
    return nodes


def host_env(node: EmulatedNode, port: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    return clean_env({
        **node.env, "CLOUDDDP_HOST_MAP": "algo-1=127.0.0.1,algo-2=127.0.0.1", "OMP_NUM_THREADS": "1",
        "SM_OUTPUT_DIR": str(node.root / "output"), **(extra or {}),
    })  # fmt: skip


def with_master_port(code: Path, port: int) -> None:
    """SageMaker's fixed port 7777 may be taken on a shared test machine: pass --master-port in launcher_args."""
    path = code / "cloudddp_job.json"
    job = json.loads(path.read_text())
    job["launcher_args"].append(f"--master-port={port}")
    path.write_text(json.dumps(job))


def run_hosts(commands: list[tuple[list[str], Path, dict[str, str]]], timeout: float) -> list[tuple[int, str]]:
    procs = [subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for cmd, cwd, env in commands]  # fmt: skip
    deadline = time.monotonic() + timeout
    results = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            results.append((proc.returncode, out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return results


def uploaded_archive(fake: FakeAWS, job: str, tmp_path: Path) -> Path:
    archive = tmp_path / "sourcedir.tar.gz"
    archive.write_bytes(fake.read(f"s3://{BUCKET}/cloudddp/{job}/source/sourcedir.tar.gz"))
    return archive


def test_uploaded_archive_trains_one_epoch_on_two_hosts(aws: FakeAWS, small_demo_data: Path, tmp_path: Path) -> None:
    spec = spec_for(REPO / "sources", entry_point="train_ddp.py", inputs={"train": str(small_demo_data)},
                    hyperparameters={"epochs": 1}, args=["--batch-size", "8"])  # fmt: skip
    handle = aws.provider.submit(aws.provider.render(spec))
    sent = aws.created[0]
    # The training toolkit passes the decoded hyperparameters as --key value to sagemaker_program.
    program = json.loads(sent["HyperParameters"]["sagemaker_program"])
    toolkit_args = ["--epochs", str(json.loads(sent["HyperParameters"]["epochs"]))]
    nodes = lay_out(spec, tmp_path / "run", handle.job_id, uploaded_archive(aws, handle.job_id, tmp_path),
                    small_demo_data)  # fmt: skip
    port = free_port()
    for node in nodes:
        with_master_port(node.root / "code", port)
    commands = [([sys.executable, program, *toolkit_args], node.root / "code", host_env(node, port)) for node in nodes]
    results = run_hosts(commands, timeout=400)
    for (code, out), node in zip(results, nodes, strict=True):
        assert code == 0, f"{node.name} exited {code}:\n{out[-4000:]}"
    assert (nodes[0].root / "model" / "model.pt").is_file()
    assert "epoch=1/1" in results[0][1]
    # Both hosts ended with the same weights: DDP really synchronised across the two "instances".
    first = (nodes[0].root / "model" / "fingerprint-rank0.txt").read_text()
    assert first == (nodes[1].root / "model" / "fingerprint-rank1.txt").read_text()


def test_bring_your_own_container_command_runs_the_bootstrap(aws: FakeAWS, tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "show.py").write_text(
        "import json, os, sys\n"
        "out = os.path.join(os.environ['SM_OUTPUT_DIR'], 'args-' + os.environ['RANK'] + '.json')\n"
        "hps = {k: v for k, v in os.environ.items() if k.startswith('SM_HP') or k == 'SM_USER_ARGS'}\n"
        "json.dump({'argv': sys.argv[1:], 'world': os.environ['WORLD_SIZE'], 'hps': hps}, open(out, 'w'))\n"
    )
    hyperparameters = {"lr": 0.5, "arch": "resnet", "pretrained": True, "my-key": 3}
    spec = spec_for(source, entry_point="show.py", hyperparameters=hyperparameters, args=["--x", "1"],
                    sagemaker={"image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1"})  # fmt: skip
    handle = aws.provider.submit(aws.provider.render(spec))
    sent = aws.created[0]
    (command,) = sent["AlgorithmSpecification"]["ContainerArguments"]
    archive = uploaded_archive(aws, handle.job_id, tmp_path)
    nodes = sagemaker_nodes(spec, tmp_path / "run", handle.job_id)
    port = free_port()
    commands = []
    for node in nodes:
        for folder in node.dirs:
            folder.mkdir(parents=True, exist_ok=True)
        for path, content in node.files.items():
            Path(path).write_text(json.dumps(content))
        # hyperparameters.json as SageMaker writes it: the request's HyperParameters, JSON-encoded strings.
        (node.root / "input" / "config" / "hyperparameters.json").write_text(json.dumps(sent["HyperParameters"]))
        channel = node.root / "input" / "data" / "cloudddp_code"
        channel.mkdir(parents=True)
        (channel / "sourcedir.tar.gz").write_bytes(archive.read_bytes())
        # A bring-your-own container gets only the /opt/ml files and the request's Environment, no SM_* variables
        # of a toolkit (SM_INPUT_CONFIG_DIR only points the launcher at this emulated /opt/ml).
        env = {**sent.get("Environment", {}), "SM_INPUT_CONFIG_DIR": str(node.root / "input" / "config"), "SM_OUTPUT_DIR": str(node.root / "output"),
               "CLOUDDDP_HOST_MAP": "algo-1=127.0.0.1,algo-2=127.0.0.1", "OMP_NUM_THREADS": "1"}  # fmt: skip
        local = command.replace("/opt/ml", str(node.root))
        # The launcher's --master-port goes in through launcher_args after extraction, as in the test above.
        local = local.replace("; cd ", f"; python3 -c 'import json,sys; p=sys.argv[1]+\"/cloudddp_job.json\"; "
                                       f"j=json.load(open(p)); j[\"launcher_args\"].append(\"--master-port={port}\"); "
                                       f"json.dump(j,open(p,\"w\"))' {node.root}/code; cd ", 1)  # fmt: skip
        commands.append(
            (
                ["/bin/sh", "-c", local],
                node.root,
                clean_env({**env, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}),
            )
        )
    results = run_hosts(commands, timeout=180)
    for (code, out), node in zip(results, nodes, strict=True):
        assert code == 0, f"{node.name} exited {code}:\n{out[-4000:]}"
    shown = json.loads((nodes[0].root / "output" / "args-0.json").read_text())
    assert shown["world"] == "2"
    assert shown["argv"][:2] == ["--x", "1"]
    # The toolkit's order (keys sorted) and its str() of each value (mapping.to_cmd_args).
    assert shown["argv"][2:] == ["--arch", "resnet", "--lr", "0.5", "--my-key", "3", "--pretrained", "True"]
    # SM_HP_* as the toolkit's mapping.to_env_vars writes them (the launcher derives them from hyperparameters.json):
    # keys only upper-cased, non-strings as compact JSON. The request's Environment used to carry its own
    # SM_HP_PRETRAINED=True and SM_HP_MY_KEY=3, which won over these.
    assert shown["hps"] == {
        "SM_HP_ARCH": "resnet", "SM_HP_LR": "0.5", "SM_HP_PRETRAINED": "true", "SM_HP_MY-KEY": "3",
        "SM_HPS": '{"arch":"resnet","lr":0.5,"my-key":3,"pretrained":true}',
        "SM_USER_ARGS": '["--arch","resnet","--lr","0.5","--my-key","3","--pretrained","True"]',
    }  # fmt: skip
