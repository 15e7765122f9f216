"""The `kubernetes:` section of the job spec (validated; unknown keys are errors)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cloudddp.redact import has_url_credentials, redact_text
from cloudddp.spec import Section

# Kubernetes object names: DNS-1123 subdomain (Secrets, PVCs) and label (namespaces).
DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# A resource quantity as the CRDs take it (resources.limits, x-kubernetes-int-or-string): the pattern of
# kubeflow.org_pytorchjobs.v1.9.0.yaml (tests/data/schemas) and of Trainer's resourcesPerNode, the grammar of
# kubernetes/apimachinery pkg/api/resource/quantity.go (HEAD eed236ceee2c19c2753a3d93ac0631dc20750454): `.5`,
# `1e3`, `1000n`, `+2` are quantities. A negative one passes the CRD but not the pod (ValidateNonnegativeQuantity).
QUANTITY = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# kubernetes/apimachinery pkg/util/validation/validation.go, tag v0.34.0, commit
# b72d93d174332f952a8d431419fece5e6f044bcb (at master, commit eed236ceee2c19c2753a3d93ac0631dc20750454, the label
# rules moved unchanged to pkg/api/validate/content/kube.go as IsLabelKey / IsLabelValue):
# - IsDNS1035Label: [a-z]([-a-z0-9]*[a-z0-9])?, at most DNS1035LabelMaxLength = 63 (Service names, Kubeflow job names);
# - IsQualifiedName (label keys): an optional DNS-1123 subdomain prefix and '/', then a name of at most 63
#   characters matching ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]; more than one '/' is refused;
# - IsValidLabelValue: empty, or at most LabelValueMaxLength = 63 characters of the same form as that name.
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_1035_MAX = 63
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_MAX = 63
# activeDeadlineSeconds for a job without max_runtime (spec.runtime_limit): cloudddp's 24 h, as before that rule. A
# PyTorchJob or TrainJob has no deadline of its own; whether to send none is left open (issue 34 names the others).
DEFAULT_MAX_RUNTIME = 24 * 3600
# Presigned GET URLs (kubernetes.code): a SigV4 query signature works at most 7 days (X-Amz-Expires 1..604800, AWS S3
# API reference, "Authenticating Requests: Using Query Parameters"); a day by default, as long as the default runtime.
MAX_URL_LIFETIME = 7 * 24 * 3600
DEFAULT_URL_LIFETIME = 24 * 3600


def check_subdomain(value: str, what: str) -> str:
    if not DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"{what} {value!r} is not a valid Kubernetes name: lower-case letters, digits, '-' and '.', "
            f"starting and ending with a letter or digit, at most 253 characters"
        )
    return value


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes label key (IsQualifiedName), or None if it is one."""
    if key.count("/") > 1:
        return "it has more than one '/' (write PREFIX/NAME or NAME)"
    prefix, slash, name = key.rpartition("/")
    if slash and not DNS_SUBDOMAIN.fullmatch(prefix):
        return f"its prefix {prefix!r} is not a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253)"
    if len(name) > LABEL_MAX or not QUALIFIED_NAME.fullmatch(name):
        return (
            f"its name {name!r} is not 1-{LABEL_MAX} letters, digits, '-', '_' or '.' starting and ending with "
            f"a letter or digit"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a Kubernetes label value (IsValidLabelValue), or None if it is one (empty is one)."""
    if value and (len(value) > LABEL_MAX or not QUALIFIED_NAME.fullmatch(value)):
        return (
            f"it is not empty or 1-{LABEL_MAX} letters, digits, '-', '_' or '.' starting and ending with a letter "
            f"or digit"
        )
    return None


def check_node_selector(selector: dict[str, str]) -> dict[str, str]:
    """A pod's nodeSelector is validated as labels: kubernetes/kubernetes pkg/apis/core/validation/validation.go
    ValidatePodSpec calls unversionedvalidation.ValidateLabels(spec.NodeSelector) (read at commit
    000f26050b9be6fb3d79fae95e06b47fc96128cd), which is IsQualifiedName on each key and IsValidLabelValue on each
    value (apimachinery pkg/apis/meta/v1/validation/validation.go ValidateLabels, tag v0.34.0, commit b72d93d1)."""
    for key, value in selector.items():
        problem = label_key_problem(key)
        if problem:
            raise ValueError(f"node selector key {key!r} is not a Kubernetes label key: {problem}")
        problem = label_value_problem(value)
        if problem:
            raise ValueError(f"node selector {key}={value!r}: the value is not a Kubernetes label value: {problem}")
    return selector


class Toleration(BaseModel):
    """One pod toleration (core/v1 Toleration), in Kubernetes' own field names."""

    model_config = ConfigDict(extra="forbid")
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    tolerationSeconds: int | None = None

    def problem(self) -> str | None:
        """Why the API server would refuse this toleration in a pod, or None.

        kubernetes/kubernetes pkg/apis/core/validation/validation.go ValidateTolerations (read at commit
        000f26050b9be6fb3d79fae95e06b47fc96128cd from a stored copy of the file): a key is a label name
        (ValidateLabelName = IsQualifiedName); an empty key needs operator Exists; tolerationSeconds needs effect
        NoExecute; Equal's value is a label value (IsValidLabelValue); Exists takes no value. The CRDs do not check the
        pod template, so such a job would be created and its pods refused when the operator makes them.
        """
        if self.key:
            key_problem = label_key_problem(self.key)
            if key_problem:
                return f"the key {self.key!r} is not a label key: {key_problem}"
        elif self.operator != "Exists":
            return "a toleration without a key must have operator Exists (it then matches every taint)"
        if self.tolerationSeconds is not None and self.effect != "NoExecute":
            return f"tolerationSeconds applies to effect NoExecute only (effect here: {self.effect or 'none'})"
        if self.operator == "Exists" and self.value:
            return f"operator Exists takes no value (value here: {self.value!r}); drop it or use operator Equal"
        value_problem = label_value_problem(self.value or "") if self.operator == "Equal" else None
        if value_problem:
            return f"the value {self.value!r} is not a label value: {value_problem}"
        return None


# A Secret's key (a secretKeyRef's key): kubernetes/kubernetes validation.go validateSecretKeySelector (commit
# 000f2605, as above) calls IsConfigMapKey, which is kubernetes/apimachinery pkg/util/validation/validation.go (HEAD
# eed236ceee2c19c2753a3d93ac0631dc20750454): at most 253 characters of [-._a-zA-Z0-9], not '.' or '..' nor starting
# with '..' (hasChDirPrefix).
SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


def secret_key_problem(key: str) -> str | None:
    if not SECRET_KEY.fullmatch(key):
        return "a Secret's key is 1-253 letters, digits, '-', '_' or '.'"
    if key in (".", "..") or key.startswith(".."):
        return "a Secret's key may not be '.' or '..' nor start with '..'"
    return None


class ElasticSettings(Section):
    """PyTorchJob `elasticPolicy`: a node range and a dynamic rendezvous (c10d or etcd)."""

    min_nodes: int = Field(ge=1)
    max_nodes: int = Field(ge=1)
    rdzv_backend: Literal["c10d", "etcd", "etcd-v2"] = "c10d"
    rdzv_host: str | None = Field(default=None, description="etcd: the etcd service; c10d default: <job>-worker-0")
    rdzv_port: int | None = Field(default=None, ge=1, le=65535)
    max_restarts: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _range(self) -> ElasticSettings:
        if self.min_nodes > self.max_nodes:
            raise ValueError(f"min_nodes={self.min_nodes} is above max_nodes={self.max_nodes}")
        return self


class KubernetesSettings(Section):
    """Kubeflow jobs on Kubernetes: a PyTorchJob (training-operator v1) or a Trainer v2 TrainJob."""

    kubeflow_api: Literal["v1", "trainer-v2"] = Field(
        default="v1", description="v1: kubeflow.org/v1 PyTorchJob; trainer-v2: trainer.kubeflow.org TrainJob"
    )
    image: str | None = Field(default=None, description="training image holding cloudddp-launch and the code")
    working_dir: str = Field(default="/workspace", description="where the source folder is inside the image")
    launcher: list[str] = Field(default_factory=lambda: ["cloudddp-launch"], description="command in the image")
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = Field(default=None, description="default: the kubeconfig context's, else 'default'")
    runtime: str = Field(default="torch-distributed", description="trainer-v2: the ClusterTrainingRuntime")
    trainer_release: Literal["v2.2", "v2.1", "v2.0"] = Field(
        default="v2.2",
        description="trainer-v2: the cluster's Kubeflow Trainer release; v2.2 also stands for later ones "
        "(runtimePatches), v2.1 takes podTemplateOverrides, v2.0 podSpecOverrides",
    )
    cpu: str | None = None
    memory: str | None = None
    gpus: int = Field(default=0, ge=0, description="nvidia.com/gpu per node")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)
    image_pull_secrets: list[str] = Field(default_factory=list)
    service_account: str | None = None
    restart_policy: Literal["Never", "OnFailure", "ExitCode"] = "Never"
    backoff_limit: int = Field(default=0, ge=0)
    ttl_seconds_after_finished: int | None = Field(default=None, ge=0)
    elastic: ElasticSettings | None = None
    s3_endpoint: str | None = Field(default=None, description="MinIO/S3 URL for s3:// inputs (default: AWS S3)")
    s3_secret: str | None = Field(default=None, description="Secret with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
                                  "(default: the pod's own AWS identity, e.g. IRSA)")  # fmt: skip
    s3_region: str | None = Field(default=None, description="the bucket's region (AWS S3); default us-east-1")
    python: str = Field(
        default="python", description="the image's Python: runs the pull (without code it must import cloudddp)"
    )
    secret_env: dict[str, str] = Field(default_factory=dict, description="VAR -> SECRET/KEY (never inlined)")
    code: str | None = Field(default=None, description="s3://BUCKET/PREFIX: stage the source folder there with the "
                             "launcher bundled; pods fetch it and s3:// inputs by presigned URL (any image with "
                             "Python: no cloudddp, no boto3, no keys in the cluster)")  # fmt: skip
    url_lifetime: int = Field(default=DEFAULT_URL_LIFETIME, ge=1, description="with code: seconds the presigned "
                              "URLs work after submit (at most 604800, S3's 7 days)")  # fmt: skip

    @field_validator("url_lifetime")
    @classmethod
    def _url_lifetime(cls, value: int) -> int:
        if value > MAX_URL_LIFETIME:
            raise ValueError(
                f"kubernetes.url_lifetime={value}: a presigned S3 URL works at most {MAX_URL_LIFETIME} seconds (7 "
                f"days; SigV4's X-Amz-Expires), so the pods could not fetch the code after that. Give at most "
                f"{MAX_URL_LIFETIME}, or keep the default ({DEFAULT_URL_LIFETIME}, a day)"
            )
        return value

    @field_validator("code")
    @classmethod
    def _code(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/\S*)?", value):
            raise ValueError(f"{value!r} is not an s3://BUCKET/PREFIX URI (where the source folder is staged)")
        return value

    @field_validator("image_pull_secrets")
    @classmethod
    def _pull_secret_names(cls, value: list[str]) -> list[str]:
        return [check_subdomain(name, "image pull Secret name") for name in value]

    @field_validator("s3_secret")
    @classmethod
    def _s3_secret_name(cls, value: str | None) -> str | None:
        return check_subdomain(value, "Secret name") if value is not None else None

    @field_validator("secret_env")
    @classmethod
    def _secret_refs(cls, value: dict[str, str]) -> dict[str, str]:
        for variable, reference in value.items():
            secret, sep, key = reference.partition("/")
            if not sep or not key:
                raise ValueError(f"{variable}={reference!r}: write SECRET/KEY (the Secret's name and the key in it)")
            check_subdomain(secret, "Secret name")
            problem = secret_key_problem(key)
            if problem:
                raise ValueError(f"{variable}={reference!r}: the key {key!r} is not a Secret key: {problem}")
        return value

    @field_validator("tolerations")
    @classmethod
    def _tolerations(cls, value: list[Toleration]) -> list[Toleration]:
        for index, toleration in enumerate(value):
            problem = toleration.problem()
            if problem:
                shown = toleration.model_dump(exclude_unset=True)  # as written
                raise ValueError(f"tolerations[{index}] {shown}: {problem}")
        return value

    @field_validator("service_account")
    @classmethod
    def _service_account(cls, value: str | None) -> str | None:
        # ValidateServiceAccountName = NameIsDNSSubdomain (kubernetes/apimachinery pkg/api/validation/generic.go,
        # HEAD eed236ce); the pod would be refused when the operator creates it.
        return check_subdomain(value, "service account name") if value is not None else None

    @field_validator("node_selector")
    @classmethod
    def _node_selector(cls, value: dict[str, str]) -> dict[str, str]:
        return check_node_selector(value)

    @field_validator("s3_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^/\s]+(/\S*)?", value):
            raise ValueError(f"{value!r} is not an http:// or https:// URL (e.g. http://minio.minio:9000)")
        if value is not None and has_url_credentials(value):
            # The endpoint is written into the manifest, readable by anyone who can read the job.
            raise ValueError(
                f"{redact_text(value)!r} holds credentials in the URL, which would be readable in the job's manifest; "
                f"give the endpoint alone and the keys in the Secret named by kubernetes.s3_secret "
                f"(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
            )
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        if value is not None and not DNS_LABEL.match(value):
            raise ValueError(f"namespace {value!r} must be a DNS label (lower-case letters, digits, '-', <= 63)")
        return value

    @field_validator("cpu", "memory", mode="before")
    @classmethod
    def _number_as_quantity(cls, value: Any) -> Any:
        # `cpu: 4` (or 0.5) is how Kubernetes manifests write it: the same quantity as "4". A bool stays, to be refused.
        return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str | None) -> str | None:
        if value is not None and not QUANTITY.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 4, 0.5, 500m, 16Gi, 1e3)")
        if value is not None and value.startswith("-"):
            raise ValueError(f"{value!r} is negative; Kubernetes refuses a pod asking for a negative quantity")
        return value
