"""Record the CreateTrainingJob requests the real SageMaker SDK v2 sends for `sdk2_cases.CASES`.

    make sdk2-env                                                    # .venv-sdk2 with sagemaker>=2.200,<3
    .venv/bin/python tests/providers/sagemaker_sdk/record_sdk2_requests.py

Starts a moto server on 127.0.0.1 (from .venv), then runs this file again inside
`.venv-sdk2` (`--inside`), where `sagemaker.pytorch.PyTorch(**case).fit(inputs, wait=False)`
runs against it and every CreateTrainingJob request is captured client side (botocore's
`provide-client-params` event: exactly the parameters the SDK handed to boto3). The result
goes to `sdk2_requests/sagemaker-<version>/<case>.json`; the normal test run compares
cloudddp's requests with these files without needing the SDK. `LOCAL_CASES` run with
`instance_type="local"` on a `sagemaker.local.LocalSession` (local_code on) whose
`LocalSagemakerClient.create_training_job` is replaced by a recorder, so no Docker is needed:
what it receives is what the SDK's containers' config files are written from.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SDK_PYTHON = REPO / ".venv-sdk2" / "bin" / "python"
FIXTURES = HERE / "sdk2_requests"


def sdk_environment(endpoint: str, home: Path) -> dict[str, str]:
    """Fake credentials, the moto endpoint, nothing from the user's AWS setup, SDK telemetry off."""
    config = home / "sagemaker-config.yaml"
    config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        HOME=str(home), AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1", AWS_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(home / "no-aws-config"), AWS_SHARED_CREDENTIALS_FILE=str(home / "no-aws-credentials"),
        SAGEMAKER_USER_CONFIG_OVERRIDE=str(config), SAGEMAKER_ADMIN_CONFIG_OVERRIDE=str(config),
        PYTHONPATH=str(HERE),
    )  # fmt: skip
    return env


def redirect_to(endpoint: str) -> Any:
    from urllib.parse import urlsplit, urlunsplit

    target = urlsplit(endpoint)

    def redirect(request: Any, **_: Any) -> None:
        parts = urlsplit(request.url)
        if parts.netloc != target.netloc:
            request.url = urlunsplit((target.scheme, target.netloc, parts.path, parts.query, parts.fragment))

    return redirect


def all_objects(s3: Any) -> set[str]:
    return {
        f"s3://{b['Name']}/{o['Key']}"
        for b in s3.list_buckets()["Buckets"]
        for o in s3.list_objects_v2(Bucket=b["Name"]).get("Contents", [])
    }


def record_inside(out_root: Path) -> None:
    """Runs in .venv-sdk2: the real SDK, one fit(wait=False) per case."""
    # The SageMaker SDK v2 is installed in .venv-sdk2 only, not in the .venv the type checker reads.
    import boto3
    import sagemaker
    from sagemaker.debugger import TensorBoardOutputConfig  # pyright: ignore[reportMissingImports]
    from sagemaker.instance_group import InstanceGroup  # pyright: ignore[reportMissingImports]
    from sagemaker.pytorch import PyTorch  # pyright: ignore[reportMissingImports]
    from sdk2_cases import BUCKETS, CASES, REGION, job_name, with_instance_groups, with_tensorboard

    version = sagemaker.__version__  # pyright: ignore[reportAttributeAccessIssue]
    out = out_root / f"sagemaker-{version}"
    out.mkdir(parents=True, exist_ok=True)
    for bucket in BUCKETS:
        boto3.client("s3", region_name=REGION).create_bucket(Bucket=bucket)
    for case, spec in CASES.items():
        boto_session = boto3.Session(region_name=REGION)
        # The SDK builds its STS client with an explicit regional endpoint (ignoring AWS_ENDPOINT_URL):
        # send every request of this session to the moto server instead.
        boto_session.events.register("before-send", redirect_to(os.environ["AWS_ENDPOINT_URL"]))
        session = sagemaker.Session(boto_session=boto_session)  # pyright: ignore[reportAttributeAccessIssue]
        captured: list[dict[str, Any]] = []
        session.sagemaker_client.meta.events.register(
            "provide-client-params.sagemaker.CreateTrainingJob",
            lambda params, _into=captured, **_: _into.append(copy.deepcopy(params)),
        )
        s3 = boto_session.client("s3")
        before = all_objects(s3)
        with tempfile.TemporaryDirectory() as source:
            Path(source, spec["estimator"]["entry_point"]).write_text("print('training')\n")
            kwargs = with_tensorboard(with_instance_groups(spec["estimator"], InstanceGroup), TensorBoardOutputConfig)
            estimator = PyTorch(source_dir=source, sagemaker_session=session, **kwargs)
            estimator.fit(inputs=spec["inputs"], wait=False, job_name=job_name(case))
        objects = sorted(all_objects(s3) - before)
        document = {
            "recorded_with": f"sagemaker {version} (sagemaker.pytorch.PyTorch), boto3 {boto3.__version__}",
            "case": case,
            "request": captured[-1],
            "s3_objects_written_by_fit": objects,
        }
        (out / f"{case}.json").write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        print(f"recorded {case} -> {out / (case + '.json')}")
    record_local(out)


def record_local(out: Path) -> None:
    """LOCAL_CASES: the request the SDK v2's local mode hands its LocalSagemakerClient (no Docker started)."""
    # The SageMaker SDK v2 is installed in .venv-sdk2 only, not in the .venv the type checker reads.
    import boto3
    import sagemaker
    from sagemaker.local import LocalSession  # pyright: ignore[reportMissingImports]
    from sagemaker.local.local_session import LocalSagemakerClient  # pyright: ignore[reportMissingImports]
    from sagemaker.pytorch import PyTorch  # pyright: ignore[reportMissingImports]
    from sdk2_cases import LOCAL_CASES, REGION, job_name

    version = sagemaker.__version__  # pyright: ignore[reportAttributeAccessIssue]

    captured: list[dict[str, Any]] = []
    LocalSagemakerClient.create_training_job = lambda self, **request: captured.append(copy.deepcopy(request))
    for case, spec in LOCAL_CASES.items():
        boto_session = boto3.Session(region_name=REGION)
        boto_session.events.register("before-send", redirect_to(os.environ["AWS_ENDPOINT_URL"]))
        session = LocalSession(boto_session=boto_session)
        session.config = {"local": {"local_code": True}}
        with tempfile.TemporaryDirectory() as source, tempfile.TemporaryDirectory() as data:
            Path(source, spec["estimator"]["entry_point"]).write_text("print('training')\n")
            inputs = {k: v.replace("<data>", data) for k, v in spec["inputs"].items()}
            estimator = PyTorch(source_dir=source, sagemaker_session=session, **spec["estimator"])
            estimator.fit(inputs=inputs, wait=False, job_name=job_name(case))
            request = json.loads(json.dumps(captured[-1]).replace(source, "<source_dir>").replace(data, "<data>"))
        document = {
            "recorded_with": f"sagemaker {version} (sagemaker.pytorch.PyTorch, LocalSession with "
            f"local_code), boto3 {boto3.__version__}",
            "case": case,
            "request": request,
        }
        (out / f"{case}.json").write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        print(f"recorded {case} -> {out / (case + '.json')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=FIXTURES)
    args = parser.parse_args()
    if args.inside:
        record_inside(args.out)
        return
    if not SDK_PYTHON.exists():
        sys.exit(f"{SDK_PYTHON} does not exist: run `make sdk2-env` first.")
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        with tempfile.TemporaryDirectory() as home:
            env = sdk_environment(f"http://{host}:{port}", Path(home))
            command = [str(SDK_PYTHON), __file__, "--inside", "--out", str(args.out)]
            subprocess.run(command, env=env, check=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
