"""A loopback Kubernetes API server for the Kubeflow resources cloudddp uses (no real one can run here).

It answers the real `kubernetes` Python client over HTTP on 127.0.0.1 and checks what the real
API server checks for these calls:
- authentication: `Authorization: Bearer <token>` must be the kubeconfig's token (401 otherwise);
- routing: only the paths and verbs below exist (404 / 405 otherwise);
- creates: the body's apiVersion/kind match the path, its namespace matches the path's, the name
  is a DNS-1123 subdomain, the object validates against the CRD's OpenAPI v3 schema (422 Invalid
  with the causes), and fields the schema does not know are pruned with a `Warning` header, as the
  server does with its default fieldValidation=Warn, or refused with 400 BadRequest under
  fieldValidation=Strict (Ignore is not told apart from Warn); the CRD's CEL rules on metadata.name (a TrainJob's
  DNS-1035 label, 422 Invalid); a PyTorchJob must pass the training operator's validating webhook and a TrainJob
  Trainer's against the installed runtime (403, `pytorchjob_webhook_errors`, `trainjob_webhook_errors`); a second
  object of one name is 409 AlreadyExists;
- what the cluster refuses only after it accepted the job, when the operator or JobSet creates the job's Services,
  Jobs and pods (`derived_object_errors`: Service and JobSet pod names, volume mount subPaths, nodeSelector labels):
  a real server takes the job, which then never starts; this fake has no operator, so it refuses the job itself
  (422 Invalid, the message naming the object that could not be made), so that a test sees it;
- Secrets (the pods' presigned URLs, kubernetes.code) are created, their metadata patched, and deleted;
- reads, deletes and pod logs of missing objects are 404 NotFound; a log of a container that has
  not started is 400, as is a container name the pod does not have.
Errors are `Status` objects shaped as kubernetes/apimachinery pkg/api/errors/errors.go builds them.

The operator's side (conditions, pods, their container statuses and logs) is set by the test: `set_conditions`,
`add_pod`.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import yaml

SCHEMAS = Path(__file__).resolve().parents[1] / "data" / "schemas"
# plural -> (group, version, kind, CRD file)
RESOURCES = {
    "pytorchjobs": ("kubeflow.org", "v1", "PyTorchJob", "kubeflow.org_pytorchjobs.v1.9.0.yaml"),
    "trainjobs": ("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainer.kubeflow.org_trainjobs.v2.3.0.yaml"),
}
# The TrainJob CRDs of the older Trainer releases, by the release a job is rendered for (provenance in
# SCHEMAS/README.md: kubeflow/trainer tags v2.1.0, commit 73c9bece, and v2.0.1, commit 332ad393). Each knows only
# its own overrides field; install one with FakeAPIServer.crd_files["trainjobs"].
OLDER_TRAINJOB_CRDS = {
    "v2.1": "trainer.kubeflow.org_trainjobs.v2.1.0.yaml",
    "v2.0": "trainer.kubeflow.org_trainjobs.v2.0.1.yaml",
}
CUSTOM = re.compile(
    r"^/apis/(?P<group>[^/]+)/(?P<version>[^/]+)/namespaces/(?P<ns>[^/]+)/(?P<plural>[^/]+)(/(?P<name>[^/]+))?$"
)
PODS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/pods(/(?P<name>[^/]+)(?P<log>/log)?)?$")
PVC = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/persistentvolumeclaims/(?P<name>[^/]+)$")
SECRETS = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/secrets(/(?P<name>[^/]+))?$")
DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SUBDOMAIN_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


# Ported from kubernetes/apimachinery pkg/util/validation/validation.go, tag v0.34.0, commit
# b72d93d174332f952a8d431419fece5e6f044bcb (IsDNS1035Label, IsQualifiedName, IsValidLabelValue, RegexError,
# MaxLenError, messages as there) and written here again, not imported from cloudddp: the fake checks cloudddp.
DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
               "character, and end with an alphanumeric character")  # fmt: skip
QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                   "must start and end with an alphanumeric character")  # fmt: skip
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                 "must start and end with an alphanumeric character")  # fmt: skip


def regex_error(message: str, fmt: str, *examples: str) -> str:
    shown = "".join(f"{' or ' if i else ''}'{example}', " for i, example in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def is_dns1035_label(value: str) -> list[str]:
    errors = [] if len(value) <= 63 else ["must be no more than 63 characters"]
    if not re.fullmatch(DNS1035_FMT, value):
        errors.append(regex_error(DNS1035_MSG, DNS1035_FMT, "my-name", "abc-123"))
    return errors


def is_qualified_name(value: str) -> list[str]:
    parts = value.split("/")
    if len(parts) > 2:
        return ["a qualified name " + regex_error(QNAME_MSG, QNAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]  # fmt: skip
    errors, name = [], parts[-1]
    if len(parts) == 2 and not parts[0]:
        errors.append("prefix part must be non-empty")
    elif len(parts) == 2:
        errors += ["prefix part must be no more than 253 characters"] if len(parts[0]) > 253 else []
        errors += [] if re.fullmatch(SUBDOMAIN_FMT, parts[0]) else [
            "prefix part " + regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, "example.com")]  # fmt: skip
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not re.fullmatch(QNAME_FMT, name):
        errors.append("name part " + regex_error(QNAME_MSG, QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errors


def is_valid_label_value(value: str) -> list[str]:
    errors = [] if len(value) <= 63 else ["must be no more than 63 characters"]
    if not re.fullmatch(f"({QNAME_FMT})?", value):
        errors.append(regex_error(LABEL_VALUE_MSG, f"({QNAME_FMT})?", "MyValue", "my_value", "12345"))
    return errors


def crd_schema(plural: str, crd_file: str | None = None) -> dict[str, Any]:
    """The openAPIV3Schema of the CRD `crd_file` in SCHEMAS (default: the one RESOURCES names for `plural`)."""
    return schema_in(crd_file or RESOURCES[plural][3])


@functools.cache
def schema_in(crd_file: str) -> dict[str, Any]:
    """Read once: the PyTorchJob CRD is 600 kB of YAML."""
    crd = yaml.load((SCHEMAS / crd_file).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def crd_validator(plural: str, crd_file: str | None = None) -> jsonschema.Draft7Validator:
    """A validator for the CRD's schema (built once; `jsonschema.validate` would re-check the schema itself)."""
    return validator_of(crd_file or RESOURCES[plural][3])


@functools.cache
def validator_of(crd_file: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(schema_in(crd_file))


# The ClusterTrainingRuntimes installed on the cluster, by name (Trainer's default torch runtime).
RUNTIMES = {"torch-distributed": SCHEMAS / "runtime_torch_distributed.v2.3.0.yaml"}
TORCHRUN_RESERVED = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
DOMAIN_PREFIXED_PATH = re.compile(r"^(?P<domain>[^/]+)/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$")


def trainjob_webhook_errors(obj: dict[str, Any]) -> list[str]:
    """What Trainer's validating admission webhook refuses in a TrainJob (kubeflow/trainer tag v2.3.0, commit
    658725bdae5c7e3a0854d93ac6ff492e109a22ab: pkg/webhooks/trainjob_webhook.go, the runtime's plugins'
    Validate in pkg/runtime/framework/plugins/jobset/jobset.go and torch/torch.go, the reserved names in
    pkg/constants/constants.go, the manager check k8s.io/apimachinery validation.IsDomainPrefixedPath).
    The pod overrides of older releases get their own release's checks (jobset.go's Validate at v2.1.0,
    commit 73c9bece, and v2.0.1, commit 332ad393): the same target job and container rules, and at v2.0.1
    no job targeted twice. The runtime's job and container are `node` at all three tags."""
    spec = obj.get("spec", {})
    runtime_name = spec.get("runtimeRef", {}).get("name")
    if runtime_name not in RUNTIMES:
        return [f"spec.runtimeRef: Invalid value: {runtime_name!r}: ClusterTrainingRuntime not found"]
    runtime = yaml.safe_load(RUNTIMES[runtime_name].read_text())
    jobs = {job["name"]: {c["name"] for part in ("initContainers", "containers")
                          for c in job["template"]["spec"]["template"]["spec"].get(part, [])}
            for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]}  # fmt: skip
    # v2.0.1's ValidateCreate: IsDNS1035Label(trainJob.Name). From v2.1.0 the CRD's CEL rules say the same (422,
    # before any webhook: crd_rule_errors), so at those releases a bad name never gets here.
    name = obj.get("metadata", {}).get("name", "")
    errors = [f"metadata.name: Invalid value: {json.dumps(name)}: {e}" for e in is_dns1035_label(name)]
    reserved = sorted(TORCHRUN_RESERVED & {e["name"] for e in spec.get("trainer", {}).get("env", [])})
    if reserved:
        errors.append(
            f"spec.trainer.env: Invalid value: must not have reserved envs, invalid envs configured: {reserved}"
        )
    for patch in spec.get("runtimePatches", []):
        match = DOMAIN_PREFIXED_PATH.match(patch.get("manager", ""))
        if not match or not DNS_SUBDOMAIN.match(match["domain"]):
            errors.append(f"spec.runtimePatches.manager: Invalid value: {patch.get('manager')!r}: must be a "
                          f'domain-prefixed path (such as "acme.io/foo")')  # fmt: skip
    targeted = [t["name"] for o in spec.get("podSpecOverrides", []) for t in o.get("targetJobs", [])]
    errors += [f"spec.podSpecOverrides: Duplicate value: {name!r}" for name in sorted(
        {n for n in targeted if targeted.count(n) > 1})]  # fmt: skip
    for where, job, pod in overridden_pods(spec):
        if job not in jobs:
            what = "replicated job" if where == "runtimePatches" else "targetJob"
            errors.append(f"spec.{where}: Invalid value: must not have {what} that doesn't exist in the runtime job "
                          "template")  # fmt: skip
            continue
        for part, word in (("initContainers", "initContainer"), ("containers", "container")):
            for container in pod.get(part, []):
                if container["name"] not in jobs[job]:
                    errors.append(f"spec.{where}: Invalid value: must not have {word} that doesn't exist in the "
                                  f"runtime job {job}")  # fmt: skip
                elif (
                    part == "containers"
                    and container.get("env")
                    and container["name"] in ("dataset-initializer", "model-initializer", "node")
                ):
                    errors.append(f"spec.{where}: Invalid value: must not have envs for the dataset-initializer, "
                                  "model-initializer, node containers")  # fmt: skip
    return errors


def overridden_pods(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(field, runtime job, pod fields) for each job a TrainJob amends: runtimePatches (v2.2 on),
    podTemplateOverrides (v2.1) or podSpecOverrides (v2.0)."""
    found = []
    for patch in spec.get("runtimePatches", []):
        for job in patch.get("trainingRuntimeSpec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", []):
            found.append(("runtimePatches", job["name"], job.get("template", {}).get("spec", {}).get("template", {})
                          .get("spec", {})))  # fmt: skip
    for override in spec.get("podTemplateOverrides", []):
        found += [("podTemplateOverrides", t["name"], override.get("spec") or {}) for t in override["targetJobs"]]
    for override in spec.get("podSpecOverrides", []):
        found += [("podSpecOverrides", t["name"], override) for t in override["targetJobs"]]
    return found


def pytorchjob_webhook_errors(obj: dict[str, Any]) -> list[str]:
    """The training operator's validating webhook on a PyTorchJob's name (kubeflow/training-operator tag v1.9.0,
    commit 6f74c7f6b2ed6c27aabd82d0a316b23f0646059c, pkg/webhooks/pytorch/pytorchjob_webhook.go validatePyTorchJob:
    NameIsDNS1035Label, the messages joined by "," after "should match: "). The spec checks the CRD schema covers."""
    name = obj.get("metadata", {}).get("name", "")
    errors = is_dns1035_label(name)
    return [f"metadata.name: Invalid value: {json.dumps(name)}: should match: {','.join(errors)}"] if errors else []


CEL_NAME_MATCHES = re.compile(r"self\.metadata\.name\.matches\('(?P<regex>[^']*)'\)")
CEL_NAME_SIZE = re.compile(r"size\(self\.metadata\.name\) <= (?P<most>[0-9]+)")


def crd_rule_errors(schema: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """The CRD's own CEL rules on the object as a whole (x-kubernetes-validations at the schema's root): the two on
    metadata.name that Trainer's TrainJob CRD has from v2.1.0 (pkg/apis/trainer/v1alpha1/trainjob_types.go, tag
    v2.3.0, commit 658725bdae5c7e3a0854d93ac6ff492e109a22ab). A root rule of another form is not guessed at."""
    name = obj.get("metadata", {}).get("name", "")
    errors = []
    for rule in schema.get("x-kubernetes-validations", []):
        if match := CEL_NAME_MATCHES.fullmatch(rule["rule"]):
            holds = re.search(match["regex"], name) is not None
        elif match := CEL_NAME_SIZE.fullmatch(rule["rule"]):
            holds = len(name) <= int(match["most"])
        else:
            raise NotImplementedError(f"the fake API server cannot evaluate the CRD rule {rule['rule']!r}")
        errors += [] if holds else [f'Invalid value: "object": {rule["message"]}']  # at the root: field <nil>
    return errors


def derived_object_errors(plural: str, obj: dict[str, Any]) -> list[str]:
    """What the API server refuses when the operator or JobSet makes the job's Services, Jobs and pods."""
    pods = replica_pods(obj) if plural == "pytorchjobs" else [pod for _, _, pod in overridden_pods(obj["spec"])]
    names = service_name_errors(obj) if plural == "pytorchjobs" else jobset_name_errors(obj)
    return names + [f"the job's pods: {error}" for pod in pods for error in pod_spec_errors(pod)]


def replica_pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [replica["template"].get("spec", {}) for replica in obj["spec"]["pytorchReplicaSpecs"].values()]


def service_name_errors(obj: dict[str, Any]) -> list[str]:
    """The training operator's Services, one per replica, `<job>-<type lower>-<index>` (kubeflow/training-operator
    v1.9.0, commit 6f74c7f6: pkg/controller.v1/common/service.go ReconcileServices/CreateNewService, util.go
    GenGeneralName; an elastic job's HPA, pytorch/hpa.go, grows the Workers to maxReplicas), are refused unless
    their names are DNS-1035 labels (kubernetes/kubernetes pkg/apis/core/validation/validation.go
    ValidateServiceName = NameIsDNS1035Label, commit 000f26050b9be6fb3d79fae95e06b47fc96128cd)."""
    grown = obj["spec"].get("elasticPolicy", {}).get("maxReplicas", 0)
    errors = []
    for kind, replica in obj["spec"]["pytorchReplicaSpecs"].items():
        last = max(replica.get("replicas", 1), grown if kind == "Worker" else 0) - 1
        service = f"{obj['metadata']['name']}-{kind.lower()}-{last}"
        errors += [f"Service {json.dumps(service)} is invalid: metadata.name: Invalid value: {json.dumps(service)}: "
                   f"{e}" for e in is_dns1035_label(service)]  # fmt: skip
    return errors


def jobset_name_errors(obj: dict[str, Any]) -> list[str]:
    """JobSet's webhook on the JobSet Trainer makes of a TrainJob, named as it (kubernetes-sigs/jobset tag v0.12.0,
    commit f22e565ac3cc3265c7c45ef67ecffdc689af5d77, pkg/webhooks/jobset_webhook.go ValidateCreate): the longest job
    name (pkg/util/placement GenJobName) and, Indexed being JobSet's default completionMode, the longest pod name
    (GenPodName + "-abcde") of each replicated job must be DNS-1035 labels; a name too long gets JobSet's message."""
    name = obj["metadata"]["name"]
    runtime = yaml.safe_load(RUNTIMES[obj["spec"]["runtimeRef"]["name"]].read_text())
    errors = []
    for index, job in enumerate(runtime["spec"]["template"]["spec"]["replicatedJobs"]):
        job_name = f"{name}-{job['name']}-{job.get('replicas', 1) - 1}"
        pod_name = f"{job_name}-{jobset_pods(obj, runtime, job) - 1}-abcde"
        where = f"spec.replicatedJobs[{index}].name: Invalid value: {json.dumps(job_name)}"
        errors += [f"{where}: {too_long(error, 'job')}" for error in is_dns1035_label(job_name)]
        errors += [f"{where}: {too_long(error, 'pod')}" for error in is_dns1035_label(pod_name)]
    return errors


def jobset_pods(obj: dict[str, Any], runtime: dict[str, Any], job: dict[str, Any]) -> int:
    """The pods (completions) of one of the runtime's jobs: its parallelism (1 unless set), the trainer's job
    numNodes (kubeflow/trainer tag v2.3.0, commit 658725bd: pkg/runtime/core/trainingruntime.go, the torch
    plugin's torch.go, and jobset/jobset.go SyncParallelCount setting completions to that count)."""
    labels = job["template"].get("metadata", {}).get("labels", {})
    if labels.get("trainer.kubeflow.org/trainjob-ancestor-step") != "trainer":
        return int(job["template"]["spec"].get("parallelism", 1))
    default = runtime["spec"].get("mlPolicy", {}).get("numNodes", 1)
    return int(obj["spec"].get("trainer", {}).get("numNodes", default))


def too_long(error: str, what: str) -> str:
    """JobSet's own words for a generated name over 63 characters (jobNameTooLongErrorMsg, podNameTooLongErrorMsg)."""
    if error == "must be no more than 63 characters":
        return f"JobSet name is too long, {what} names generated for this JobSet will exceed 63 characters"
    return error


def pod_spec_errors(pod: dict[str, Any]) -> list[str]:
    """kubernetes/kubernetes pkg/apis/core/validation/validation.go (commit 000f26050b9be6fb3d79fae95e06b47fc96128cd,
    read from a stored copy of the file): ValidatePodSpec validates nodeSelector as labels
    (unversionedvalidation.ValidateLabels: IsQualifiedName keys, IsValidLabelValue values), and ValidateVolumeMounts
    each subPath with validateLocalDescendingPath (not absolute, no '..' element; the error's path is the list's)."""
    errors = []
    for key, value in pod.get("nodeSelector", {}).items():
        errors += [f"spec.nodeSelector: Invalid value: {json.dumps(key)}: {e}" for e in is_qualified_name(key)]
        errors += [f"spec.nodeSelector: Invalid value: {json.dumps(value)}: {e}" for e in is_valid_label_value(value)]
    for part in ("initContainers", "containers"):
        for index, container in enumerate(pod.get(part, [])):
            for mount in container.get("volumeMounts", []):
                errors += sub_path_errors(mount.get("subPath", ""), f"spec.{part}[{index}].volumeMounts.subPath")
    return errors


def sub_path_errors(sub_path: str, where: str) -> list[str]:
    """validateLocalDescendingPath and validatePathNoBacksteps (one error for any number of '..')."""
    errors = [f"{where}: Invalid value: {json.dumps(sub_path)}: must be a relative path"] if sub_path[:1] == "/" else []
    if ".." in sub_path.split("/"):
        errors.append(f"{where}: Invalid value: {json.dumps(sub_path)}: must not contain '..'")
    return errors


# plural -> (the validating webhook's name, its refusals)
WEBHOOKS = {
    "pytorchjobs": ("validator.pytorchjob.training-operator.kubeflow.org", pytorchjob_webhook_errors),
    "trainjobs": ("validator.trainjob.trainer.kubeflow.org", trainjob_webhook_errors),
}


def status_error(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}  # fmt: skip
    if details:
        body["details"] = details
    return body


def prune(value: Any, schema: dict[str, Any], path: str, dropped: list[str]) -> Any:
    """Drop fields a structural schema does not declare (the API server's pruning), noting each."""
    if isinstance(value, dict) and "properties" in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
        kept = {}
        for key, item in value.items():
            if key in schema["properties"]:
                kept[key] = prune(item, schema["properties"][key], f"{path}.{key}", dropped)
            elif path == "" and key in ("apiVersion", "kind", "metadata"):
                kept[key] = item
            else:
                dropped.append(f"{path}.{key}".lstrip("."))
        return kept
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {k: prune(v, schema["additionalProperties"], f"{path}.{k}", dropped) for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [prune(v, schema["items"], f"{path}[{i}]", dropped) for i, v in enumerate(value)]
    return value


@dataclass
class FakePod:
    namespace: str
    name: str
    labels: dict[str, str]
    container: str
    phase: str = "Running"
    log: str = ""
    conditions: list[dict[str, str]] = field(default_factory=list)  # status.conditions, as the scheduler sets them
    # status.containerStatuses, as the kubelet sets them (core/v1 ContainerStatus: name, state, lastState, ...)
    container_statuses: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class FakeAPIServer:
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # (plural, ns, name)
    pods: list[FakePod] = field(default_factory=list)
    claims: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (ns, name) -> accessModes
    secrets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (ns, name) -> the Secret as sent
    requests: list[tuple[str, str]] = field(default_factory=list)  # (verb, path) as received
    warnings: list[str] = field(default_factory=list)
    deletions: list[dict[str, Any]] = field(default_factory=list)  # DeleteOptions bodies
    # The CRD file installed for a plural, where it is not the one RESOURCES names (an older operator's).
    crd_files: dict[str, str] = field(default_factory=dict)

    # -- what the operator would do -----------------------------------------------------
    def set_conditions(self, plural: str, namespace: str, name: str, conditions: list[dict[str, Any]]) -> None:
        self.objects[(plural, namespace, name)].setdefault("status", {})["conditions"] = conditions

    def add_pod(self, pod: FakePod) -> None:
        self.pods.append(pod)

    def add_claim(self, namespace: str, name: str, access_modes: list[str]) -> None:
        self.claims[(namespace, name)] = access_modes

    # -- serving --------------------------------------------------------------------------
    def start(self) -> str:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                server.handle(self, "GET")

            def do_POST(self) -> None:
                server.handle(self, "POST")

            def do_DELETE(self) -> None:
                server.handle(self, "DELETE")

            def do_PUT(self) -> None:
                server.handle(self, "PUT")

            def do_PATCH(self) -> None:
                server.handle(self, "PATCH")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def handle(self, http: BaseHTTPRequestHandler, verb: str) -> None:
        url = urlsplit(http.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        length = int(http.headers.get("Content-Length") or 0)
        raw = http.rfile.read(length) if length else b""
        self.requests.append((verb, url.path))
        headers: dict[str, str] = {}
        if http.headers.get("Authorization") != f"Bearer {self.token}":
            code, body = 401, status_error(401, "Unauthorized", "Unauthorized")
        else:
            code, body = self.route(verb, url.path, query, raw, headers)
        payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        http.send_response(code)
        http.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
        for name, value in headers.items():
            http.send_header(name, value)
        http.send_header("Content-Length", str(len(payload)))
        http.end_headers()
        http.wfile.write(payload)

    def route(
        self, verb: str, path: str, query: dict[str, str], raw: bytes, headers: dict[str, str]
    ) -> tuple[int, Any]:
        not_found = (404, status_error(404, "NotFound", "the server could not find the requested resource"))
        if match := CUSTOM.match(path):
            plural = match["plural"]
            if plural not in RESOURCES or RESOURCES[plural][:2] != (match["group"], match["version"]):
                return not_found
            if match["name"] is None:
                if verb != "POST":
                    return self.not_allowed(verb)
                return self.create(plural, match["ns"], raw, headers, query.get("fieldValidation", ""))
            if verb == "GET":
                return self.read(plural, match["ns"], match["name"])
            if verb != "DELETE":
                return self.not_allowed(verb)
            return self.delete(plural, match["ns"], match["name"], raw, query)
        if (match := PODS.match(path)) and verb == "GET":
            if match["name"] is None:
                return self.list_pods(match["ns"], query.get("labelSelector", ""))
            return self.pod_log(match["ns"], match["name"], query) if match["log"] else not_found
        if (match := PVC.match(path)) and verb == "GET":
            return self.read_claim(match["ns"], match["name"])
        if match := SECRETS.match(path):
            return self.secret(verb, match["ns"], match["name"], raw)
        return not_found

    @staticmethod
    def not_allowed(verb: str) -> tuple[int, Any]:
        return 405, status_error(
            405, "MethodNotAllowed", f"the server does not allow this method ({verb}) on the requested resource"
        )

    def create(
        self, plural: str, namespace: str, raw: bytes, headers: dict[str, str], field_validation: str
    ) -> tuple[int, Any]:
        group, version, kind, _ = RESOURCES[plural]
        crd_file = self.crd_files.get(plural)
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            return 400, status_error(400, "BadRequest", f"the body of the request was in an unknown format: {exc}")
        if obj.get("apiVersion") != f"{group}/{version}" or obj.get("kind") != kind:
            return 400, status_error(400, "BadRequest", f"the API version in the data ({obj.get('apiVersion')}) "
                                     f"does not match the expected API version ({group}/{version})")  # fmt: skip
        dropped: list[str] = []
        obj = prune(obj, crd_schema(plural, crd_file), "", dropped)
        if dropped and field_validation == "Strict":
            # Refused while decoding, before the checks below; only an object of the CRD's own group and kind is
            # pruned. kubernetes/apiextensions-apiserver commit 1aa2717a, pkg/apiserver/customresource_handler.go
            # (schemaCoercingDecoder: `unknown field "%s"` per pruned path; unstructuredSchemaCoercer.apply);
            # kubernetes/apiserver commit 24a394e5, pkg/endpoints/handlers/create.go and rest.go
            # (transformDecodeError: a BadRequest), message shape as in pkg/endpoints/apiserver_test.go
            # TestFieldValidation ("strict decoding error: " + the errors joined by ", ").
            unknown = ", ".join(f'unknown field "{d}"' for d in dropped)
            message = f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {unknown}'
            return 400, status_error(400, "BadRequest", message)
        meta = obj.get("metadata") or {}
        if meta.get("namespace", namespace) != namespace:
            return 400, status_error(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        name = meta.get("name", "")
        qualified = f"{plural}.{group}"
        if not DNS_SUBDOMAIN.match(name):
            return 422, status_error(422, "Invalid", f"{kind}.{group} {name!r} is invalid: metadata.name: Invalid value: {name!r}",
                                     {"name": name, "group": group, "kind": kind})  # fmt: skip
        refused = self.admission(plural, obj, crd_file)
        if refused:
            return refused
        if (plural, namespace, name) in self.objects:
            return 409, status_error(409, "AlreadyExists", f"{qualified} {json.dumps(name)} already exists",
                                     {"name": name, "group": group, "kind": plural})  # fmt: skip
        if dropped:
            self.warnings += [f'unknown field "{d}"' for d in dropped]
            headers["Warning"] = ", ".join(f'299 - "unknown field \\"{d}\\""' for d in dropped)
        obj["metadata"] = {**meta, "namespace": namespace, "uid": str(uuid.uuid4()), "resourceVersion": "1",
                           "creationTimestamp": "2026-11-22T10:00:00Z", "generation": 1}  # fmt: skip
        self.objects[(plural, namespace, name)] = obj
        return 201, obj

    @staticmethod
    def admission(plural: str, obj: dict[str, Any], crd_file: str | None) -> tuple[int, Any] | None:
        """The CRD's schema and CEL rules (422), the validating webhook (403), then what the cluster would refuse
        once the operator makes the job's objects (422 here; see the module's docstring); None if all pass."""
        group, _, kind, _ = RESOURCES[plural]
        name = obj["metadata"]["name"]
        details = {"name": name, "group": group, "kind": kind}
        errors = sorted(crd_validator(plural, crd_file).iter_errors(obj), key=lambda e: list(e.path))
        causes = [{"field": ".".join(str(p) for p in e.path), "message": e.message} for e in errors]
        causes += [{"field": "<nil>", "message": rule} for rule in crd_rule_errors(crd_schema(plural, crd_file), obj)]
        if causes:
            message = f"{kind}.{group} {name!r} is invalid: " + "; ".join(
                f"{c['field']}: {c['message']}" for c in causes
            )
            return 422, status_error(422, "Invalid", message, {**details, "causes": causes})
        webhook, refusals = WEBHOOKS[plural]
        denied = refusals(obj)
        if denied:  # controller-runtime answers a validator's field errors with Denied: 403
            return 403, status_error(403, "Forbidden", f'admission webhook "{webhook}" denied the request: '
                                     + "; ".join(denied))  # fmt: skip
        derived = derived_object_errors(plural, obj)
        if derived:
            message = f"{kind}.{group} {name!r} would never start: " + "; ".join(derived)
            return 422, status_error(422, "Invalid", message, details)
        return None

    def read(self, plural: str, namespace: str, name: str) -> tuple[int, Any]:
        if (plural, namespace, name) not in self.objects:
            return self.missing(plural, name)
        return 200, self.objects[(plural, namespace, name)]

    def missing(self, plural: str, name: str) -> tuple[int, Any]:
        group = RESOURCES[plural][0]
        return 404, status_error(404, "NotFound", f"{plural}.{group} {json.dumps(name)} not found",
                                 {"name": name, "group": group, "kind": plural})  # fmt: skip

    def delete(self, plural: str, namespace: str, name: str, raw: bytes, query: dict[str, str]) -> tuple[int, Any]:
        # DeleteOptions come as a body or as query parameters (the Python client sends the latter).
        options = {**(json.loads(raw) if raw else {}), **{k: v for k, v in query.items() if k == "propagationPolicy"}}
        if options.get("propagationPolicy") not in (None, "Foreground", "Background", "Orphan"):
            return 400, status_error(400, "BadRequest", f"invalid propagationPolicy {options['propagationPolicy']!r}")
        if (plural, namespace, name) not in self.objects:
            return self.missing(plural, name)
        self.deletions.append(options)
        obj = self.objects.pop((plural, namespace, name))
        group = RESOURCES[plural][0]
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                     "details": {"name": name, "group": group, "kind": plural, "uid": obj["metadata"]["uid"]}}  # fmt: skip

    def list_pods(self, namespace: str, selector: str) -> tuple[int, Any]:
        wanted = dict(term.split("=", 1) for term in selector.split(",") if "=" in term)
        items = [self.pod_object(p) for p in self.pods
                 if p.namespace == namespace and all(p.labels.get(k) == v for k, v in wanted.items())]  # fmt: skip
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}

    @staticmethod
    def pod_object(pod: FakePod) -> dict[str, Any]:
        return {
            "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": pod.labels},
            "spec": {"containers": [{"name": pod.container, "image": "registry.example.com/train:1"}]},
            "status": {
                "phase": pod.phase,
                **({"conditions": pod.conditions} if pod.conditions else {}),
                **({"containerStatuses": pod.container_statuses} if pod.container_statuses else {}),
            },
        }

    def pod_log(self, namespace: str, name: str, query: dict[str, str]) -> tuple[int, Any]:
        pod = next((p for p in self.pods if (p.namespace, p.name) == (namespace, name)), None)
        if pod is None:
            return 404, status_error(404, "NotFound", f'pods "{name}" not found', {"name": name, "kind": "pods"})
        container = query.get("container", pod.container)
        if container != pod.container:
            return 400, status_error(400, "BadRequest", f"container {container} is not valid for pod {name}")
        if pod.phase == "Pending":
            return 400, status_error(
                400, "BadRequest", f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating'
            )
        return 200, pod.log

    def secret(self, verb: str, namespace: str, name: str | None, raw: bytes) -> tuple[int, Any]:
        """Create (409 if it exists), merge-patch its metadata (ownerReferences), delete: what cloudddp does to the
        Secret holding a job's presigned URLs."""
        if name is None:
            if verb != "POST":
                return self.not_allowed(verb)
            obj = json.loads(raw)
            key = (namespace, obj["metadata"]["name"])
            if key in self.secrets:
                return 409, status_error(409, "AlreadyExists", f'secrets "{key[1]}" already exists')
            self.secrets[key] = obj
            return 201, obj
        if (namespace, name) not in self.secrets:
            return 404, status_error(404, "NotFound", f'secrets "{name}" not found', {"name": name, "kind": "secrets"})
        if verb == "PATCH":
            self.secrets[(namespace, name)]["metadata"].update(json.loads(raw).get("metadata", {}))
            return 200, self.secrets[(namespace, name)]
        if verb == "DELETE":
            return 200, self.secrets.pop((namespace, name))
        return self.not_allowed(verb)

    def read_claim(self, namespace: str, name: str) -> tuple[int, Any]:
        if (namespace, name) not in self.claims:
            return 404, status_error(404, "NotFound", f'persistentvolumeclaims "{name}" not found',
                                     {"name": name, "kind": "persistentvolumeclaims"})  # fmt: skip
        return 200, {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "metadata": {"name": name, "namespace": namespace},
                     "spec": {"accessModes": self.claims[(namespace, name)]}, "status": {"phase": "Bound"}}  # fmt: skip


def write_kubeconfig(path: Path, server: str, token: str, namespace: str = "training") -> Path:
    """A kubeconfig in the test's folder pointing the real client at the fake server."""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "tester", "user": {"token": token}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester", "namespace": namespace}},
                     {"name": "other", "context": {"cluster": "fake", "user": "tester", "namespace": "other-team"}}],
    }))  # fmt: skip
    return path
