"""OCI request findings: run folders unique per launch, the output tag's length, a log without its group, and
no secret in the container's command. Each is checked on what render builds, what the CLI prints, and (where
something would be sent) what the loopback service received."""

from __future__ import annotations

import time as real_time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import clean_env, cli
from helpers.oci_loopback_server import (
    IMAGE_ENV,
    QUICK_SOURCES,
    FakeOCI,
    ThrowawayKey,
    oci_settings,
)

from cloudddp import session
from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec
from cloudddp.providers.oci import request
from cloudddp.providers.oci.provider import OCIProvider

REPO = Path(__file__).resolve().parents[3]
SECRET = "hf_S3cr3tT0kenValue"


class FrozenClock:
    """The `time` module as request.py sees it, stopped at one moment (both time.time() and the no-argument
    strftime/localtime/gmtime the old one-second stamp used), so two launches happen "at once" for sure."""

    def __init__(self, moment: float) -> None:
        self.moment = moment

    def time(self) -> float:
        return self.moment

    def gmtime(self, seconds: float | None = None) -> real_time.struct_time:
        return real_time.gmtime(self.moment if seconds is None else seconds)

    def localtime(self, seconds: float | None = None) -> real_time.struct_time:
        return real_time.localtime(self.moment if seconds is None else seconds)

    def strftime(self, fmt: str, when: real_time.struct_time | None = None) -> str:
        return real_time.strftime(fmt, self.localtime() if when is None else when)


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> FrozenClock:
    clock = FrozenClock(1_764_000_000.25)
    monkeypatch.setattr(request, "time", clock)
    return clock


def spec_for(tmp_path: Path, **fields: Any) -> Any:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "a.txt").write_text("a")
    oci_fields = fields.pop("oci", {})
    base = {"entry_point": "quick_train.py", "source_dir": str(QUICK_SOURCES), "nodes": 2,
            "inputs": {"train": str(data)}, "oci": oci_settings(**oci_fields)}  # fmt: skip
    return build_spec({**base, **fields})


def render(tmp_path: Path, **fields: Any) -> Any:
    # As every door renders: the secrets policy (cloudddp/secrets_policy.py), then the provider.
    return session.render(OCIProvider(environ={}, service_endpoint="http://127.0.0.1:9"), spec_for(tmp_path, **fields))


@pytest.fixture
def server(key: ThrowawayKey, oci_service: Callable[..., FakeOCI]) -> FakeOCI:
    return oci_service(key, node_env=clean_env(IMAGE_ENV), ingestion_delay=0.2)


def provider_for(server: FakeOCI, config: Path) -> OCIProvider:
    return OCIProvider(service_endpoint=server.url, environ={"OCI_CONFIG_FILE": str(config)}, poll=0.1)


def cli_spec(tmp_path: Path, **oci: Any) -> Path:
    """A cloudddp job spec file for `launch -p oci -f`."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({"entry_point": "train_ddp.py", "source_dir": str(REPO / "sources"),
                                    "nodes": 2, "oci": oci_settings(**oci)}))  # fmt: skip
    return path


# -- 3. two launches of one job in the same second (or millisecond) -------------------------------------------------


def test_two_renders_at_the_same_moment_get_their_own_run_folder_output_and_name(
    tmp_path: Path, frozen: FrozenClock
) -> None:
    first, second = render(tmp_path).parts, render(tmp_path).parts
    assert first.uploads[0].prefix != second.uploads[0].prefix  # runs/<stamp>: where sourcedir.tar.gz goes
    assert first.output_uri != second.output_uri
    assert first.create_job_run.display_name != second.create_job_run.display_name
    groups = [p.create_job.job_node_configuration_details.job_node_group_configuration_details_list[0]
              for p in (first, second)]  # fmt: skip
    sources = [g.job_configuration_details.environment_variables["CLOUDDDP_SOURCE"] for g in groups]
    assert sources[0] != sources[1]
    # The stamp still reads as the moment: UTC to the millisecond, then the random part.
    stamp = first.uploads[0].prefix.rsplit("/runs/", 1)[1]
    assert stamp.startswith("20251124-160000-250-") and len(stamp.rsplit("-", 1)[1]) == 6


def test_run_stamp_at_one_clock_value_differs_each_call() -> None:
    stamps = {request.run_stamp(1_764_000_000.0) for _ in range(50)}
    assert len(stamps) == 50 and all(s.startswith("20251124-160000-000-") for s in stamps)


def test_two_launches_in_the_same_second_upload_two_archives_and_tag_two_outputs(
    server: FakeOCI, config: Path, tmp_path: Path, frozen: FrozenClock
) -> None:
    provider = provider_for(server, config)
    spec = spec_for(tmp_path)
    handles = [provider.submit(provider.render(spec)) for _ in range(2)]
    archives = [name for name in server.object_names() if name.endswith("/sourcedir.tar.gz")]
    assert len(archives) == 2 and len(set(archives)) == 2, archives
    archive_puts = [c.path for c in server.calls("PUT") if c.path.endswith("sourcedir.tar.gz")]
    assert len(set(archive_puts)) == 2, archive_puts  # the second did not overwrite the first's
    runs = [c.body for c in server.calls("POST", r"^/20190101/jobRuns$")]
    assert len({r["displayName"] for r in runs}) == 2
    outputs = [r["freeformTags"]["cloudddp-output"] for r in runs]
    assert len(set(outputs)) == 2
    assert [h.details["output"] for h in handles] == outputs
    for archive, output in zip(archives, sorted(outputs), strict=True):
        assert output.removesuffix("/output").endswith(archive.removesuffix("/sourcedir.tar.gz"))


# -- 4. an output URI longer than a freeform tag value ---------------------------------------------------------------


def long_work_dir(tmp_path: Path, extra: int) -> str:
    """A work dir whose run output URI is 256 + `extra` characters."""
    short = render(tmp_path).parts.output_uri  # oci://bkt@ns/cloudddp/cloudddp-job/runs/<stamp>/output
    return "oci://bkt@ns/" + "p" * (256 + extra - len(short) + len("cloudddp"))


def test_an_output_uri_over_256_characters_is_refused_at_render_naming_the_work_dir(tmp_path: Path) -> None:
    work_dir = long_work_dir(tmp_path, 1)
    with pytest.raises(CloudDDPError) as caught:
        render(tmp_path, oci={"work_dir": work_dir})
    message = str(caught.value)
    assert message.startswith(
        f"the job run's output location is 257 characters: oci.work_dir={work_dir!r} ({len(work_dir)} characters) "
        f"and the job name 'cloudddp-job' (12), "
    )
    assert "whose value OCI limits to 256 characters" in message and "Shorten it by at least 1 characters." in message
    assert "\n" not in message


def test_an_output_uri_of_256_characters_is_tagged(tmp_path: Path) -> None:
    parts = render(tmp_path, oci={"work_dir": long_work_dir(tmp_path, 0)}).parts
    assert len(parts.output_uri) == 256
    assert parts.create_job_run.freeform_tags["cloudddp-output"] == parts.output_uri


def test_a_long_output_setting_is_refused_naming_output(tmp_path: Path) -> None:
    output = "oci://bkt@ns/" + "o" * 250
    with pytest.raises(CloudDDPError) as caught:
        render(tmp_path, output=output)
    assert str(caught.value).startswith(
        f"the job run's output location is 263 characters: output={output!r} (263 characters). "
    )


def test_a_long_work_dir_uploads_nothing(server: FakeOCI, config: Path, tmp_path: Path) -> None:
    provider = provider_for(server, config)
    spec = spec_for(tmp_path, oci={"work_dir": long_work_dir(tmp_path, 5)})
    with pytest.raises(CloudDDPError, match="output location is 261 characters"):
        provider.submit(provider.render(spec))
    assert server.requests == []


# -- 2. a log without its log group, in a cloudddp spec ----------------------------------------------------------


def test_a_log_id_without_log_group_id_names_oci_log_id_and_how_to_fix_it(tmp_path: Path) -> None:
    # Not helpers' LOG: an ADS file read earlier in this process with that value would make it "from the file".
    log = "ocid1.log.oc1.iad.aaaaaaaaspecfilelog"
    with pytest.raises(CloudDDPError) as caught:
        render(tmp_path, oci={"log_group_id": None, "log_id": log})
    assert str(caught.value) == (
        f"oci.log_id={log!r} is set without oci.log_group_id: OCI Data Science needs the log group of a job's log. "
        f"Add oci.log_group_id (--log-group): the OCID of the log group that holds this log (the log's page in the "
        f"OCI Console names it); or set only oci.log_group_id to have a log created for each run."
    )


# -- 5. secrets in the container's command ---------------------------------------------------------------------------


def test_a_secret_named_hyperparameter_is_refused_without_showing_it(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError) as caught:
        render(tmp_path, hyperparameters={"hf_token": SECRET, "lr": 0.1})
    message = str(caught.value)
    assert message.startswith(
        "hyperparameters.hf_token looks like a secret, and hyperparameters are stored in clear in the job's "
        "definition (its environment, and its container command, CMD, which holds the script's arguments), readable "
        "by anyone who can read the job."
    )
    assert "ocid1.vaultsecret" in message and SECRET not in message


@pytest.mark.parametrize("args", [["--epochs", "2", "--hf-token", SECRET], [f"--hf_token={SECRET}"]])
def test_a_secret_given_to_an_option_of_the_script_is_refused_too(tmp_path: Path, args: list[str]) -> None:
    # Before: refused as a hyperparameter, but the same secret in `args` reached CreateJob's CMD.
    with pytest.raises(CloudDDPError) as caught:
        render(tmp_path, args=args)
    assert "sets hf" in str(caught.value) and "which looks like a secret" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_settings_named_like_secrets_are_not_refused(tmp_path: Path) -> None:
    # Before (535dbb1): pad_token_id=0, use_auth_token=True... were refused as secrets; a number, a boolean or a
    # flag followed by a file holds no credential.
    hyperparameters = {"pad_token_id": 0, "eos_token_id": "2", "use_auth_token": True, "token_dropout": 0.1,
                       "tokeniser": "bpe", "secret_sharing": False}  # fmt: skip
    args = ["--pad-token-id", "0", "--token-file", "/run/secrets/hf", "--max-tokens", "512"]
    assert render(tmp_path, hyperparameters=hyperparameters, args=args) is not None


def test_a_password_in_a_url_argument_is_refused_redacted(tmp_path: Path) -> None:
    with pytest.raises(CloudDDPError) as caught:
        render(tmp_path, args=["--db", f"postgres://user:{SECRET}@db/x"])
    assert str(caught.value).startswith("args[1]='postgres://user:***@db/x' holds a password in a URL")
    assert SECRET not in str(caught.value)


def test_the_cli_refuses_a_secret_hyperparameter_with_exit_2_in_one_paragraph(tmp_path: Path) -> None:
    path = cli_spec(tmp_path)
    result = cli("launch", "-p", "oci", "-f", str(path), "-H", f"hf_token={SECRET}", "--dry-run", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stdout + result.stderr
    assert "hyperparameters.hf_token looks like a secret" in result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert result.stderr.strip().count("\n") == 0, result.stderr  # one paragraph


def test_a_secret_hyperparameter_never_reaches_the_service(server: FakeOCI, config: Path, tmp_path: Path) -> None:
    provider = provider_for(server, config)
    with pytest.raises(CloudDDPError, match=r"hyperparameters\.api_key looks like a secret"):
        provider.submit(session.render(provider, spec_for(tmp_path, hyperparameters={"api_key": SECRET})))
    assert server.requests == []
