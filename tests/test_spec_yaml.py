"""How a job spec file is read: YAML 1.2's core schema (booleans, integers, floats), and no true/false where a number is due."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import cli

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import build_spec, load_spec
from cloudddp.spec import read_yaml


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    return tmp_path / "job.yaml"


def test_nodes_true_is_refused_not_read_as_one_node(spec_file: Path) -> None:
    spec_file.write_text("entry_point: train.py\nnodes: true\n")
    result = cli("render", "-p", "slurm", "-f", str(spec_file), cwd=spec_file.parent)
    assert result.returncode == 2, result.stdout
    assert "nodes: Value error, must be a number, not true (got True)" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"max_runtime": True}, "max_runtime"),
        ({"nproc_per_node": False}, "nproc_per_node"),
        ({"nodes": 2, "min_nodes": True}, "min_nodes"),
        ({"sagemaker": {"volume_size_gb": True}}, "sagemaker.volume_size_gb"),
    ],
)
def test_true_or_false_is_refused_wherever_a_number_is_due(data: dict[str, object], field: str) -> None:
    with pytest.raises(CloudDDPError, match=rf"{field}: Value error, must be a number, not (true|false)"):
        build_spec({"entry_point": "train.py", **data})


def test_fields_that_are_booleans_still_take_them() -> None:
    spec = build_spec({"entry_point": "pkg.train", "module": True, "hyperparameters": {"amp": True, "lr": 0.1}})
    assert spec.module is True
    assert spec.script_args() == ["--amp", "True", "--lr", "0.1"]


def test_yes_no_on_off_are_the_words_written(spec_file: Path) -> None:
    # YAML 1.1 (PyYAML's default) reads them as booleans: the key `on` became True and was refused as
    # "environment.1.[key]: Input should be a valid string", and `DEBUG: off` could not be a string.
    spec_file.write_text(
        "entry_point: train\nnodes: 2\nmodule: yes\n"  # a module's name: -m train.py is refused
        "environment: {on: x, DEBUG: off}\nhyperparameters: {amp: yes, 'n': 3}\n"
    )
    spec = load_spec(spec_file)
    assert spec.environment == {"on": "x", "DEBUG": "off"}
    assert spec.script_args() == ["--amp", "yes", "--n", "3"]
    assert spec.module is True  # pydantic reads the word yes as true for a boolean field

    result = cli("render", "-p", "slurm", "-f", str(spec_file), cwd=spec_file.parent)
    assert result.returncode == 0, result.stderr
    assert "export on=x\n" in result.stdout and "export DEBUG=off\n" in result.stdout
    assert "--amp yes --n 3" in result.stdout


def test_colon_separated_times_are_the_words_written_not_base_60_numbers(spec_file: Path) -> None:
    # YAML 1.1 (PyYAML's default) read 36:00:00 as 129600 and 05:30 as 330: the walltime was refused
    # ("Input should be a valid string") and the variable held another value.
    spec_file.write_text(
        "entry_point: train.py\nenvironment: {TZ_OFFSET: 05:30}\nhyperparameters: {warmup: 1:30.5}\n"
        "pbs: {walltime: 36:00:00}\nslurm: {time: 30:00}\n"
    )
    pbs = cli("render", "-p", "pbs", "-f", str(spec_file), cwd=spec_file.parent)
    assert pbs.returncode == 0, pbs.stderr
    assert "\n#PBS -l walltime=36:00:00\n" in pbs.stdout and "TZ_OFFSET=05:30" in pbs.stdout
    assert "--warmup 1:30.5" in pbs.stdout
    slurm = cli("render", "-p", "slurm", "-f", str(spec_file), cwd=spec_file.parent)
    assert slurm.returncode == 0, slurm.stderr
    assert "\n#SBATCH --time=30:00\n" in slurm.stdout


def test_numbers_without_colons_are_still_numbers(spec_file: Path) -> None:
    spec_file.write_text(
        "entry_point: train.py\nnodes: 0x2\nmax_runtime: 7_200\nhyperparameters: {lr: 1.5e-3, n: -3}\n"
    )
    spec = load_spec(spec_file)
    assert (spec.nodes, spec.max_runtime) == (2, 7200)
    assert spec.hyperparameters == {"lr": 0.0015, "n": -3}


def test_numbers_are_read_as_yaml_1_2_reads_them_not_as_yaml_1_1(spec_file: Path) -> None:
    # YAML 1.1 (PyYAML's default) read 0700 as octal 448 and 1_000 as 1000, and could not read 0o17;
    # 1e3 was a string (1.1's floats need a dot). Core schema: yaml.org/spec/1.2.2 section 10.3.2.
    spec_file.write_text(
        "entry_point: train.py\nenvironment: {N: 1_000}\n"
        "hyperparameters: {seed: 0700, m: -007, o: 0o17, h: 0x1F, f: 1e3, g: .5, n: 1_000, ip: 1.2.3.4}\n"
    )
    spec = load_spec(spec_file)
    assert spec.environment == {"N": "1_000"}
    assert spec.hyperparameters == {
        "seed": 700, "m": -7, "o": 15, "h": 31, "f": 1000.0, "g": 0.5, "n": "1_000", "ip": "1.2.3.4"
    }  # fmt: skip
    result = cli("render", "-p", "slurm", "-f", str(spec_file), cwd=spec_file.parent)
    assert result.returncode == 0, result.stderr
    assert "--seed 700 " in result.stdout and "--n 1_000" in result.stdout and "export N=1_000\n" in result.stdout


def test_a_zero_padded_number_in_the_environment_is_refused_not_changed(spec_file: Path) -> None:
    # Unquoted, 02134 is a number (1116 in YAML 1.1); an environment holds only strings.
    spec_file.write_text("entry_point: train.py\nenvironment: {ZIP: 02134}\n")
    result = cli("launch", "-f", str(spec_file), "--dry-run", cwd=spec_file.parent)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "environment.ZIP: Input should be a valid string (got 2134)" in result.stderr


def test_true_and_false_in_any_case_stay_booleans(spec_file: Path) -> None:
    spec_file.write_text("entry_point: train\nmodule: TRUE\nhyperparameters: {a: True, b: false}\n")
    spec = load_spec(spec_file)
    assert spec.module is True
    assert spec.hyperparameters == {"a": True, "b": False}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"inputs": {"train": ""}}, "inputs: Value error, channel 'train' has an empty path"),
        ({"inputs": {"train": "  "}}, "inputs: Value error, channel 'train' has an empty path"),
        ({"output": ""}, "output: Value error, is empty"),
        ({"checkpoint": ""}, "checkpoint: Value error, is empty"),
        ({"rdzv_backend": "etcd-v2", "rdzv_endpoint": "h:1"}, "rdzv_endpoint: Value error, rdzv_backend='etcd-v2' and"),
        (
            {"rdzv_endpoint": "h:1"},
            "rdzv_endpoint: Value error, rdzv_backend='c10d' and rdzv_endpoint apply to elastic",
        ),
        ({"rdzv_backend": "etcd-v2"}, "rdzv_endpoint: Value error, rdzv_backend='etcd-v2' and rdzv_endpoint apply"),
    ],
)
def test_values_that_would_be_misread_are_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(CloudDDPError, match=re.escape(message)):
        build_spec({"entry_point": "train.py", "nodes": 2, **data})


def test_an_elastic_job_takes_its_rendezvous_settings() -> None:
    spec = build_spec(
        {"entry_point": "t.py", "nodes": 2, "min_nodes": 1, "rdzv_backend": "etcd-v2", "rdzv_endpoint": "h:1"}
    )
    assert (spec.rdzv_backend, spec.rdzv_endpoint) == ("etcd-v2", "h:1")
    with pytest.raises(CloudDDPError, match="rdzv_backend etcd-v2 needs the etcd server's HOST:PORT"):
        build_spec({"entry_point": "t.py", "nodes": 2, "min_nodes": 1, "rdzv_backend": "etcd-v2"})


def test_an_empty_input_path_stages_nothing_from_the_cli(spec_file: Path) -> None:
    result = cli("launch", "-p", "sagemaker", "--role", "arn:aws:iam::123456789012:role/SageMaker",
                     "--region", "us-east-1", "--instance-type", "ml.g5.xlarge", "-i", "train=", "--dry-run",
                     str(spec_file.parent / "train.py"), cwd=spec_file.parent)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "channel 'train' has an empty path" in result.stderr


@pytest.mark.parametrize("flag", ["-i", "-e", "-H"])
def test_a_key_given_twice_with_different_values_is_refused_not_dropped(spec_file: Path, flag: str) -> None:
    result = cli("render", "-p", "local", flag, "train=./a", flag, "train=./b", str(spec_file.parent / "train.py"),
                     cwd=spec_file.parent)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "train=... is given twice, with different values; give it once" in result.stderr
    assert "./a" not in result.stderr  # values are not shown: an --env value may be a secret


@pytest.mark.parametrize(
    ("first", "second", "variable"), [("train", "TRAIN", "TRAIN"), ("my-data", "my_data", "MY_DATA")]
)
def test_two_channels_the_script_would_read_from_one_variable_are_refused(
    spec_file: Path, first: str, second: str, variable: str
) -> None:
    # Both reached the nodes as CLOUDDDP_CHANNEL_TRAIN: OCI filled it with one channel's staged version
    # and pointed it at the other's folder, so the job failed after the upload with FileNotFoundError.
    (spec_file.parent / "a").mkdir()
    (spec_file.parent / "b").mkdir()
    result = cli("launch", "-p", "local", "-i", f"{first}=a", "-i", f"{second}=b", "--dry-run", "train.py",
                     cwd=spec_file.parent)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr and result.stdout == ""
    assert (
        f"channels {first!r} and {second!r} would reach the script as one variable, CLOUDDDP_CHANNEL_{variable}; "
        "rename one of them"
    ) in result.stderr


def test_a_key_given_twice_in_the_file_is_refused_not_the_first_block_dropped(spec_file: Path) -> None:
    # PyYAML kept the second `hyperparameters:` block and dropped epochs and lr without a word; YAML requires
    # a mapping's keys to be unique (yaml.org/spec/1.2.2 section 3.2.1.1).
    spec_file.write_text("entry_point: train.py\nhyperparameters: {epochs: 3, lr: 0.1}\nnodes: 2\nhyperparameters:\n"
                         "  batch_size: 32\n")  # fmt: skip
    result = cli("launch", "-f", str(spec_file), "--dry-run", cwd=spec_file.parent)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr == (
        f"error: the job spec file {str(spec_file)!r} is not valid YAML: found the key 'hyperparameters' a second "
        f"time (first on line 2), at line 4, column 1 (while constructing a mapping).\n"
    )


def test_merge_keys_may_still_be_overridden(spec_file: Path) -> None:
    spec_file.write_text("base: &b {epochs: 3, lr: 0.1}\nentry_point: train.py\nhyperparameters: {<<: *b, lr: 0.5}\n")
    data = read_yaml(spec_file)
    assert data["hyperparameters"] == {"epochs": 3, "lr": 0.5}


@pytest.mark.parametrize("spelling", ["absolute", "from-here", "within"])
def test_the_script_is_found_inside_source_dir_however_either_is_spelled(spec_file: Path, spelling: str) -> None:
    # `--source-dir sources /abs/sources/train.py` sent this machine's absolute path to the nodes, and
    # `--source-dir /abs/sources sources/train.py` looked for sources/sources/train.py.
    folder = spec_file.parent
    (folder / "sources").mkdir()
    (folder / "sources" / "train.py").write_text("print('hi')\n")
    source_dir, script = {
        "absolute": ("sources", str(folder / "sources" / "train.py")),
        "from-here": (str(folder / "sources"), "sources/train.py"),
        "within": ("sources", "train.py"),
    }[spelling]
    result = cli("render", "-p", "slurm", "--source-dir", source_dir, script, cwd=folder)
    assert result.returncode == 0, result.stderr
    assert "--label cloudddp-launch train.py &\n" in result.stdout


def test_a_folder_given_as_the_script_is_named_a_folder(spec_file: Path) -> None:
    (spec_file.parent / "s").mkdir()
    result = cli("launch", "s", cwd=spec_file.parent)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "entry_point 's': the training script 's' is a folder, not a script" in result.stderr


def test_a_spec_path_that_is_a_folder_is_one_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "job.yaml"
    folder.mkdir()
    result = cli("launch", "-f", str(folder), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"the job spec file '{folder}' cannot be read: Is a directory." in result.stderr, result.stderr
