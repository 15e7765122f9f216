"""The OCI provider against the loopback service: the real `oci` SDK, signed requests, no account.

The service runs each job as OCI would: the job's entrypoint unpacks the staged archive and
runs the real node script, bootstrap and launcher with tests/providers/oci/quick_sources/
quick_train.py (no torch: the image environment sets TORCHELASTIC_RUN_ID, so the launcher
runs the script directly instead of through torchrun). What the tests read in the logs is
what those processes printed.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from helpers import clean_env
from helpers.oci_loopback_server import (
    COMPARTMENT,
    IMAGE,
    IMAGE_ENV,
    LOG,
    LOG_COMPARTMENT,
    LOG_GROUP,
    PROJECT,
    QUICK_SOURCES,
    FakeOCI,
    ThrowawayKey,
    oci_settings,
    parse_time,
)

from cloudddp.errors import CloudDDPError
from cloudddp.estimator import Estimator
from cloudddp.job_spec import build_spec
from cloudddp.providers.base import JobEvent
from cloudddp.providers.oci import logs as oci_logs
from cloudddp.providers.oci import provider as oci_provider
from cloudddp.providers.oci.provider import OCIProvider
from cloudddp.session import run_job
from cloudddp.staging.manifest import MANIFEST_NAME

REPO = Path(__file__).resolve().parents[3]


def fake(key: ThrowawayKey, root: Path, **options: Any) -> FakeOCI:
    options.setdefault("ingestion_delay", 0.2)
    return FakeOCI(key, run_root=root / "service", node_env=clean_env(IMAGE_ENV), hold_states=True, **options)


@pytest.fixture
def server(key: ThrowawayKey, oci_service: Callable[..., FakeOCI]) -> FakeOCI:
    return oci_service(key, node_env=clean_env(IMAGE_ENV), hold_states=True, ingestion_delay=0.2)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for name in ("train/a/1.png", "train/a/2.png", "train/b/1.png", "val/a/1.png"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode() * 10)
    return root


def make_provider(server: FakeOCI, config: Path, **options: Any) -> OCIProvider:
    options.setdefault("poll", 0.1)
    options.setdefault("log_grace", 3.0)
    return OCIProvider(service_endpoint=server.url, environ={"OCI_CONFIG_FILE": str(config)}, **options)


def make_spec(data: Path, **fields: Any) -> Any:
    oci_fields = fields.pop("oci", {})
    base = {"entry_point": "quick_train.py", "source_dir": str(QUICK_SOURCES), "nodes": 2,
            "inputs": {"train": str(data)}, "oci": oci_settings(**oci_fields)}  # fmt: skip
    return build_spec({**base, **fields})


@pytest.fixture
def use_server(monkeypatch: pytest.MonkeyPatch, server: FakeOCI, config: Path) -> FakeOCI:
    """For code that creates its own provider (run_job, Estimator): the endpoint and config from the environment."""
    monkeypatch.setenv("CLOUDDDP_OCI_SERVICE_ENDPOINT", server.url)
    monkeypatch.setenv("OCI_CONFIG_FILE", str(config))
    monkeypatch.setattr(oci_provider, "DEFAULT_POLL", 0.1)
    return server


def test_launch_sends_one_signed_create_job_and_one_create_job_run_in_camel_case(
    server: FakeOCI, config: Path, data: Path
) -> None:
    provider = make_provider(server, config)
    handle = provider.submit(provider.render(make_spec(data, args=["--fail-rank", "9"])))
    assert server.signature_failures == []
    assert all(r.headers["authorization"].startswith('Signature algorithm="rsa-sha256"') for r in server.requests)
    (job_call,) = server.calls("POST", r"^/20190101/jobs$")
    (run_call,) = server.calls("POST", r"^/20190101/jobRuns$")
    assert {"date", "(request-target)", "host", "x-content-sha256"} <= set(
        job_call.headers["authorization"].split('headers="')[1].split('"')[0].split()
    )
    body = job_call.body
    assert (body["compartmentId"], body["projectId"], body["displayName"]) == (COMPARTMENT, PROJECT, "cloudddp-job")
    node = body["jobNodeConfigurationDetails"]
    assert (node["jobNodeType"], node["startupOrder"]) == ("MULTI_NODE", "IN_PARALLEL")
    assert node["jobNetworkConfiguration"] == {"jobNetworkType": "DEFAULT_NETWORK"}
    (group,) = node["jobNodeGroupConfigurationDetailsList"]
    assert group["replicas"] == 2 and group["minimumSuccessReplicas"] == 2
    assert group["jobInfrastructureConfigurationDetails"] == {
        "jobInfrastructureType": "MULTI_NODE", "shapeName": "VM.Standard.E4.Flex", "blockStorageSizeInGBs": 100,
        "jobShapeConfigDetails": {"ocpus": 2.0, "memoryInGBs": 32.0}}  # fmt: skip
    assert group["jobEnvironmentConfigurationDetails"]["jobEnvironmentType"] == "OCIR_CONTAINER"
    assert group["jobEnvironmentConfigurationDetails"]["image"] == IMAGE
    assert group["jobEnvironmentConfigurationDetails"]["cmd"] == ["--fail-rank", "9"]
    assert group["jobConfigurationDetails"]["jobType"] == "DEFAULT"
    assert body["jobStorageMountConfigurationDetailsList"] == [{
        "storageType": "OBJECT_STORAGE", "destinationDirectoryName": "cloudddp", "namespace": "ns", "bucket": "bkt",
        "prefix": "cloudddp/cloudddp-job/"}]  # fmt: skip
    assert body["jobLogConfigurationDetails"]["enableAutoLogCreation"] is True
    job_id = server.jobs and next(iter(server.jobs))
    assert run_call.body["jobId"] == job_id
    assert run_call.body["freeformTags"]["cloudddp-nodes"] == "2"
    assert handle.job_id.startswith("ocid1.datasciencejobrun.") and handle.details["job_id"] == job_id
    assert server.calls("GET", rf"^/20190101/jobs/{job_id}$")  # waited for the job to be ACTIVE
    assert job_call.headers.get("opc-retry-token") and run_call.headers.get("opc-retry-token")


def node_env(create_job: Any) -> dict[str, str]:
    """The environment of the job's one node group, from a CreateJob body as the service received it."""
    (group,) = create_job["jobNodeConfigurationDetails"]["jobNodeGroupConfigurationDetailsList"]
    return dict(group["jobConfigurationDetails"]["environmentVariables"])


def staged_version(server: FakeOCI, prefix: str) -> str:
    """The version the manifest under `prefix` publishes (written by the staging engine)."""
    return str(json.loads(server.objects[("ns", "bkt", f"{prefix}/{MANIFEST_NAME}")].data)["version"])


INPUTS = "cloudddp/cloudddp-job/inputs/train"
DATA_FILES = ("train/a/1.png", "train/a/2.png", "train/b/1.png", "val/a/1.png")


def test_the_archive_and_the_inputs_are_staged_where_the_job_mounts_them(
    server: FakeOCI, config: Path, data: Path
) -> None:
    provider = make_provider(server, config)
    job_request = provider.render(make_spec(data))
    (group,) = job_request.parts.create_job.job_node_configuration_details.job_node_group_configuration_details_list
    rendered = group.job_configuration_details.environment_variables  # the dry run: the version is not known yet
    assert rendered["CLOUDDDP_CHANNEL_TRAIN"] == "/mnt/cloudddp/inputs/train/v-<hash-at-submit>"
    provider.submit(job_request)
    (job_call,) = server.calls("POST", r"^/20190101/jobs$")
    env = node_env(job_call.body)
    archive_name = "cloudddp/cloudddp-job/" + env["CLOUDDDP_SOURCE"].removeprefix("/mnt/cloudddp/")
    names = server.object_names()
    assert archive_name in names
    version = staged_version(server, INPUTS)
    # The job reads the published version; the manifest naming it was written after every object of it.
    assert env["CLOUDDDP_CHANNEL_TRAIN"] == f"/mnt/cloudddp/inputs/train/{version}"
    assert {n for n in names if "/inputs/" in n} == {f"{INPUTS}/{version}/{p}" for p in DATA_FILES} | {
        f"{INPUTS}/{MANIFEST_NAME}"
    }
    input_puts = [c.path for c in server.calls("PUT") if "/inputs/" in c.path]
    assert input_puts[-1].endswith(f"/{INPUTS}/{MANIFEST_NAME}")
    with tarfile.open(fileobj=io.BytesIO(server.objects[("ns", "bkt", archive_name)].data)) as tar:
        members = tar.getnames()
        job_config = tar.extractfile("cloudddp_job.json").read().decode()  # type: ignore[union-attr]
    assert {"quick_train.py", "cloudddp_bootstrap.py", "cloudddp_node.sh", "cloudddp/launcher/cli.py"} <= set(members)
    assert '"entry_point": "quick_train.py"' in job_config


def test_a_second_launch_publishes_a_new_version_beside_the_old_and_deletes_nothing(
    server: FakeOCI, config: Path, data: Path
) -> None:
    said: list[str] = []
    provider = make_provider(server, config, say=said.append)
    spec = make_spec(data)
    provider.submit(provider.render(spec))
    first = staged_version(server, INPUTS)
    assert said == [
        f"cloudddp: staged {data}: 4 files, 4 objects uploaded (500 bytes) -> oci://bkt@ns/{INPUTS}/{first}/"
    ]
    first_objects = {n: server.objects[("ns", "bkt", n)].data for n in server.object_names() if f"/{first}/" in n}
    (data / "train/a/2.png").write_bytes(b"changed")
    (data / "val/a/1.png").unlink()
    calls_before = len(server.calls())
    provider.submit(provider.render(spec))
    second = staged_version(server, INPUTS)
    assert second != first
    new_puts = [c.path for c in server.calls()[calls_before:] if c.method == "PUT"]
    assert new_puts[0].endswith("sourcedir.tar.gz")
    # Object Storage has no cheap copy (CopyObject is an asynchronous work request): the new version is uploaded.
    assert sorted(p.split(f"/{second}/")[1] for p in new_puts if f"/{second}/" in p) == [
        "train/a/1.png", "train/a/2.png", "train/b/1.png"]  # fmt: skip
    assert not server.calls("DELETE")  # a job still running on the first version keeps reading it
    assert {n: server.objects[("ns", "bkt", n)].data for n in server.object_names() if f"/{first}/" in n} == (
        first_objects
    )
    (_, job_call) = server.calls("POST", r"^/20190101/jobs$")
    assert node_env(job_call.body)["CLOUDDDP_CHANNEL_TRAIN"] == f"/mnt/cloudddp/inputs/train/{second}"
    calls_before = len(server.calls())
    time.sleep(1.1)
    provider.submit(provider.render(spec))  # unchanged data: only the new run's archive is written
    assert said[-1] == f"cloudddp: staged {data}: 3 files, unchanged -> oci://bkt@ns/{INPUTS}/{second}/"
    third_writes = [c.path for c in server.calls()[calls_before:] if c.is_write and "/n/" in c.path]
    assert len(third_writes) == 1 and third_writes[0].endswith("sourcedir.tar.gz")


def test_large_inputs_go_up_in_parallel_parts_verified_by_their_multipart_md5(
    server: FakeOCI, config: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "big"
    folder.mkdir()
    weights = bytes(range(256)) * 4096 * 3 + b"tail"  # 3 MiB + 4 bytes
    (folder / "weights.bin").write_bytes(weights)
    (folder / "small.txt").write_text("hello")
    spec = make_spec(folder)
    provider = make_provider(server, config, part_size=1024 * 1024)
    provider.submit(provider.render(spec))
    version = staged_version(server, INPUTS)
    name = f"{INPUTS}/{version}/weights.bin"
    assert len(server.calls("POST", r"/u$")) == 1  # one multipart upload: the archive and small.txt are single PUTs
    assert len(server.calls("PUT", rf"/u/{name}$")) == 4  # four parts
    assert (server.objects[("ns", "bkt", name)].multipart_md5 or "").endswith("-4")
    assert server.objects[("ns", "bkt", name)].data == weights


def test_following_shows_states_node_groups_and_each_line_once(server: FakeOCI, config: Path, data: Path) -> None:
    provider = make_provider(server, config, log_grace=60.0)
    handle = provider.submit(provider.render(make_spec(data)))
    started = time.monotonic()
    lines = list(provider.logs(handle.job_id, follow=True))
    assert time.monotonic() - started < 45  # ended on the nodes' exit lines, not after the 60 s grace
    states = [line for line in lines if line.startswith("[oci] job run")]
    # The service holds each state until a poll has seen it (hold_states): no race with the poll interval.
    assert states == [
        "[oci] job run ACCEPTED (node groups: cloudddp: CREATING)",
        "[oci] job run IN_PROGRESS (node groups: cloudddp: ACTIVE)",
        "[oci] job run SUCCEEDED (node groups: cloudddp: DELETED)",
    ]
    node_lines = [line for line in lines if line.startswith("[node-")]
    assert len(node_lines) == len(set(node_lines))  # each line once, though windows overlap
    for rank in (0, 1):  # printed by quick_train.py and by the node script, through the real launcher
        assert f"[node-{rank}] quick_train: node {rank} of 2, channel train at " in "\n".join(node_lines)
        assert f"[node-{rank}] quick_train: node {rank} sees ['train', 'val']" in node_lines
        assert [line for line in node_lines if line.startswith(f"[node-{rank}] epoch=")] == [
            f"[node-{rank}] epoch=1/2 loss=0.8", f"[node-{rank}] epoch=2/2 loss=0.7"]  # fmt: skip
        assert node_lines.index(f"[node-{rank}] cloudddp: node {rank} exited with code 0") == max(
            i for i, line in enumerate(node_lines) if line.startswith(f"[node-{rank}] ")
        )  # each node's last line
    assert "[node-0] cloudddp: copied the model folder to " in "\n".join(node_lines)
    assert server.search_calls >= 2
    status = provider.status(handle.job_id)
    assert (status.state, status.nodes) == ("SUCCEEDED", {"cloudddp": "DELETED"})
    run = server.runs[handle.job_id]  # the timeline: the service's own times, the node group as status names it
    times = [parse_time(run[field]).timestamp() for field in ("timeAccepted", "timeStarted", "timeFinished")]
    assert provider.events(handle.job_id) == [
        JobEvent(times[0], "", "submitted"), JobEvent(times[1], "", "started"),
        JobEvent(times[2], "cloudddp", "deleted"), JobEvent(times[2], "", "succeeded"),
    ]  # fmt: skip
    assert status.artifacts and status.artifacts.startswith("oci://bkt@ns/cloudddp/cloudddp-job/runs/")
    model = provider.fetch_artifacts(handle.job_id, Path(config).parent.parent / "model")
    assert sorted(p.name for p in model.iterdir()) == ["logs", "metrics.json", "model.pt"]
    assert (model / "model.pt").read_bytes() == b"weights of node 0"
    assert (model / "logs" / "node-1.log").read_text().splitlines()[-1] == "epoch=2/2 loss=0.7"


def test_launch_exits_with_the_failed_nodes_exit_code(use_server: FakeOCI, data: Path) -> None:
    said: list[str] = []
    code = run_job("oci", make_spec(data, args=["--fail-rank", "1"]), say=said.append)
    assert code == 3
    assert "[node-1] quick_train: node 1 fails on purpose" in said
    assert (
        "[node-1] cloudddp: node 1 exited with code 3" in said
        and "[node-0] cloudddp: node 0 exited with code 0" in said
    )
    # The fake writes no lifecycleDetails for a failed multi-node run: the code came from node 1's last line.
    assert any("node groups: cloudddp: FAILED" in line for line in said)
    assert "cloudddp: job FAILED: FAILED" in said


@pytest.mark.oci_service
def test_status_logs_and_cancel_take_a_run_ocid_a_job_ocid_or_latest(
    key: ThrowawayKey, config: Path, data: Path, tmp_path: Path
) -> None:
    with fake(key, tmp_path) as server:
        provider = make_provider(server, config)
        handle = provider.submit(provider.render(make_spec(data, args=["--wait"])))
        fresh = OCIProvider(service_endpoint=server.url, poll=0.1, log_grace=5,
                            environ={"OCI_CONFIG_FILE": str(config), "NB_SESSION_COMPARTMENT_OCID": COMPARTMENT})  # fmt: skip
        assert fresh.status(handle.job_id).state in ("PENDING", "RUNNING")
        assert fresh.status(handle.details["job_id"]).job_id == handle.job_id
        assert fresh.status("latest").job_id == handle.job_id
        listed = server.calls("GET", r"^/20190101/jobRuns$")
        assert listed and listed[-1].query["compartmentId"] == [COMPARTMENT]
        fresh.cancel(handle.job_id)
        assert server.calls("POST", r"/actions/cancelJobRun$")
        final = fresh.wait(handle.job_id, poll=0.1)
        assert final.state == "STOPPED"
        fresh.cancel(handle.job_id)  # already over: a no-op, not an error
        lines = list(fresh.logs(handle.job_id, follow=True))
        assert any(line.startswith("[oci] job run CANCELED") for line in lines)
        # SIGTERM reached the script through the node script and the launcher, and each node still said goodbye.
        for rank in (0, 1):
            if f"[node-{rank}] waiting for SIGTERM" in lines:  # a node cancelled before it started says nothing
                assert f"[node-{rank}] checkpoint saved on SIGTERM" in lines
                assert f"[node-{rank}] cloudddp: node {rank} exited with code 143" in lines
        with pytest.raises(CloudDDPError, match=r"job_run_id='ocid1\.nope' is not an OCID"):
            fresh.status("ocid1.nope")
        with pytest.raises(CloudDDPError, match="refused get_job_run: 404 NotAuthorizedOrNotFound"):
            fresh.status("ocid1.datasciencejobrun.oc1.iad.aaaaunknown")


def test_logs_without_follow_print_what_exists(server: FakeOCI, config: Path, data: Path) -> None:
    server.ingestion_delay = 0.0  # every line is searchable once the run has ended
    provider = make_provider(server, config)
    handle = provider.submit(provider.render(make_spec(data)))
    provider.wait(handle.job_id, poll=0.1)
    lines = list(provider.logs(handle.job_id))
    for rank in (0, 1):  # the nodes interleave; each node's own lines end with its exit line
        own = [line for line in lines if line.startswith(f"[node-{rank}] ")]
        assert f"[node-{rank}] epoch=2/2 loss=0.7" in own
        assert own[-1] == f"[node-{rank}] cloudddp: node {rank} exited with code 0"


def test_log_search_splits_full_windows_until_each_fits(server: FakeOCI, config: Path) -> None:
    source = "ocid1.datasciencejobrun.oc1.iad.aaaapaging"
    start = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    server.add_logs(source, [f"line {i}" for i in range(2500)], start, dt.timedelta(milliseconds=1))
    client = make_provider(server, config).clients().log_search
    query = oci_logs.search_query(LOG_COMPARTMENT, LOG_GROUP, LOG, source)
    search = oci_logs.LogSearch(client, query)
    records = search.window(start - dt.timedelta(seconds=1), start + dt.timedelta(seconds=10))
    assert [r.message for r in records] == [f"line {i}" for i in range(2500)]
    assert search.calls >= 5
    requests = server.calls("POST", "/20190909/search")
    assert all(r.query["limit"] == ["1000"] for r in requests)
    assert (
        requests[0].body["searchQuery"]
        == f"search \"{LOG_COMPARTMENT}/{LOG_GROUP}/{LOG}\" | where source = '*{source}' | sort by datetime asc"
    )


@pytest.mark.oci_service
def test_log_search_splits_windows_the_service_calls_too_large(key: ThrowawayKey, config: Path, tmp_path: Path) -> None:
    with fake(key, tmp_path, too_large_above=700) as server:
        source = "ocid1.datasciencejobrun.oc1.iad.aaaatoolarge"
        start = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
        server.add_logs(source, [f"line {i}" for i in range(1500)], start, dt.timedelta(milliseconds=2))
        search = oci_logs.LogSearch(make_provider(server, config).clients().log_search,
                                    oci_logs.search_query(LOG_COMPARTMENT, LOG_GROUP, LOG, source))  # fmt: skip
        records = search.window(start, start + dt.timedelta(seconds=5))
        assert len({r.id for r in records}) == len(records) == 1500


def test_following_rereads_an_overlap_for_late_lines_and_prints_each_once(server: FakeOCI, config: Path) -> None:
    source = "ocid1.datasciencejobrun.oc1.iad.aaaalate"
    search = oci_logs.LogSearch(make_provider(server, config).clients().log_search,
                                oci_logs.search_query(LOG_COMPARTMENT, LOG_GROUP, LOG, source))  # fmt: skip
    now = oci_logs.utc_now()
    follower = oci_logs.LogFollower(search, now - dt.timedelta(minutes=5))
    server.add_logs(source, ["early"], now - dt.timedelta(seconds=30), dt.timedelta(0))
    assert [r.message for r in follower.poll()] == ["early"]
    # A line written 20 s ago that only now reached the index (ingestion delay): still printed, once.
    server.add_logs(source, ["late"], now - dt.timedelta(seconds=20), dt.timedelta(0))
    server.add_logs(source, ["new"], oci_logs.utc_now(), dt.timedelta(0))
    assert [r.message for r in follower.poll()] == ["late", "new"]
    assert follower.poll() == []


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda c: c.unlink(), "the OCI config file .* does not exist"),
        (lambda c: c.write_text(c.read_text().replace("[DEFAULT]", "[OTHER]")), r"has no profile \[DEFAULT\]"),
        (
            lambda c: c.write_text(c.read_text().replace("key.pem", "missing.pem")),
            r"key_file '.*missing.pem' does not exist",
        ),
        (lambda c: (c.parent / "key.pem").write_text("not a key"), "is not a readable PEM private key"),
        (lambda c: c.write_text(c.read_text().replace("fingerprint=", "fingerprint=zz")), "fingerprint is malformed"),
    ],
)
def test_bad_credentials_fail_before_anything_is_uploaded(
    server: FakeOCI, config: Path, data: Path, setup: Any, message: str
) -> None:
    setup(config)
    provider = make_provider(server, config)
    with pytest.raises(CloudDDPError, match=message):
        provider.submit(provider.render(make_spec(data)))
    assert server.requests == []


def test_a_profile_and_config_file_from_the_oci_cli_variables(
    server: FakeOCI, key: ThrowawayKey, tmp_path: Path
) -> None:
    config = key.write_config(tmp_path / "elsewhere", profile="TRAINING")
    provider = OCIProvider(service_endpoint=server.url, environ={"OCI_CLI_CONFIG_FILE": str(config),
                                                                 "OCI_CLI_PROFILE": "TRAINING"})  # fmt: skip
    assert provider.clients().credentials.origin == f"profile [TRAINING] of {config}"


def test_resource_principal_outside_oci_is_a_clear_error(data: Path, server: FakeOCI, config: Path) -> None:
    provider = make_provider(server, config)
    with pytest.raises(CloudDDPError, match=r"works inside OCI only .* OCI_RESOURCE_PRINCIPAL_VERSION is not set"):
        provider.submit(provider.render(make_spec(data, oci={"auth": "resource_principal"})))
    assert server.requests == []


def test_invalid_spec_uploads_nothing_and_creates_nothing(use_server: FakeOCI, data: Path) -> None:
    for bad in ({"environment": {"BIG": "x" * 20_001}}, {"args": ["y" * 4_001]},
                {"oci": {"block_storage_gb": 10}}, {"oci": {"shape": "VM.Standard2.1"}}):  # fmt: skip
        with pytest.raises(CloudDDPError):
            run_job("oci", make_spec(data, **bad), say=lambda line: None)
    assert use_server.requests == []


def test_an_encrypted_key_works_and_its_passphrase_is_never_sent_or_printed(
    server: FakeOCI, key: ThrowawayKey, config: Path, data: Path
) -> None:
    passphrase = "correct-horse-battery-staple"
    (config.parent / "key.pem").write_bytes(key.private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.BestAvailableEncryption(passphrase.encode())))  # fmt: skip
    config.write_text(config.read_text() + f"pass_phrase={passphrase}\n")
    provider = make_provider(server, config)
    job_request = provider.render(make_spec(data))
    provider.submit(job_request)
    assert server.signature_failures == []
    seen = repr([(r.headers, r.body) for r in server.requests]) + job_request.to_yaml()
    assert passphrase not in seen and "PRIVATE KEY" not in seen
    with pytest.raises(CloudDDPError, match="is encrypted; add its pass_phrase") as caught:
        config.write_text(config.read_text().replace(f"pass_phrase={passphrase}\n", ""))
        make_provider(server, config).clients()
    assert passphrase not in str(caught.value)


def test_estimator_fits_on_oci(use_server: FakeOCI, data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    estimator = Estimator(provider="oci", entry_point="quick_train.py", source_dir=str(QUICK_SOURCES),
                          instance_count=2, hyperparameters={"fail-rank": 5}, **oci_settings())  # fmt: skip
    assert "create_job" in estimator.dry_run({"train": str(data)})
    assert use_server.requests == []
    status = estimator.fit({"train": str(data)})
    assert status is not None and status.state == "SUCCEEDED"
    assert estimator.model_data == status.artifacts
    out = capsys.readouterr().out
    assert (
        "cloudddp: submitted ocid1.datasciencejobrun." in out and "[node-0] cloudddp: node 0 exited with code 0" in out
    )
    (group,) = use_server.calls("POST", r"^/20190101/jobs$")[0].body["jobNodeConfigurationDetails"][
        "jobNodeGroupConfigurationDetailsList"
    ]
    assert group["jobEnvironmentConfigurationDetails"]["cmd"] == ["--fail-rank", "5"]


def test_follow_up_calls_use_the_credentials_the_job_was_submitted_with(
    server: FakeOCI, key: ThrowawayKey, tmp_path: Path, data: Path
) -> None:
    config = key.write_config(tmp_path / "team", profile="TRAINING")
    provider = OCIProvider(service_endpoint=server.url, environ={}, poll=0.1, log_grace=3)
    spec = make_spec(data, oci={"config_file": str(config), "profile": "TRAINING"})
    handle = provider.submit(provider.render(spec))
    lines = list(provider.logs(handle.job_id, follow=True))  # to the end: following ends with the run
    assert "[node-1] cloudddp: node 1 exited with code 0" in lines
    assert provider.status(handle.job_id).state == "SUCCEEDED"


@pytest.mark.slow
def test_cli_status_logs_and_cancel_with_a_job_run_ocid(
    key: ThrowawayKey, config: Path, data: Path, tmp_path: Path
) -> None:
    from helpers import run_cli

    with fake(key, tmp_path) as server:
        provider = make_provider(server, config)
        handle = provider.submit(provider.render(make_spec(data, args=["--wait"])))
        env = {"CLOUDDDP_OCI_SERVICE_ENDPOINT": server.url, "OCI_CONFIG_FILE": str(config)}
        status = run_cli("status", "--provider", "oci", handle.job_id, env=env)
        assert status.returncode == 0, status.stderr
        assert f"{handle.job_id}: PENDING" in status.stdout or f"{handle.job_id}: RUNNING" in status.stdout
        assert "cloudddp: CREATING" in status.stdout or "cloudddp: ACTIVE" in status.stdout
        cancel = run_cli("cancel", "--provider", "oci", handle.job_id, env=env)
        assert cancel.returncode == 0 and f"asked oci to stop {handle.job_id}" in cancel.stdout
        server.wait_for_run(handle.job_id, timeout=30)
        logs = run_cli("logs", "--provider", "oci", "--follow", handle.job_id, env=env)
        assert logs.returncode == 0 and "[oci] job run CANCELED" in logs.stdout
        bad = run_cli("status", "--provider", "oci", "not-an-ocid", env=env)
        assert bad.returncode == 2 and "is not an OCID" in bad.stderr and "Traceback" not in bad.stderr
