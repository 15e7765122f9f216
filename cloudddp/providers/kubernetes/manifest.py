"""Kubeflow manifests for a job spec: pure rendering, no API calls.

- `kubeflow.org/v1` PyTorchJob (training-operator): Master + Worker replicas, or Workers only with
  an `elasticPolicy`; the container must be named `pytorch` (kubeflow/training-operator
  pkg/apis/kubeflow.org/v1/pytorch_types.go, tag v1.9.0, commit 6f74c7f6b2ed6c27aabd82d0a316b23f0646059c).
- `trainer.kubeflow.org/v1alpha1` TrainJob against a ClusterTrainingRuntime (`torch-distributed`),
  whose replicated job and trainer container are both named `node` (kubeflow/trainer
  pkg/constants/constants.go, tag v2.3.0, commit 658725bdae5c7e3a0854d93ac6ff492e109a22ab): trainjob.py.

Every node runs `cloudddp-launch` (the operator's MASTER_ADDR/RANK/PET_* tell it its place), or with
`kubernetes.code` the bundled launcher from the code its init container fetched by presigned URL (presigned.py). Data
comes from a PersistentVolumeClaim (`pvc://claim/path`) or S3-compatible storage (`s3://bucket/prefix`,
e.g. MinIO), pulled into an emptyDir by an init container running the job's image
(`cloudddp.launcher.pull_inputs`; a TrainJob's `node` container runs it first) with credentials
from a Secret referenced by name; the folders reach the script as CLOUDDDP_CHANNEL_<NAME>,
CLOUDDDP_MODEL_DIR and CLOUDDDP_CHECKPOINT_DIR.
Secrets are never written into a manifest: secret-looking variables must come from `secret_env`.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cloudddp.cluster.environment import channel_variable
from cloudddp.errors import CloudDDPError
from cloudddp.providers.kubernetes.presigned import CODE_ROOT, CODE_VOLUME, pull_container, secret_name
from cloudddp.providers.kubernetes.presigned import volumes as presigned_volumes
from cloudddp.providers.kubernetes.settings import (
    DNS_1035_LABEL,
    DNS_1035_MAX,
    DNS_LABEL,
    KubernetesSettings,
    check_subdomain,
)
from cloudddp.redact import has_url_credentials
from cloudddp.staging.location import S3_BUCKET

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

PYTORCHJOB = ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
TRAINJOB = ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
DATA_ROOT = "/cloudddp/data"  # channel CHANNEL is DATA_ROOT/CHANNEL (pull_inputs --into DATA_ROOT)
SCRATCH_VOLUME = "cloudddp-data"
PULL_CONTAINER = "pull-inputs"
VOLUME_NAME_MAX = 63  # a DNS-1123 label's DNS1123LabelMaxLength (apimachinery pkg/util/validation)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what the other providers take (and the script's shell reads)
# The kubelet expands $(VAR) in a container's command, args and env values and turns $$ into $ (kubernetes/kubernetes
# third_party/forked/golang/expansion/expand.go, commit fde22c3f9aacfd260225a9741de123a41157b7c0): a $ before $ or (
# is written $$ so the pod gets what the user wrote. Any other $ is kept as it is there, so it stays as written.
EXPANDED = re.compile(r"\$(?=[$(])")


def escape_expansion(text: str) -> str:
    """`text` as the kubelet must receive it to hand the container `text` itself (`$(A)` -> `$$(A)`)."""
    return EXPANDED.sub("$$", text)


def escaped_container(container: dict[str, Any]) -> dict[str, Any]:
    """A copy of `container` (a core/v1 Container, or a TrainJob's `trainer`) with $ escaped where it is expanded."""
    escaped = dict(container)
    for key in ("command", "args"):
        if key in escaped:
            escaped[key] = [escape_expansion(word) for word in escaped[key]]
    if "env" in escaped:
        escaped["env"] = [{**v, "value": escape_expansion(v["value"])} if "value" in v else v for v in escaped["env"]]
    return escaped


@dataclass
class Storage:
    """Volumes, mounts, init containers and variables that bring data and outputs to each node."""

    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    init_containers: list[dict[str, Any]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    claims: list[str] = field(default_factory=list)  # PVCs every node mounts (checked for RWO at submit)
    presigned: dict[str, str] = field(default_factory=dict)  # with kubernetes.code: channel -> s3:// URI


@dataclass
class DerivedName:
    """The longest name the cluster derives from the job's name, as `<name>` + `suffix`, and what makes it."""

    kind: str  # the job's kind, as the error names it
    suffix: str  # e.g. "-worker-10": the longest the job's replica count gives
    why: str  # who derives it and what limits it
    nodes: int


def job_name(spec: JobSpec, derived: DerivedName) -> str:
    """The job's metadata.name (lower case): a DNS-1035 label that leaves room for `derived.suffix`.

    Both Kubeflow APIs take only DNS-1035 labels (pytorchjob.py and trainjob.py cite where), and the names the
    cluster derives from it (Services, JobSet pods) must be DNS-1035 labels of at most 63 characters too.
    """
    name = spec.name.lower()
    limit = DNS_1035_MAX - len(derived.suffix)
    if DNS_1035_LABEL.fullmatch(name) and len(name) <= limit:
        return name
    problem = f"has {len(name)} characters" if len(name) > limit else "is not such a label"
    raise CloudDDPError(
        f"name={spec.name!r}: a {derived.kind}'s name must be a DNS-1035 label (lower-case letters, digits and "
        f"'-', starting with a letter and ending with a letter or digit) of at most {limit} characters for this "
        f"job's {derived.nodes} node{'s' if derived.nodes > 1 else ''}: {derived.why}, and '<name>{derived.suffix}' "
        f"is the longest here. This name {problem}; give the job another one (name: / --name)."
    )


def refuse_credentials(uri: str, field_name: str, instead: str) -> None:
    """A URI with user-info (`s3://KEY:SECRET@bucket/p`) is refused before any part of it is quoted on its own.

    CloudDDPError hides the user-info of the URI itself (redact_text), but not once its bucket or claim part,
    `KEY:SECRET@bucket`, is quoted without the scheme: so the message says that the URI holds credentials instead.
    """
    if has_url_credentials(uri):
        raise CloudDDPError(
            f"{field_name}={uri!r}: the URI holds credentials (a user or password before '@'), which cloudddp neither "
            f"prints nor writes into the job's manifest; {instead}"
        )


def split_pvc(uri: str, field_name: str) -> tuple[str, str]:
    """`pvc://claim/sub/path` -> ("claim", "sub/path")."""
    refuse_credentials(uri, field_name, "write pvc://CLAIM/PATH (a claim needs none).")
    claim, _, sub_path = uri.removeprefix("pvc://").partition("/")
    try:
        check_subdomain(claim, "PersistentVolumeClaim name")
    except ValueError as exc:
        raise CloudDDPError(f"{field_name}={uri!r}: {exc}.") from None
    sub_path = sub_path.strip("/")  # so the subPath is never absolute
    # A volume mount's subPath may not have a '..' element nor be absolute: kubernetes/kubernetes
    # pkg/apis/core/validation/validation.go, ValidateVolumeMounts -> validateLocalDescendingPath /
    # validatePathNoBacksteps, read at commit 000f26050b9be6fb3d79fae95e06b47fc96128cd (from a stored copy of that
    # file; the repository is too big to fetch whole). The API server refuses such a pod only when the operator
    # creates it, so the job would hang with no pods.
    if ".." in sub_path.split("/"):
        raise CloudDDPError(
            f"{field_name}={uri!r}: the path inside the claim, {sub_path!r}, has a '..' element; it is mounted as "
            f"the volume's subPath, which Kubernetes takes only below the claim's root (no '..', not absolute). "
            f"Write pvc://{claim}/PATH with PATH a folder of the claim."
        )
    return claim, sub_path


def volume_name(claim: str) -> str:
    """The pod volume that mounts `claim`: `pvc-CLAIM` when that is a DNS-1123 label, else one made to be.

    A volume's name must be a DNS-1123 label (kubernetes/kubernetes pkg/apis/core/validation/validation.go
    ValidateVolumes -> ValidateDNS1123Label, commit 000f26050b9be6fb3d79fae95e06b47fc96128cd, from a stored copy),
    while a claim's name is a DNS-1123 subdomain: dots, and up to 253 characters. The pod of `pvc-data.v1` would be
    refused when the operator creates it, and a name cut at 63 characters gave two long claims one volume (one
    channel read the other's data). So such a name has its dots as '-', is cut short, and ends in 8 hex digits of
    the claim's SHA-256: distinct for distinct claims (mount_claim refuses the unlikely clash).
    """
    name = f"pvc-{claim}"
    if DNS_LABEL.fullmatch(name):
        return name
    digest = hashlib.sha256(claim.encode()).hexdigest()[:8]
    return f"{name.replace('.', '-')[: VOLUME_NAME_MAX - len(digest) - 1].rstrip('-')}-{digest}"


def mount_claim(storage: Storage, uri: str, field_name: str, path: str, read_only: bool) -> None:
    claim, sub_path = split_pvc(uri, field_name)
    volume = volume_name(claim)
    owner = next((v["persistentVolumeClaim"]["claimName"] for v in storage.volumes
                  if v["name"] == volume and "persistentVolumeClaim" in v), None)  # fmt: skip
    if owner is None:
        storage.volumes.append({"name": volume, "persistentVolumeClaim": {"claimName": claim}})
        storage.claims.append(claim)
    elif owner != claim:  # one volume per claim, always: never mount one claim in another's place
        raise CloudDDPError(
            f"{field_name}={uri!r}: the claims {owner!r} and {claim!r} would get the same pod volume name, "
            f"{volume!r}; rename one of them."
        )
    mount: dict[str, Any] = {"name": volume, "mountPath": path, "readOnly": read_only}
    if sub_path:
        mount["subPath"] = sub_path
    storage.mounts.append(mount)


def s3_channel(channel: str, uri: str) -> str:
    """`CHANNEL=s3://bucket/prefix`, the pull's argument, once the bucket name is known to be one."""
    refuse_credentials(uri, f"inputs.{channel}", "give the keys in the Secret named by kubernetes.s3_secret "
                       "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), or none for the pod's own AWS identity.")  # fmt: skip
    bucket = uri.removeprefix("s3://").partition("/")[0]
    if not S3_BUCKET.match(bucket):
        raise CloudDDPError(
            f"inputs.{channel}={uri!r}: {bucket!r} is not an S3 bucket name (3-63 lower-case letters, digits, "
            f"'.' and '-'); write s3://BUCKET/PREFIX."
        )
    return f"{channel}={uri}"


def s3_puller(channels: list[str], settings: KubernetesSettings) -> dict[str, Any]:
    """The init container that copies every s3:// input into the pod's scratch volume before training.

    It runs the job's own image (`python -m cloudddp.launcher.pull_inputs`, which needs boto3 there), so
    nothing else is pulled or trusted; the keys come from the Secret by reference and reach this container
    only, never the training processes (a TrainJob runs this command and env at the start of its `node`
    container instead: trainjob.node_command). A failed pull fails the pod before training starts.

    Both settings are optional, because boto3 in the pod finds the rest itself: without s3_endpoint it
    reads AWS S3; without s3_secret it takes the pod's own identity (on EKS: IRSA or Pod Identity for
    kubernetes.service_account, whose variables EKS injects into init containers too: aws/amazon-eks-pod-
    identity-webhook pkg/handler/handler.go getPodSpecPatch at 3bf80a34; else the node's role).
    """
    env: list[dict[str, Any]] = []
    if settings.s3_endpoint:
        env.append({"name": "AWS_ENDPOINT_URL", "value": settings.s3_endpoint})
    if settings.s3_region:
        env.append({"name": "AWS_REGION", "value": settings.s3_region})
    if settings.s3_secret:
        env += [
            {"name": key, "valueFrom": {"secretKeyRef": {"name": settings.s3_secret, "key": key}}}
            for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
        ]
    return {
        "name": PULL_CONTAINER,
        "image": require_image(settings),
        "command": [settings.python, "-m", "cloudddp.launcher.pull_inputs", "--into", DATA_ROOT, *channels],
        **({"env": env} if env else {}),
        "volumeMounts": [{"name": SCRATCH_VOLUME, "mountPath": DATA_ROOT}],
    }


def storage_for(spec: JobSpec, settings: KubernetesSettings) -> Storage:
    storage = Storage()
    pulled = []
    for channel, uri in sorted(spec.inputs.items()):
        target = f"{DATA_ROOT}/{channel}"
        storage.env[channel_variable(channel)] = target
        if uri.startswith("pvc://"):
            mount_claim(storage, uri, f"inputs.{channel}", target, read_only=True)
        elif uri.startswith("s3://"):
            pulled.append(s3_channel(channel, uri))
        else:
            raise CloudDDPError(
                f"inputs.{channel}={uri!r}: pods cannot read a folder on this machine; put the data on a "
                f"PersistentVolumeClaim (pvc://CLAIM/PATH) or S3/MinIO (s3://BUCKET/PREFIX)."
            )
    if settings.code:  # the code and every s3:// input by presigned URL (presigned.py), one init container
        storage.presigned = dict(argument.split("=", 1) for argument in pulled)
        volume = SCRATCH_VOLUME if pulled else None
        storage.init_containers.append(pull_container(require_image(settings), settings.python, DATA_ROOT, volume))
        storage.volumes += presigned_volumes(secret_name(spec.name.lower()))
        storage.mounts.append({"name": CODE_VOLUME, "mountPath": CODE_ROOT})
    elif pulled:  # one init container for all of them: one interpreter start per pod
        storage.init_containers.append(s3_puller(pulled, settings))
    if pulled:
        storage.volumes.append({"name": SCRATCH_VOLUME, "emptyDir": {}})
        storage.mounts.append({"name": SCRATCH_VOLUME, "mountPath": DATA_ROOT})
    for what, value, path in (("output", spec.output, "/cloudddp/output"), ("checkpoint", spec.checkpoint, "/cloudddp/checkpoint")):  # fmt: skip
        if value is None:
            continue
        if not value.startswith("pvc://"):
            raise CloudDDPError(
                f"{what}={value!r}: on Kubernetes write it to a PersistentVolumeClaim (pvc://CLAIM/PATH)."
            )
        mount_claim(storage, value, what, path, read_only=False)
    storage.env["CLOUDDDP_MODEL_DIR"] = "/cloudddp/output/model" if spec.output else "/tmp/cloudddp/model"
    if spec.checkpoint:
        storage.env["CLOUDDDP_CHECKPOINT_DIR"] = "/cloudddp/checkpoint"
    return storage


def check_environment(spec: JobSpec, settings: KubernetesSettings) -> None:
    """Names the script's shell can read (as on every other provider). A secret among the values is refused before
    (the manifest holds them in clear: Kubernetes' PROVIDER.in_clear)."""
    for name in [*spec.environment, *settings.secret_env]:
        if not ENV_NAME.fullmatch(name):
            raise CloudDDPError(f"environment variable name {name!r} is not a valid shell variable name.")


def environment(spec: JobSpec, settings: KubernetesSettings, storage: Storage) -> list[dict[str, Any]]:
    """Container variables: plain ones by value, secrets only as Secret references."""
    check_environment(spec, settings)
    # The user's own value wins (CLOUDDDP_MODEL_DIR elsewhere, say), as on the Slurm, PBS, OCI and local nodes.
    plain = {**spec.environment, **{k: v for k, v in storage.env.items() if k not in spec.environment}}
    both = sorted(set(plain) & set(settings.secret_env))
    # The kubelet would keep the last entry of a repeated name without a word: makeEnvironmentVariables
    # fills a map, tmpEnv[envVar.Name] = runtimeVal (kubernetes/kubernetes pkg/kubelet/kubelet_pods.go at 001a80e9).
    if both:
        raise CloudDDPError(
            f"kubernetes.secret_env.{both[0]}: {both[0]} is also set "
            f"{'in environment' if both[0] in spec.environment else 'by cloudddp'}; give each variable one source."
        )
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in plain.items()]
    for variable, reference in settings.secret_env.items():
        secret, _, key = reference.partition("/")
        env.append({"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    return env


def resources(settings: KubernetesSettings) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if settings.cpu:
        limits["cpu"] = settings.cpu
    if settings.memory:
        limits["memory"] = settings.memory
    if settings.gpus:
        limits["nvidia.com/gpu"] = settings.gpus
    return {"limits": limits, "requests": dict(limits)} if limits else {}


def pod_placement(settings: KubernetesSettings) -> dict[str, Any]:
    """The core/v1 PodSpec fields that place the job's pods and let them pull and authenticate, those set."""
    fields = {
        "nodeSelector": settings.node_selector,
        "tolerations": [t.model_dump(exclude_none=True) for t in settings.tolerations],
        "imagePullSecrets": [{"name": name} for name in settings.image_pull_secrets],
        "serviceAccountName": settings.service_account,
    }
    return {name: value for name, value in fields.items() if value}


def command(spec: JobSpec, settings: KubernetesSettings) -> tuple[list[str], list[str]]:
    """(command, args): the launcher and the script, then the script's arguments."""
    target = ["-m", spec.entry_point] if spec.module else [posixpath.join(settings.working_dir, spec.entry_point)]
    return [*settings.launcher, *target], spec.script_args()


NO_IMAGE = (
    "kubernetes.image is not set: name the training image that holds cloudddp-launch and your code "
    "(--image REGISTRY/NAME:TAG; infra/docker/Dockerfile builds one)."
)


def require_image(settings: KubernetesSettings) -> str:
    if not settings.image:
        raise CloudDDPError(NO_IMAGE)
    return settings.image
