"""A job spec or an Oracle ADS train.yaml in any encoding PyYAML (and so ADS) reads: UTF-8, or UTF-16 with a
byte-order mark (what Windows PowerShell 5.1's `>` writes); anything else is one paragraph, exit 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from helpers import cli
from helpers.ads_yaml import guide_ads_yaml
from helpers.oci_loopback_server import COMPARTMENT, LOG_GROUP, PROJECT

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import load_spec
from cloudddp.spec import read_yaml

SPEC = "entry_point: train.py\nnodes: 2\nenvironment:\n  GREETING: 'été'\n  DEBUG: off\n"

# An Oracle ADS `opctl` train.yaml (the shape of the ADS guide's example).
ADS_YAML = guide_ads_yaml(
    project=PROJECT,
    compartment=COMPARTMENT,
    log_group=LOG_GROUP,
    subnet="ocid1.subnet.oc1.iad.aaaaaaaasubnet",
    image="iad.ocir.io/tenancy/image:1",
    env={"GREETING": "été"},
    runtime='entryPoint: "train.py"\n',
)

# PowerShell 5.1's `>` (UTF-16 LE with a BOM), big-endian with a BOM, and UTF-8 with a BOM (Notepad).
BOM_ENCODINGS = ["utf-16", "utf-16-be-bom", "utf-8-sig"]


def encoded(text: str, encoding: str, crlf: bool = True) -> bytes:
    """`text` as a Windows editor saves it: CRLF line ends, and the byte-order mark the encoding has."""
    text = text.replace("\n", "\r\n") if crlf else text
    if encoding == "utf-16-be-bom":
        return b"\xfe\xff" + text.encode("utf-16-be")
    return text.encode(encoding)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return tmp_path


@pytest.mark.parametrize("encoding", BOM_ENCODINGS)
def test_a_spec_with_a_byte_order_mark_reads_as_its_utf8_twin(folder: Path, encoding: str) -> None:
    (folder / "job.yaml").write_bytes(encoded(SPEC, encoding))
    (folder / "utf8.yaml").write_text(SPEC, encoding="utf-8")
    spec = load_spec(folder / "job.yaml")
    assert spec == load_spec(folder / "utf8.yaml")
    # Still YAML 1.2's core schema: `off` is the word, not false.
    assert spec.environment == {"GREETING": "été", "DEBUG": "off"}


@pytest.mark.parametrize("command", [("render",), ("launch", "--dry-run")])
def test_the_cli_renders_a_utf16_spec_as_its_utf8_twin(folder: Path, command: tuple[str, ...]) -> None:
    (folder / "job.yaml").write_bytes(encoded(SPEC, "utf-16"))
    (folder / "utf8.yaml").write_text(SPEC, encoding="utf-8")
    utf16 = cli(*command, "-p", "slurm", "-f", "job.yaml", cwd=folder)
    assert utf16.returncode == 0, utf16.stderr
    utf8 = cli(*command, "-p", "slurm", "-f", "utf8.yaml", cwd=folder)
    assert utf16.stdout == utf8.stdout.replace("utf8.yaml", "job.yaml")
    assert "export GREETING='été'" in utf16.stdout


def test_an_ads_train_yaml_in_utf16_renders_for_oci(folder: Path) -> None:
    (folder / "train.yaml").write_bytes(encoded(ADS_YAML, "utf-16"))
    rendered = cli("render", "-p", "oci", "-f", "train.yaml", cwd=folder)
    assert rendered.returncode == 0, rendered.stderr
    create_job = yaml.safe_load(rendered.stdout)["request"]["create_job"]
    (group,) = create_job["job_node_configuration_details"]["job_node_group_configuration_details_list"]
    assert group["replicas"] == 3
    assert group["job_configuration_details"]["environment_variables"]["GREETING"] == "été"
    (folder / "train.yaml").write_text(ADS_YAML, encoding="utf-8")
    twin = cli("render", "-p", "oci", "-f", "train.yaml", cwd=folder)
    assert unstamped(twin.stdout) == unstamped(rendered.stdout)


def unstamped(text: str) -> str:
    """A rendering without its time stamps (the run's folder and name)."""
    return re.sub(r"\d{8}-\d{6}[-0-9a-f]*", "<STAMP>", text)


def test_a_key_given_twice_in_a_utf16_file_is_still_refused(folder: Path) -> None:
    (folder / "job.yaml").write_bytes(encoded("entry_point: train.py\nnodes: 1\nnodes: 2\n", "utf-16"))
    with pytest.raises(CloudDDPError, match=r"found the key 'nodes' a second time \(first on line 2\), at line 3"):
        read_yaml(folder / "job.yaml")


@pytest.mark.parametrize("command", [("render",), ("launch", "--dry-run")])
@pytest.mark.parametrize("kind", ["spec", "ads"])
def test_a_latin1_file_is_one_paragraph_naming_the_byte_and_exit_2(
    folder: Path, command: tuple[str, ...], kind: str
) -> None:
    text = SPEC if kind == "spec" else ADS_YAML
    (folder / "job.yaml").write_bytes(text.encode("latin-1"))
    offset = text.encode("latin-1").index(b"\xe9")
    result = cli(*command, "-p", "oci" if kind == "ads" else "slurm", "-f", "job.yaml", cwd=folder)
    assert (result.returncode, result.stdout) == (2, "")
    assert "Traceback" not in result.stderr
    error = " ".join(result.stderr.split())  # the console wraps long lines
    assert error.startswith(
        f"error: the job spec file 'job.yaml' cannot be read as YAML text: byte 0xe9 at byte offset {offset} "
        "is not utf-8 (invalid continuation byte). A YAML file must be UTF-8, or UTF-16 with a byte-order mark"
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ("entry_point: train.py\n".encode("utf-16-le"), "character U+0000 at character 1"),  # no BOM
        ("entry_point: train.py\n".encode("utf-32"), "character U+0000 at character 1"),
        (b"\xff\xfe" + "name: \ud800".encode("utf-16-le", "surrogatepass"), "at byte offset 14 is not utf-16-le"),
    ],
    ids=["utf-16-without-bom", "utf-32", "utf-16-lone-surrogate"],
)
def test_what_pyyaml_cannot_decode_is_refused_with_where(folder: Path, data: bytes, problem: str) -> None:
    (folder / "job.yaml").write_bytes(data)
    with pytest.raises(CloudDDPError, match="cannot be read as YAML text") as caught:
        read_yaml(folder / "job.yaml")
    assert problem in str(caught.value)
    assert str(folder / "job.yaml") in str(caught.value)
