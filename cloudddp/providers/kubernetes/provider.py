"""`--provider kubernetes`: Kubeflow PyTorchJobs or TrainJobs through the official `kubernetes` client,
with the user's kubeconfig, context and namespace.

Job ids are `<plural>/<namespace>/<name>` (`pytorchjobs/team-a/resnet`); a bare name means a
PyTorchJob in the context's namespace. Status comes from the job's conditions (the last one whose
status is "True"), logs from the job's pods (found by the operator's labels), cancel deletes the
job (the operator then deletes its pods). The client calls mirror Kubeflow's own SDK
(kubeflow/trainer sdk/kubeflow/trainer/api/trainer_client.py, commit a55f03a8ccb7798a741ff3c4af502d367ed0f6d2).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from cloudddp.errors import CloudDDPError
from cloudddp.providers.base import BlockDumper, JobEvent, JobHandle, JobRequest, JobStatus, Provider, section_of
from cloudddp.providers.kubernetes import timeline
from cloudddp.providers.kubernetes.manifest import NO_IMAGE, PYTORCHJOB, TRAINJOB, Storage, storage_for
from cloudddp.providers.kubernetes.presigned import DEFAULT_REGION, PullPlan, code_settings, publish, secret_name
from cloudddp.providers.kubernetes.pytorchjob import pytorchjob
from cloudddp.providers.kubernetes.settings import DNS_LABEL, DNS_SUBDOMAIN, KubernetesSettings
from cloudddp.providers.kubernetes.trainjob import TRAINER_CONTAINER, TRAINER_JOB, trainjob
from cloudddp.redact import has_url_credentials, redact_text
from cloudddp.terminal import emit

if TYPE_CHECKING:
    from cloudddp.job_spec import JobSpec

# Pods of a job, by the labels each operator puts on them.
POD_SELECTORS = {
    "pytorchjobs": "training.kubeflow.org/job-name={name}",  # training-operator v1.9.0 GenLabels
    "trainjobs": "jobset.sigs.k8s.io/jobset-name={name}",  # the TrainJob's JobSet has the job's name
}
CONTAINERS = {"pytorchjobs": "pytorch", "trainjobs": TRAINER_CONTAINER}
JOB_COUNTS = ("active", "ready", "succeeded", "failed", "suspended")  # a TrainJob's jobsStatus entries
# Condition types -> cloudddp states. A PyTorchJob has Created, Running, Restarting, Succeeded and Failed
# (training-operator common_types.go, v1.9.0); a TrainJob only Suspended, Complete and Failed (kubeflow/trainer
# pkg/apis/trainer/v1alpha1/trainjob_types.go at v2.0.1, v2.1.0, v2.2.0 and v2.3.0, commit 658725bd): whether it
# runs is in its status.jobsStatus (trainjob_state).
CONDITIONS = {
    "pytorchjobs": {"Created": "PENDING", "Running": "RUNNING", "Restarting": "RUNNING", "Succeeded": "SUCCEEDED",
                    "Failed": "FAILED"},
    "trainjobs": {"Suspended": "PENDING", "Complete": "SUCCEEDED", "Failed": "FAILED"},
}  # fmt: skip


def settings_of(spec: JobSpec) -> KubernetesSettings:
    return section_of(spec, "kubernetes", KubernetesSettings)


@dataclass
class ManifestRequest:
    """What `submit` creates: one custom object, plus the claims to check for ReadWriteOnce first."""

    group: str
    version: str
    plural: str
    namespace: str
    body: dict[str, Any]
    replicas: int
    claims: list[str]
    pull: PullPlan | None = None  # kubernetes.code: what submit stages and presigns into a Secret first

    def to_document(self) -> dict[str, Any]:
        return self.body


class ManifestJobRequest(JobRequest):
    """Its dry run prints the manifest alone, ready for `kubectl apply -f -` (it holds no secret values)."""

    def to_yaml(self) -> str:
        # Render refuses URL credentials (refuse_url_credentials); hiding them here too keeps a slip out of print.
        documents = [self.request.body]
        if self.request.pull:  # the Secret submit creates first, its presigned URLs masked
            documents.insert(0, self.request.pull.masked())
        return redact_text(yaml.dump_all(documents, Dumper=BlockDumper, sort_keys=False, default_flow_style=False))


def url_credentials_at(value: Any, path: str = "") -> str | None:
    """The manifest path of the first string holding a password in a URL, else None."""
    if isinstance(value, dict):
        found = (url_credentials_at(v, f"{path}.{k}" if path else str(k)) for k, v in value.items())
    elif isinstance(value, list):
        found = (url_credentials_at(v, f"{path}[{i}]") for i, v in enumerate(value))
    else:
        return path if isinstance(value, str) and has_url_credentials(value) else None
    return next((where for where in found if where), None)


def refuse_url_credentials(body: dict[str, Any]) -> None:
    """Anything not checked on its own (launcher, python...) that would put a URL password in the manifest."""
    where = url_credentials_at(body)
    if where:
        raise CloudDDPError(
            f"the manifest's {where} would hold a password in a URL, readable by anyone who can read the job; keep "
            f"secrets in a Kubernetes Secret and hand them to the job with kubernetes.secret_env: {{VAR: SECRET/KEY}}."
        )


def kubeconfig_path(settings: KubernetesSettings) -> str | None:
    """kubernetes.kubeconfig, else KUBECONFIG as it is now (the client's own default is the variable as it was when
    the client was first imported: a notebook that sets it later, or a second job in one process, got the first).
    kubernetes-client/python 37.0.1, kubernetes/config/kube_config.py: `KUBE_CONFIG_DEFAULT_LOCATION =
    os.environ.get('KUBECONFIG', '~/.kube/config')` at module level; tests/test_jobs_are_found_by_name_on_every_provider.py
    runs two kubeconfigs in one process."""
    return settings.kubeconfig or os.environ.get("KUBECONFIG") or None


def kubeconfig_contexts(settings: KubernetesSettings) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The kubeconfig's contexts and current one; a file that is not a kubeconfig at all is named.

    A missing or incomplete kubeconfig raises ConfigException, for the caller to fall back on; broken YAML or
    the wrong shapes (a list, a string) come out of the client as YAML or Python errors.
    """
    try:
        return config.list_kube_config_contexts(config_file=kubeconfig_path(settings))  # type: ignore[no-any-return]
    except (yaml.YAMLError, TypeError, AttributeError, KeyError, ValueError) as exc:
        mark = getattr(exc, "problem_mark", None)
        path = getattr(mark, "name", None) or settings.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        source = "kubernetes.kubeconfig" if settings.kubeconfig else "KUBECONFIG"
        problem = " ".join(str(exc).split())
        raise CloudDDPError(
            f"the kubeconfig {path!r} is not a valid kubeconfig ({problem}); fix it, or point {source} at another."
        ) from None


def load_api_client(settings: KubernetesSettings) -> tuple[client.ApiClient, str]:
    """An API client from the kubeconfig (or the in-cluster service account), and its namespace."""
    try:
        contexts, current = kubeconfig_contexts(settings)
        chosen = next((c for c in contexts if c["name"] == settings.context), None) if settings.context else current
        if settings.context and chosen is None:
            names = ", ".join(c["name"] for c in contexts)
            raise CloudDDPError(f"kubernetes.context={settings.context!r} is not in the kubeconfig (it has: {names}).")
        api = config.new_client_from_config(config_file=kubeconfig_path(settings), context=settings.context)
        namespace = (chosen or {}).get("context", {}).get("namespace") or "default"
    except ConfigException as exc:
        try:
            config.load_incluster_config()
        except ConfigException:
            raise CloudDDPError(
                f"no usable kubeconfig ({exc}); set KUBECONFIG or kubernetes.kubeconfig, or run inside a pod."
            ) from None
        api, namespace = client.ApiClient(), "default"
    return api, settings.namespace or namespace


def server_message(exc: ApiException) -> str:
    """The message of the API server's Status object, else the HTTP reason."""
    message = exc.reason or ""
    try:
        body = yaml.safe_load(exc.body or "") or {}
        message = body.get("message", message) if isinstance(body, dict) else message
    except yaml.YAMLError:
        pass
    return str(message)


def api_error(exc: ApiException, what: str) -> CloudDDPError:
    """The API server's own message (a Status object), for people."""
    return CloudDDPError(f"{what}: the Kubernetes API server answered {exc.status}: {server_message(exc)}")


UNKNOWN_FIELD = re.compile(r'unknown field "([^"]+)"')


def rendered_for(manifest: ManifestRequest, settings: KubernetesSettings) -> str:
    """What the job was rendered for, and what to change, when the cluster's CRD lacks a field cloudddp sends."""
    if manifest.plural == "trainjobs":
        return (
            f"It was rendered for Kubeflow Trainer {settings.trainer_release} (kubernetes.trainer_release): set the "
            f"cluster's release with --trainer-release (v2.2 and later take runtimePatches, v2.1 podTemplateOverrides, "
            f"v2.0 podSpecOverrides), or use kubernetes.kubeflow_api=v1 where the training-operator runs"
        )
    return (
        "cloudddp renders PyTorchJobs for the Kubeflow training-operator v1.9: upgrade it, or leave out what needs them"
    )


def unknown_fields_error(exc: ApiException, manifest: ManifestRequest, what: str, hint: str) -> CloudDDPError | None:
    """The create was sent with fieldValidation=Strict, so a CRD older than what cloudddp rendered for refuses
    the job (400, "strict decoding error") instead of silently dropping the fields it does not know."""
    message = server_message(exc)
    if exc.status != 400 or "strict decoding error" not in message:
        return None
    fields = ", ".join(UNKNOWN_FIELD.findall(message)) or message
    return CloudDDPError(
        f"{what}: this cluster's {manifest.body['kind']} definition (CRD {manifest.plural}.{manifest.group}) does "
        f"not know {fields}, so the job would run without it. Nothing was created. {hint}."
    )


def check_job_id_parts(job_id: str, namespace: str, name: str) -> None:
    """The namespace a DNS-1123 label and the name a DNS-1123 subdomain, as the API server takes them
    (kubernetes/apimachinery pkg/util/validation/validation.go IsDNS1123Label / IsDNS1123Subdomain, commit
    eed236ceee2c19c2753a3d93ac0631dc20750454; a namespace's name is NameIsDNSLabel, a custom object's
    NameIsDNSSubdomain). Checked before any call: `.` or `..` would be dropped from the URL as a dot segment,
    and a DELETE without a name deletes every job of the namespace (deletecollection)."""
    for what, value, pattern, form in (
        ("namespace", namespace, DNS_LABEL, "a DNS-1123 label: at most 63 lower-case letters, digits and '-'"),
        ("name", name, DNS_SUBDOMAIN, "a DNS-1123 subdomain: at most 253 lower-case letters, digits, '-' and '.'"),
    ):
        if not pattern.fullmatch(value):
            raise CloudDDPError(
                f"{job_id!r} is not a Kubernetes job id: its {what} {value!r} is not {form}, starting and ending "
                f"with a letter or digit. Write pytorchjobs/NAMESPACE/NAME or trainjobs/NAMESPACE/NAME."
            )


def parse_job_id(job_id: str, namespace: str) -> tuple[str, str, str]:
    """`plural/namespace/name`, `namespace/name` or `name` -> (plural, namespace, name)."""
    parts = job_id.split("/")
    if not all(parts):  # `pytorchjobs/team/` (an unset $JOB): a DELETE of it would be a deletecollection
        parts = []
    if len(parts) == 3 and parts[0] in POD_SELECTORS:
        found = parts[0], parts[1], parts[2]
    elif len(parts) == 2:
        found = "pytorchjobs", parts[0], parts[1]
    elif len(parts) == 1 and parts[0]:
        found = "pytorchjobs", namespace, parts[0]
    else:
        raise CloudDDPError(
            f"{job_id!r} is not a Kubernetes job id: write pytorchjobs/NAMESPACE/NAME or trainjobs/NAMESPACE/NAME."
        )
    check_job_id_parts(job_id, found[1], found[2])
    return found


def trainjob_state(state: str, last: dict[str, Any], status: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """A TrainJob's state and its child Jobs' counts, from status.jobsStatus (trainjob_types.go JobStatus: ready,
    succeeded, failed, active, suspended, each a count of the replicated job's child Jobs; plain int32 at v2.0.1,
    optional from v2.1.0 to v2.3.0). The TrainJob has no Running condition, so with no finishing or Suspended
    condition it is RUNNING once the trainer's job (`node`) is ready: all its pods ready or done. `active` alone
    counts pending pods too, so it is still PENDING then."""
    jobs = [job for job in status.get("jobsStatus") or [] if isinstance(job, dict)]
    nodes = {str(job.get("name", "?")): ", ".join(f"{key} {job[key]}" for key in JOB_COUNTS
                                                   if isinstance(job.get(key), int))
             for job in jobs}  # fmt: skip
    if last.get("type") not in CONDITIONS["trainjobs"]:  # neither finished nor suspended
        trainer = next((job for job in jobs if job.get("name") == TRAINER_JOB), {})
        if isinstance(trainer.get("ready"), int) and trainer["ready"] > 0:
            state = "RUNNING"
    return state, nodes


class KubernetesProvider(Provider):
    name = "kubernetes"

    def __init__(self, settings: KubernetesSettings | None = None) -> None:
        self.settings = settings or KubernetesSettings()
        self._api: tuple[client.ApiClient, str] | None = None

    def api(self) -> tuple[client.ApiClient, str]:
        if self._api is None:
            self._api = load_api_client(self.settings)
        return self._api

    # -- the calls that reach the cluster, each reported in one paragraph if it cannot ------------------------
    @contextlib.contextmanager
    def reaching(self, what: str) -> Iterator[None]:
        """The API server not answering (refused, timed out, TLS) as one paragraph naming it, not urllib3's
        traceback; the API's own refusals (ApiException) are reported where they are caught."""
        try:
            yield
        except urllib3.exceptions.HTTPError as exc:
            server = self._api[0].configuration.host if self._api else "the Kubernetes API server"
            reason = getattr(exc, "reason", None) or exc
            raise CloudDDPError(
                f"{server} could not be reached to {what}: {reason}. Check that the cluster is up and that the "
                f"kubeconfig ({os.environ.get('KUBECONFIG') or '~/.kube/config'}) names its server."
            ) from None

    def submit(self, request: JobRequest) -> JobHandle:
        with self.reaching("create the job"):
            return self._submit(request)

    def status(self, job_id: str) -> JobStatus:
        with self.reaching(f"read {job_id}"):
            return self._status(job_id)

    def events(self, job_id: str) -> list[JobEvent]:
        """The job's conditions and its pods' container states, oldest first (timeline.py)."""
        with self.reaching(f"read the course of {job_id}"):
            plural, job, pods = self.locate(job_id)[2], self.read_job(job_id), self.pods(job_id)
        status = job.get("status") or {}
        nodes = [*(status.get("replicaStatuses") or {}), *(str(j.get("name")) for j in status.get("jobsStatus") or [])]
        found = timeline.job_events(job) + timeline.pod_events(pods, plural, CONTAINERS[plural], nodes)
        return sorted(found, key=lambda event: event.time)

    def logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        with self.reaching(f"read the logs of {job_id}"):
            yield from self._logs(job_id, follow)

    def cancel(self, job_id: str) -> None:
        with self.reaching(f"stop {job_id}"):
            self._cancel(job_id)

    # -- render / submit ----------------------------------------------------------------
    def missing_settings(self, spec: JobSpec) -> list[str]:
        return [] if settings_of(spec).image else [NO_IMAGE]

    def render(self, spec: JobSpec) -> JobRequest:
        settings = settings_of(spec)
        if settings.code:
            settings = code_settings(settings)
        namespace = settings.namespace or self.offline_namespace(settings)
        storage: Storage = storage_for(spec, settings)
        build, target = (trainjob, TRAINJOB) if settings.kubeflow_api == "trainer-v2" else (pytorchjob, PYTORCHJOB)
        body = build(spec, settings, storage, namespace)
        refuse_url_credentials(body)
        # An elastic job may grow to maxReplicas pods, all mounting the same claims.
        replicas = max(spec.nodes, body["spec"].get("elasticPolicy", {}).get("maxReplicas", 0))
        request = ManifestRequest(target[0], target[1], target[2], namespace, body, replicas, storage.claims)
        if settings.code:
            spec.require_source()
            request.pull = PullPlan(
                secret=secret_name(body["metadata"]["name"]), namespace=namespace, code=settings.code,
                source_dir=spec.source_dir, job_config={"entry_point": spec.entry_point, "module": spec.module,
                                                        "args": [], "launcher_args": []},
                lifetime=settings.url_lifetime, endpoint=settings.s3_endpoint,
                region=settings.s3_region or DEFAULT_REGION, inputs=storage.presigned,
            )  # fmt: skip
        return ManifestJobRequest(provider=self.name, name=body["metadata"]["name"], spec=spec, request=request)

    def find_by_name(self, name: str, spec: JobSpec) -> str | None:
        """`<plural>/<namespace>/<name>`, known before submitting: the kind and namespace render gives the manifest
        from `spec` (the kubeconfig context's namespace unless kubernetes.namespace), the name its metadata.name.
        None where the API server has no such job (404); other answers raise."""
        self.settings, self._api = settings_of(spec), None  # as submit: the spec's kubeconfig and context
        group, version, plural = (TRAINJOB if self.settings.kubeflow_api == "trainer-v2" else PYTORCHJOB)[:3]
        namespace = self.settings.namespace or self.offline_namespace(self.settings)
        job_id = f"{plural}/{namespace}/{name}"
        with self.reaching(f"read {job_id}"):
            try:
                client.CustomObjectsApi(self.api()[0]).get_namespaced_custom_object(group, version, namespace,
                                                                                    plural, name)  # fmt: skip
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise api_error(exc, f"reading {job_id}") from None
        return job_id

    @staticmethod
    def offline_namespace(settings: KubernetesSettings) -> str:
        """The kubeconfig context's namespace when there is a kubeconfig, else "default" (dry runs work anywhere)."""
        try:
            contexts, current = kubeconfig_contexts(settings)
        except (ConfigException, OSError):
            return "default"
        chosen = next((c for c in contexts if c["name"] == settings.context), current) if settings.context else current
        return (chosen or {}).get("context", {}).get("namespace") or "default"

    def _submit(self, request: JobRequest) -> JobHandle:
        manifest: ManifestRequest = request.request
        self.settings = settings_of(request.spec)
        self._api = None
        api, _ = self.api()
        self.warn_shared_rwo_claims(api, manifest)
        if manifest.pull:
            self.create_pull_secret(api, manifest.pull)
        what = f"creating {manifest.body['kind']} {manifest.namespace}/{request.name}"
        try:
            # Strict: a field the cluster's CRD lacks is refused, not dropped (a volume or toleration lost unseen).
            created = client.CustomObjectsApi(api).create_namespaced_custom_object(
                manifest.group, manifest.version, manifest.namespace, manifest.plural, manifest.body,
                field_validation="Strict",
            )  # fmt: skip
        except ApiException as exc:
            if manifest.pull:
                self.delete_pull_secret(api, manifest.pull)
            refused = unknown_fields_error(exc, manifest, what, rendered_for(manifest, self.settings))
            raise (refused or api_error(exc, what)) from None
        if manifest.pull:
            self.hand_secret_to_job(api, manifest.pull, manifest.body, created)
        job_id = f"{manifest.plural}/{manifest.namespace}/{request.name}"
        return JobHandle(provider=self.name, job_id=job_id, details={"namespace": manifest.namespace})

    @staticmethod
    def create_pull_secret(api: client.ApiClient, pull: PullPlan) -> None:
        """kubernetes.code: stage the source, presign every object, and keep the URLs in the pods' Secret."""
        body = publish(pull, emit)  # progress as the other providers' staging says it
        try:
            client.CoreV1Api(api).create_namespaced_secret(pull.namespace, body)  # pyright: ignore[reportArgumentType]
        except ApiException as exc:
            raise api_error(exc, f"creating Secret {pull.namespace}/{pull.secret} (the pods' presigned URLs)") from None

    @staticmethod
    def delete_pull_secret(api: client.ApiClient, pull: PullPlan) -> None:
        with contextlib.suppress(ApiException):  # the job was refused: its Secret would serve nothing
            client.CoreV1Api(api).delete_namespaced_secret(pull.secret, pull.namespace)

    @staticmethod
    def hand_secret_to_job(api: client.ApiClient, pull: PullPlan, body: dict[str, Any], created: Any) -> None:
        """The Secret owned by the job, so deleting the job (cancel, ttlSecondsAfterFinished) deletes it too."""
        owner = {"apiVersion": body["apiVersion"], "kind": body["kind"], "name": body["metadata"]["name"],
                 "uid": (created or {}).get("metadata", {}).get("uid", "")}  # fmt: skip
        try:
            client.CoreV1Api(api).patch_namespaced_secret(pull.secret, pull.namespace,
                                                          {"metadata": {"ownerReferences": [owner]}})  # fmt: skip
        except ApiException as exc:
            print(f"cloudddp: warning: the Secret {pull.namespace}/{pull.secret} could not be given to the job "
                  f"({server_message(exc)}); delete it once the job is over.", file=sys.stderr)  # fmt: skip

    @staticmethod
    def warn_shared_rwo_claims(api: client.ApiClient, manifest: ManifestRequest) -> None:
        """Every node mounts each claim: a ReadWriteOnce volume attaches to one machine only."""
        if manifest.replicas < 2:
            return
        for claim in manifest.claims:
            try:
                pvc = client.CoreV1Api(api).read_namespaced_persistent_volume_claim(claim, manifest.namespace)
            except ApiException as exc:
                raise api_error(exc, f"reading PersistentVolumeClaim {manifest.namespace}/{claim}") from None
            modes = set((pvc.spec.access_modes if pvc.spec else None) or [])
            if modes and modes <= {"ReadWriteOnce", "ReadWriteOncePod"}:
                print(
                    f"cloudddp: warning: PersistentVolumeClaim {claim!r} is {'/'.join(sorted(modes))}: it attaches to "
                    f"one machine, so {manifest.replicas} nodes sharing it will stay Pending unless they land on the "
                    f"same machine. Use a ReadWriteMany/ReadOnlyMany claim or s3:// inputs.",
                    file=sys.stderr,
                )

    # -- follow-up calls ------------------------------------------------------------------
    def locate(self, job_id: str) -> tuple[str, str, str, str, str]:
        """(group, version, plural, namespace, name) of the job `job_id` names."""
        plural, namespace, name = parse_job_id(job_id, self.api()[1])
        group, version = (TRAINJOB if plural == "trainjobs" else PYTORCHJOB)[:2]
        return group, version, plural, namespace, name

    def read_job(self, job_id: str) -> dict[str, Any]:
        group, version, plural, namespace, name = self.locate(job_id)
        try:
            return client.CustomObjectsApi(self.api()[0]).get_namespaced_custom_object(
                group, version, namespace, plural, name
            )  # type: ignore[no-any-return]
        except ApiException as exc:
            raise api_error(exc, f"reading {plural} {namespace}/{name}") from None

    def _status(self, job_id: str) -> JobStatus:
        plural = self.locate(job_id)[2]
        status = self.read_job(job_id).get("status") or {}
        conditions = [c for c in status.get("conditions") or [] if c.get("status") == "True"]
        last = conditions[-1] if conditions else {}
        state = CONDITIONS[plural].get(last.get("type", ""), "PENDING")
        reason = ": ".join(part for part in (last.get("reason"), last.get("message")) if part)
        if plural == "trainjobs":
            state, nodes = trainjob_state(state, last, status)
        else:
            replicas = status.get("replicaStatuses") or {}
            nodes = {role: ", ".join(f"{k} {v}" for k, v in counts.items() if isinstance(v, int))
                     for role, counts in replicas.items()}  # fmt: skip
        if state == "PENDING":
            reason = self.unschedulable(job_id) or reason
        return JobStatus(job_id=job_id, state=state, reason=reason, nodes=nodes)

    def unschedulable(self, job_id: str) -> str | None:
        """Why a pending job's pods wait, where the scheduler says it cannot place one: the pod's PodScheduled
        condition False with reason Unschedulable and the scheduler's message ("0/3 nodes are available: 3
        Insufficient nvidia.com/gpu."; kubernetes/api core/v1/types.go PodReasonUnschedulable, set by
        kubernetes/kubernetes pkg/scheduler/schedule_one.go handleSchedulingFailure at 4a37f009ca61: type
        PodScheduled, status False, reason Unschedulable for a rejected pod, the status's message as message). The
        job's own conditions say only Created, so without this `status` and failover (cloudddp/capacity.py) cannot
        tell a full cluster from a slow one."""
        for pod in self.pods(job_id):
            for condition in (pod.status.conditions if pod.status else None) or []:
                if (condition.type, condition.status, condition.reason) == ("PodScheduled", "False", "Unschedulable"):
                    return f"Unschedulable: pod {pod.metadata.name}: {condition.message or 'no message'}"
        return None

    def pods(self, job_id: str) -> list[Any]:
        _, _, plural, namespace, name = self.locate(job_id)
        selector = POD_SELECTORS[plural].format(name=name)
        try:
            found = client.CoreV1Api(self.api()[0]).list_namespaced_pod(namespace, label_selector=selector).items
        except ApiException as exc:
            raise api_error(exc, f"listing the pods of {namespace}/{name}") from None
        return sorted(found, key=lambda pod: pod.metadata.name)

    def _logs(self, job_id: str, follow: bool = False) -> Iterator[str]:
        """Each pod's log, lines prefixed with `[pod]`; with follow, pods are streamed as they start."""
        _, _, plural, namespace, _ = self.locate(job_id)
        core = client.CoreV1Api(self.api()[0])
        container = CONTAINERS[plural]
        if not follow:
            for pod in self.pods(job_id):
                text = self.read_log(core, pod.metadata.name, namespace, container, follow=False)
                yield from (f"[{pod.metadata.name}] {line}" for line in text.splitlines())
            return
        yield from self.follow_logs(job_id, core, namespace, container)

    @staticmethod
    def read_log(core: client.CoreV1Api, pod: str, namespace: str, container: str, follow: bool) -> Any:
        try:
            return core.read_namespaced_pod_log(pod, namespace, container=container, follow=follow,
                                                _preload_content=not follow)  # fmt: skip
        except ApiException as exc:
            if exc.status == 400:  # the container has not started yet
                return "" if not follow else None
            raise api_error(exc, f"reading the log of pod {namespace}/{pod}") from None

    def new_log_streams(
        self, job_id: str, core: client.CoreV1Api, namespace: str, container: str, streaming: set[str]
    ) -> Iterator[tuple[str, Any]]:
        """(pod, its followed log) for each started pod not in `streaming` yet (added to it)."""
        for pod in self.pods(job_id):
            name = pod.metadata.name
            if name in streaming or (pod.status and pod.status.phase == "Pending"):
                continue
            response = self.read_log(core, name, namespace, container, follow=True)
            if response is not None:
                streaming.add(name)
                yield name, response

    def follow_logs(self, job_id: str, core: client.CoreV1Api, namespace: str, container: str) -> Iterator[str]:
        lines: queue.Queue[str | None] = queue.Queue()
        streaming: set[str] = set()
        open_streams = 0

        def pump(pod: str, response: Any) -> None:
            partial = ""  # a chunk may end in the middle of a line
            for raw in response.stream(decode_content=True):
                *complete, partial = (partial + raw.decode(errors="replace")).split("\n")
                for line in complete:
                    lines.put(f"[{pod}] {line}")
            if partial:
                lines.put(f"[{pod}] {partial}")
            lines.put(None)

        while True:
            for name, response in self.new_log_streams(job_id, core, namespace, container, streaming):
                open_streams += 1
                threading.Thread(target=pump, args=(name, response), daemon=True).start()
            done = self.status(job_id).done
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline or (done and open_streams):
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    continue
                if line is None:
                    open_streams -= 1
                else:
                    yield line
            if done and not open_streams:
                return

    def _cancel(self, job_id: str) -> None:
        group, version, plural, namespace, name = self.locate(job_id)
        try:
            client.CustomObjectsApi(self.api()[0]).delete_namespaced_custom_object(
                group, version, namespace, plural, name, propagation_policy="Foreground"
            )
        except ApiException as exc:
            raise api_error(exc, f"deleting {plural} {namespace}/{name}") from None
