"""From a capacity refusal to the next target's job created (issue 41; goal <= 5 s).

The moto server behind tests/helpers/capacity_proxy.py: CreateTrainingJob for ml.p4d.24xlarge is refused with
ResourceLimitExceeded (the service's error shape), ml.m5.xlarge is created. Each run launches a job spec with the
two SageMaker targets through cloudddp.failover (in this process, `--no-wait`: it ends once the second job is
created) with a job index of its own, and measures, on the proxy's clock, from the refusal sent to the second
CreateTrainingJob's answer. That span is the client's whole hop: reading the refusal, the capacity table, the
attempt recorded in the job index, then the second target's submit (credentials check, staging bucket, the source
upload, CreateTrainingJob). Prints medians and spread (min-max) over `--runs` runs.

    .venv/bin/python benchmarks/failover.py --runs 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from helpers.capacity_proxy import CapacityProxy  # noqa: E402

TARGETS = """name: bench
entry_point: train.py
targets:
  - {name: p4d, provider: sagemaker, sagemaker: {instance_type: ml.p4d.24xlarge}}
  - {name: m5, provider: sagemaker, sagemaker: {instance_type: ml.m5.xlarge}}
"""


def one_run(moto: str, folder: Path, state: Path) -> tuple[float, float]:
    """(refusal to next job created, whole launch) in seconds."""
    from cloudddp import config
    from cloudddp.config import target_specs
    from cloudddp.failover import Failover, targets_from

    urllib.request.urlopen(urllib.request.Request(f"{moto}/moto-api/reset", method="POST")).close()
    os.environ["XDG_STATE_HOME"] = str(state)  # a job index of the run's own: no attempt to adopt
    job = folder / "job.yaml"
    with CapacityProxy(moto, refused={"ml.p4d.24xlarge"}) as proxy:
        os.environ["AWS_ENDPOINT_URL"] = proxy.url
        started = time.monotonic()
        found = targets_from(target_specs(config.job_spec("sagemaker", job, {}), job, {}))
        code = Failover(found, say=lambda _: None).run(wait=False)
        whole = time.monotonic() - started
    assert code == 0 and len(proxy.refused_at) == 1 and len(proxy.created_at) == 1, (code, proxy.requests)
    return proxy.created_at[0] - proxy.refused_at[0], whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      AWS_REGION="us-east-1", CLOUDDDP_SAGEMAKER_ROLE="arn:aws:iam::123456789012:role/bench",
                      AWS_EC2_METADATA_DISABLED="true")  # fmt: skip
    hops, wholes = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="cloudddp-bench-failover-") as tmp:
            root, project = Path(tmp), Path(tmp) / "project"  # the project (its source shipped) apart from the indexes
            os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = str(root / "none")
            project.mkdir()
            (project / "train.py").write_text("print('training')\n")
            (project / "job.yaml").write_text(TARGETS)
            os.chdir(project)
            for number in range(runs):
                hop, whole = one_run(f"http://{host}:{port}", project, root / f"state{number}")
                hops.append(hop)
                wholes.append(whole)
    finally:
        server.stop()
    print("| case | median (s) | spread (s) | runs |\n|---|---|---|---|")
    for label, values in (("refusal -> next job created", hops), ("whole launch (render both, hop, submit)", wholes)):
        print(f"| {label} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} | {len(values)} |")


if __name__ == "__main__":
    main()
