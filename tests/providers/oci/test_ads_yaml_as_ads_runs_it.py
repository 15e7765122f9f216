"""An Oracle ADS train.yaml runs under cloudddp as `ads opctl run` runs it: an untagged image gets `:latest`, an unset
block storage ADS's 50 GB; the script's arguments stay one argument per entry (cloudddp's behaviour, warned about
and stated in the ADS table of docs/providers/oci.md where ADS differs).

Read in oracle/accelerated-data-science at 0e785b9fd36fb354019e0924b94ac2b0ec6f235a:
- `ads/opctl/cmds.py` run(): for `kind: distributed` it calls update_ini, then update_image
  (`ads/opctl/distributed/cmds.py`): update_ini takes the tag after the last ":" of cluster.spec.image, or
  `tag1 = "latest"` when the name has none; update_image writes `registry + ":" + tag` back into cluster.spec.image.
- `ads/jobs/builders/infrastructure/dsc_job.py` DSCJob.load_defaults: a job without block_storage_size_in_gbs gets
  CONST_DEFAULT_BLOCK_STORAGE_SIZE = 50.
- `ads/opctl/distributed/common/cluster_config_helper.py` ClusterConfigToJobSpecConverter.job_def_info:
  OCI__ENTRY_SCRIPT_ARGS = " ".join(str(v) for v in runtime.args); ADS's PyTorch runner (the
  `pytorch/v1/pytorch_cluster.py` of the artifact `ads opctl distributed-training init` downloads, not in the
  repository) runs `python script *shlex.split(OCI__ENTRY_SCRIPT_ARGS)` (PyTorchProvider.run_code).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml
from helpers import REPO
from helpers.ads_yaml import ads_yaml

from cloudddp.job_spec import load_spec
from cloudddp.providers.oci.ads import FIELDS, spec_dict_from_ads
from cloudddp.providers.oci.validation import check_image

PROJECT = "ocid1.datascienceproject.oc1.iad.aaaaaaaaproject"
COMPARTMENT = "ocid1.compartment.oc1..aaaaaaaacompartment"


def train_yaml(image: str, infrastructure: str = "shapeName: VM.GPU2.1\n", args: list[str] | None = None) -> str:
    runtime = 'entryPoint: "train.py"\n' + (f"args: {yaml.safe_dump(args, default_flow_style=True)}" if args else "")
    return ads_yaml(
        project=PROJECT, compartment=COMPARTMENT, display_name="ddp", infrastructure=infrastructure,
        cluster=f"image: {image}\nworkDir: oci://bucket@ns/dir\nmain:\n  replicas: 1\nworker:\n  replicas: 1\n",
        runtime=runtime,
    )  # fmt: skip


def converted(text: str) -> tuple[dict[str, Any], list[str]]:
    warnings: list[str] = []
    return spec_dict_from_ads(yaml.safe_load(text), "train.yaml", warn=warnings.append), warnings


# -- the image


def ads_runs_image(image: str) -> str:
    """What update_ini + update_image make of cluster.spec.image (no --tag, no --registry, not an @-name)."""
    parts = image.rsplit(":", 1)
    return f"{parts[0]}:{'latest' if len(parts) == 1 else parts[1]}"


def test_an_untagged_image_runs_as_latest_as_ads_runs_it_with_a_warning() -> None:
    spec, warnings = converted(train_yaml("iad.ocir.io/ns/train"))
    assert spec["oci"]["image"] == ads_runs_image("iad.ocir.io/ns/train") == "iad.ocir.io/ns/train:latest"
    assert check_image(spec["oci"]["image"])  # before: refused at render ("a tag is required")
    assert warnings == [
        "train.yaml: spec.cluster.spec.image 'iad.ocir.io/ns/train' has no tag; ADS runs it as "
        "'iad.ocir.io/ns/train:latest' (`ads opctl run` adds :latest), and so does cloudddp. Write the tag to be sure "
        "which image runs."
    ]


def test_a_tagged_image_or_a_placeholder_is_left_as_written() -> None:
    for image in ("iad.ocir.io/ns/train:1", "iad.ocir.io/ns/train:1@sha256:" + "0" * 64):
        spec, warnings = converted(train_yaml(image))
        assert (spec["oci"]["image"], warnings) == (image, []) and ads_runs_image(image) == image
    spec, _ = converted(train_yaml("<region.ocir.io/my-tenancy/image-name>"))  # the guide's: refused at render
    assert spec["oci"]["image"] == "<region.ocir.io/my-tenancy/image-name>"


# -- block storage


def test_block_storage_is_ads_default_when_the_file_sets_none(tmp_path: Path) -> None:
    spec, _ = converted(train_yaml("iad.ocir.io/ns/train:1"))
    assert spec["oci"]["block_storage_gb"] == 50  # before: cloudddp's own default, 100
    spec, _ = converted(train_yaml("iad.ocir.io/ns/train:1", "shapeName: VM.GPU2.1\nblockStorageSize: 256\n"))
    assert spec["oci"]["block_storage_gb"] == 256
    (tmp_path / "train.py").write_text("")
    (tmp_path / "train.yaml").write_text(train_yaml("iad.ocir.io/ns/train:1"))
    assert load_spec(tmp_path / "train.yaml").oci.block_storage_gb == 50
    assert load_spec(tmp_path / "train.yaml", {"oci": {"block_storage_gb": 200}}).oci.block_storage_gb == 200


# -- arguments


def test_each_argument_stays_one_argument_and_a_split_under_ads_is_warned_about() -> None:
    args = ["--run-name", "resnet 50", "--tag", "it's", "--lr", "0.1"]
    spec, warnings = converted(train_yaml("iad.ocir.io/ns/train:1", args=args))
    assert spec["args"] == args  # cloudddp: one argument per entry
    with_ads = shlex.join(args)  # cloudddp's line would survive ADS's split: it is the joining that loses the bounds
    assert shlex.split(with_ads) == args
    try:
        under_ads: list[str] | str = shlex.split(" ".join(args))  # job_def_info's join, the runner's split
    except ValueError as exc:  # the lone quote: ADS's runner fails on the whole line
        under_ads = str(exc)
    assert under_ads != args
    assert len(warnings) == 1 and "entries 1, 3 hold a space, a quote, a backslash or nothing" in warnings[0]
    assert "resnet" not in warnings[0]  # positions only: an argument may be a secret


def test_plain_arguments_pass_without_a_warning() -> None:
    args = ["--epochs", "2", "--data=/data/train", "#1"]
    spec, warnings = converted(train_yaml("iad.ocir.io/ns/train:1", args=args))
    assert (spec["args"], warnings) == (args, [])
    assert shlex.split(" ".join(args)) == args  # what ADS's runner gets is the same here


def test_the_ads_table_states_each_difference() -> None:
    page = (REPO / "docs" / "providers" / "oci.md").read_text()
    for field, words in (
        ("spec.runtime.spec.args", "splits that line again"),
        ("spec.cluster.spec.image", ":latest"),
        ("spec.infrastructure.spec.blockStorageSize", "50, ADS's default"),
    ):
        assert words in FIELDS[field] and f"| `{field}` | {FIELDS[field]} |" in page
