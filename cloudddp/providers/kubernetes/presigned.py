"""`kubernetes.code`: the source folder and s3:// inputs reach a stock image by presigned GET URLs.

At submit the source folder is packed with cloudddp's job side bundled (staging/archive.py pack_source, as SageMaker
and OCI ship it) and staged as a version under `kubernetes.code` (the one staging engine: `<code>/v-<hash>/`, the
manifest published last). Every object a pod reads (the archive, and each object under each s3:// input, listed
now) gets a GET URL presigned with the user's own credentials (boto3 `generate_presigned_url`, SigV4, valid
`kubernetes.url_lifetime` seconds). The URLs go into a Secret, `<job>-cloudddp-pull` (key `plan.json`), mounted into
the init container only; the init container runs cloudddp/launcher/presigned_pull.py as `python -c` (the standard
library: neither cloudddp nor boto3 in the image, no keys in the cluster), and the training container runs the
bundled launcher, `python -m cloudddp.launcher`, from the unpacked folder.

Why presign each object rather than a prefix: a presigned URL signs one request, and a LIST signed for a prefix would
list but not read. Why a Secret: a URL is a bearer token for its object until it expires, so it may be neither in
the manifest (readable by whoever reads the job) nor in the training container's environment. A Secret's data is at
most 1 MiB (kubernetes/kubernetes pkg/apis/core/types.go MaxSecretSize), about a thousand URLs: more objects are
refused at submit, with `cloudddp stage --layout shards` (a few large objects) or a pvc:// claim as the way out.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudddp.errors import CloudDDPError
from cloudddp.launcher import presigned_pull
from cloudddp.launcher.pull_inputs import Channel, objects_of, parse_channel, relative_path
from cloudddp.providers.kubernetes.settings import KubernetesSettings
from cloudddp.staging.archive import pack_source
from cloudddp.staging.engine import stage
from cloudddp.staging.location import parse_location

try:  # boto3 (botocore) is needed at submit with kubernetes.code only; the [kubernetes] extra alone renders
    from cloudddp.staging.s3_store import S3Store
except ImportError:  # pragma: no cover - s3_client says what to install before S3Store is reached
    S3Store = None

CODE_ROOT = "/cloudddp/code"  # the unpacked source folder: the training container's working directory
CODE_VOLUME = "cloudddp-code"
PLAN_VOLUME = "cloudddp-pull"  # the Secret's volume, mounted in the init container only
PLAN_ROOT = "/cloudddp/pull"
PLAN_KEY = "plan.json"
ARCHIVE_NAME = "sourcedir.tar.gz"
SECRET_MAX = 1024 * 1024  # MaxSecretSize: the sum of a Secret's data
MASKED = "<presigned at submit; in the Secret only, never printed>"
DEFAULT_REGION = "us-east-1"


def secret_name(job: str) -> str:
    return f"{job}-cloudddp-pull"


def code_settings(settings: KubernetesSettings) -> KubernetesSettings:
    """The settings the pods run under with `code`: the bundled launcher from the unpacked folder. A launcher or
    working_dir given too, or a Secret of S3 keys, would not be used: refused rather than dropped."""
    given = sorted(name for name in ("launcher", "working_dir", "s3_secret") if name in settings.model_fields_set)
    if given:
        raise CloudDDPError(
            f"kubernetes.code={settings.code!r} and kubernetes.{given[0]} both given: with code the pods run the "
            f"bundled launcher (python -m cloudddp.launcher) in {CODE_ROOT}, and fetch code and s3:// inputs by "
            f"presigned URLs, with no keys in the cluster. Leave out kubernetes.{given[0]}, or kubernetes.code."
        )
    if settings.kubeflow_api == "trainer-v2":
        raise CloudDDPError(
            f"kubernetes.code={settings.code!r} needs kubeflow_api v1 (a PyTorchJob): a TrainJob's runtime has no init "
            f"container, so its training container would hold the presigned URLs, which are secrets. Use "
            f"--kubeflow-api v1, or an image holding the code (leave out kubernetes.code)."
        )
    return settings.model_copy(update={"launcher": [settings.python, "-m", "cloudddp.launcher"],
                                       "working_dir": CODE_ROOT})  # fmt: skip


def pull_container(image: str, python: str, data_root: str, data_volume: str | None) -> dict[str, Any]:
    """The init container: presigned_pull.py's text run by the image's Python, the plan from the Secret's volume."""
    mounts = [{"name": CODE_VOLUME, "mountPath": CODE_ROOT},
              {"name": PLAN_VOLUME, "mountPath": PLAN_ROOT, "readOnly": True}]  # fmt: skip
    if data_volume:
        mounts.append({"name": data_volume, "mountPath": data_root})
    script = Path(presigned_pull.__file__).read_text()
    return {
        "name": "pull-inputs",
        "image": image,
        "command": [
            python,
            "-c",
            script,
            "--plan",
            f"{PLAN_ROOT}/{PLAN_KEY}",
            "--into",
            data_root,
            "--code",
            CODE_ROOT,
        ],
        "volumeMounts": mounts,
    }


def volumes(secret: str) -> list[dict[str, Any]]:
    """The code's emptyDir, and the Secret's volume at its default mode (0644): an image that runs as another user
    than root can read it too; only the init container mounts it."""
    return [{"name": CODE_VOLUME, "emptyDir": {}},
            {"name": PLAN_VOLUME, "secret": {"secretName": secret}}]  # fmt: skip


@dataclass
class PullPlan:
    """What submit publishes and presigns before it creates the job; its dry run form hides every URL."""

    secret: str
    namespace: str
    code: str  # s3://BUCKET/PREFIX the source is staged under
    source_dir: str
    job_config: dict[str, Any]
    lifetime: int
    endpoint: str | None
    region: str
    inputs: dict[str, str] = field(default_factory=dict)  # channel -> s3:// URI

    def secret_body(self, plan: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self.secret, "namespace": self.namespace,
                         "labels": {"app.kubernetes.io/managed-by": "cloudddp"}},
            "type": "Opaque",
            "stringData": {PLAN_KEY: plan},
        }  # fmt: skip

    def masked(self) -> dict[str, Any]:
        """The Secret as the dry run shows it: what the plan holds, every URL masked, versions and objects to come."""
        plan = {
            "code": {"uri": f"{self.code.rstrip('/')}/v-<hash-at-submit>/{ARCHIVE_NAME}", "size": "<at submit>",
                     "url": MASKED},
            "inputs": {name: {"uri": uri, "files": [{"path": "<each object under it, listed at submit>",
                                                     "size": "<its size>", "url": MASKED}]}
                       for name, uri in sorted(self.inputs.items())},
            "url_lifetime_seconds": self.lifetime,
        }  # fmt: skip
        return self.secret_body(json.dumps(plan, indent=1))


def s3_client(plan: PullPlan) -> Any:
    """The user's own S3 client (boto3's credential chain) at kubernetes.s3_endpoint: lists and presigns."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise CloudDDPError(
            "kubernetes.code stages the source and presigns URLs with boto3, which is not installed here: "
            "pip install 'cloudddp[sagemaker]' (or boto3)."
        ) from None
    config = Config(signature_version="s3v4", s3={"addressing_style": "path"} if plan.endpoint else {})
    return boto3.client("s3", endpoint_url=plan.endpoint, region_name=plan.region, config=config)


def presign(client: Any, bucket: str, key: str, lifetime: int) -> str:
    return str(client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                             ExpiresIn=lifetime))  # fmt: skip


def stage_code(client: Any, plan: PullPlan, say: Callable[[str], None]) -> dict[str, Any]:
    """Pack the source with the launcher, stage it as a version under `code`; the archive's object, presigned."""
    location = parse_location(plan.code)
    with tempfile.TemporaryDirectory(prefix="cloudddp-") as tmp:
        archive = pack_source(plan.source_dir, Path(tmp) / ARCHIVE_NAME, plan.job_config)
        result = stage(archive.path, S3Store(client, location, plan.region))  # pyright: ignore[reportOptionalCall]
    key = location.key(result.version, ARCHIVE_NAME)
    say(f"cloudddp: staged the source with the launcher ({len(archive.files)} files, {archive.size / 1e6:.2f} MB, "
        f"{result.changes()}) -> s3://{location.bucket}/{key}")  # fmt: skip
    return {"uri": f"s3://{location.bucket}/{key}", "size": archive.size,
            "url": presign(client, location.bucket, key, plan.lifetime)}  # fmt: skip


def channel_files(client: Any, channel: Channel, lifetime: int) -> list[dict[str, Any]]:
    """Every object of an s3:// input, as pull_inputs would copy it, each with its presigned URL."""
    objects = objects_of(client, channel)
    if len(objects) == 1 and objects[0][0] == channel.prefix:  # the URI names one object
        named = [(channel.prefix, objects[0][1], channel.prefix.rsplit("/", 1)[-1])]
    else:
        named = [(key, size, path.as_posix()) for key, size in objects
                 if (path := relative_path(channel, key)) is not None]  # fmt: skip
    if not named:
        raise CloudDDPError(
            f"inputs.{channel.name}={channel.uri!r}: there is no object under {channel.uri}/ nor one named "
            f"{channel.uri}; check the prefix (a typo would train on nothing)."
        )
    return [{"path": path, "size": size, "url": presign(client, channel.bucket, key, lifetime)}
            for key, size, path in named]  # fmt: skip


def publish(plan: PullPlan, say: Callable[[str], None]) -> dict[str, Any]:
    """Stage the code, list the inputs, presign every object: the Secret the pods read (its URLs are secrets)."""
    from botocore.exceptions import BotoCoreError, ClientError

    client = s3_client(plan)
    try:
        code = stage_code(client, plan, say)
        inputs = {}
        for name, uri in sorted(plan.inputs.items()):
            channel = parse_channel(f"{name}={uri}")
            inputs[name] = {"uri": channel.uri, "files": channel_files(client, channel, plan.lifetime)}
    except (ClientError, BotoCoreError) as exc:
        raise CloudDDPError(
            f"kubernetes.code: staging the source or listing the s3:// inputs at "
            f"{plan.endpoint or 'AWS S3'} failed: {exc}. Check your AWS credentials and kubernetes.s3_endpoint."
        ) from None
    text = json.dumps({"code": code, "inputs": inputs, "url_lifetime_seconds": plan.lifetime})
    if len(text.encode()) > SECRET_MAX:
        objects = sum(len(channel["files"]) for channel in inputs.values())
        raise CloudDDPError(
            f"kubernetes.code: the presigned URLs of the {objects} input objects take {len(text.encode())} bytes, "
            f"more than a Kubernetes Secret holds ({SECRET_MAX}). Stage the data as a few large objects (cloudddp "
            f"stage --layout shards) or read it from a claim (pvc://CLAIM/PATH)."
        )
    say(f"cloudddp: presigned {1 + sum(len(c['files']) for c in inputs.values())} GET URL(s), valid "
        f"{plan.lifetime} s, kept in the Secret {plan.namespace}/{plan.secret}")  # fmt: skip
    return plan.secret_body(text)
