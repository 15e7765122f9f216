"""The SM_* variables a framework container's script gets, against SageMaker's training toolkit itself.

Scripts written for SageMaker read `json.loads(os.environ["SM_TRAINING_ENV"])`, SM_MODULE_DIR, SM_NUM_GPUS, ...;
the local emulation (`sagemaker.emulate`) and bring-your-own images (`sagemaker.framework_environment`) must
give them what AWS's framework containers give: the toolkit's `Environment().to_env_vars()`.

`ToolkitEnvironment` below is the toolkit's own code, transcribed: aws/sagemaker-training-toolkit, commit
33839372faf8017edb7dafc6290c1ef63557b404, src/sagemaker_training/environment.py (`Environment.__init__`, its
`@property`s, `get_*`, `to_env_vars`), mapping.py (`to_env_vars`, `to_cmd_args`, `split_by_criteria`,
`MappingMixin`: dict(env) is every property by name) and params.py (the names). The package itself cannot be
installed here (it needs boto3 at import and writes /opt/ml); what it reads from the machine is passed in: its
base_dir, os.environ, num_gpus()/num_cpus()/num_neurons(), and validate_smddprun()/validate_smddpmprun().
(While this was written, the emulation's variables were also compared with the package's own
`Environment().to_env_vars()`, its source at that commit run with SAGEMAKER_BASE_DIR set to each emulated host:
identical, for the SDK's keys, none of them, and SAGEMAKER_PROGRAM / SM_HP_MP_PARAMETERS set.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from fixtures.sagemaker_upstream import HETERO_HYPERPARAMETERS, hetero_resource_config
from helpers import run_cli

from cloudddp.cluster import DetectOptions, sagemaker, sagemaker_toolkit_env
from cloudddp.cluster.environment import EmulatedCluster, EmulatedNode

# params.py
SAGEMAKER_PREFIX = "sagemaker_"
SAGEMAKER_HYPERPARAMETERS = ("sagemaker_program", "sagemaker_submit_directory", "sagemaker_enable_cloudwatch_metrics",
                             "sagemaker_region", "sagemaker_container_log_level", "sagemaker_job_name",
                             "default_user_module_name", "_tuning_objective_metric", "sagemaker_s3_output")  # fmt: skip
# The @property names of environment.Environment at that commit, as listed in the source: SM_TRAINING_ENV's keys.
TOOLKIT_PROPERTIES = {
    "additional_framework_parameters", "channel_input_dirs", "current_host", "current_instance_group",
    "current_instance_group_hosts", "current_instance_type", "distribution_hosts", "distribution_instance_groups",
    "framework_module", "hosts", "hyperparameters", "input_config_dir", "input_data_config", "input_dir",
    "instance_groups", "instance_groups_dict", "is_hetero", "is_master", "is_modelparallel_enabled",
    "is_smddpmprun_installed", "is_smddprun_installed", "job_name", "log_level", "master_hostname", "model_dir",
    "module_dir", "module_name", "network_interface_name", "num_cpus", "num_gpus", "num_neurons", "output_data_dir",
    "output_dir", "output_intermediate_dir", "resource_config", "topology", "user_entry_point",
}  # fmt: skip


def mapping_to_env_vars(mapping: Mapping[str, Any]) -> dict[str, str]:
    """mapping.to_env_vars (Python 3: six.binary_type is bytes, six.string_types is str)."""

    def format_key(key: Any) -> str:
        return f"SM_{str(key).upper()}" if key else ""

    def format_value(value: Any) -> str:
        if isinstance(value, bytes):
            return value.decode("latin1")
        if value is None:
            return ""
        if isinstance(value, str):
            return str(value)
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    return {format_key(k): format_value(v) for k, v in mapping.items()}


def mapping_to_cmd_args(mapping: Mapping[str, Any]) -> list[str]:
    """mapping.to_cmd_args with mapping._decode (Python 3)."""

    def decode(obj: Any) -> str:
        return "" if obj is None else obj.decode("latin1") if isinstance(obj, bytes) else str(obj)

    def arg_name(obj: Any) -> str:
        string = decode(obj)
        return (f"--{string}" if len(string) > 1 else f"-{string}") if string else ""

    def arg_value(value: Any) -> str:
        if hasattr(value, "items"):
            return ",".join(f"{k}={v}" for k, v in sorted(value.items()))
        return decode(value)

    keys = sorted(mapping.keys())
    return [item for key in keys for item in (arg_name(key), arg_value(mapping[key]))]


class ToolkitEnvironment(Mapping):  # type: ignore[type-arg]
    """environment.Environment, transcribed; the machine's answers are arguments (see the module docstring)."""

    def __init__(
        self, base_dir: Path, environ: dict[str, str], *, gpus: int, cpus: int, neurons: int, smddprun: bool = False
    ) -> None:
        self.environ = environ  # os.environ: __init__ writes to it too
        code_dir = str(base_dir / "code")
        input_dir = base_dir / "input"
        config = input_dir / "config"
        module_name = environ.get("SAGEMAKER_PROGRAM")
        self._num_gpus, self._num_cpus, self._module_name, self._user_entry_point = gpus, cpus, module_name, module_name
        self._model_dir = str(base_dir / "model")
        resource_config = json.loads((config / "resourceconfig.json").read_text())
        input_data_config = json.loads((config / "inputdataconfig.json").read_text())
        all_hyperparameters = {}
        for k, v in json.loads((config / "hyperparameters.json").read_text()).items():  # read_hyperparameters
            with contextlib.suppress(ValueError, TypeError):
                v = json.loads(v)
            all_hyperparameters[k] = v
        hosts = resource_config["hosts"]
        self._current_instance_type = resource_config.get("current_instance_type", "local")
        self._current_instance_group = resource_config.get("current_group_name", "homogeneousCluster")
        self._current_host = current_host = resource_config["current_host"]
        self._num_neurons = neurons
        included = {k: v for k, v in all_hyperparameters.items()
                    if k in SAGEMAKER_HYPERPARAMETERS or k.startswith(SAGEMAKER_PREFIX)}  # fmt: skip
        excluded = {k: v for k, v in all_hyperparameters.items() if k not in included}
        sagemaker_hyperparameters = included
        self._additional_framework_parameters = {
            k: sagemaker_hyperparameters[k] for k in sagemaker_hyperparameters if k not in SAGEMAKER_HYPERPARAMETERS
        }
        sagemaker_region = sagemaker_hyperparameters.get("sagemaker_region", environ.get("AWS_DEFAULT_REGION"))
        environ["SAGEMAKER_JOB_NAME"] = sagemaker_hyperparameters.get("sagemaker_job_name", "")
        environ["CURRENT_HOST"] = current_host
        environ["SAGEMAKER_REGION"] = sagemaker_region or ""
        self._hosts = hosts
        self._network_interface_name = resource_config.get("network_interface_name", "eth0")
        self._topology = resource_config.get("topology", [])
        self._hyperparameters = excluded
        self._resource_config, self._input_data_config = resource_config, input_data_config
        self._output_data_dir = str(base_dir / "output" / "data")
        self._output_intermediate_dir = str(base_dir / "output" / "intermediate")
        self._channel_input_dirs = {channel: str(input_dir / "data" / channel) for channel in input_data_config}
        if self._module_name is None:
            self._module_name = str(sagemaker_hyperparameters.get("sagemaker_program", None))
        self._user_entry_point = self._user_entry_point or sagemaker_hyperparameters.get("sagemaker_program")
        self._module_dir = str(sagemaker_hyperparameters.get("sagemaker_submit_directory", code_dir))
        self._log_level = sagemaker_hyperparameters.get("sagemaker_container_log_level", logging.INFO)
        self._framework_module = environ.get("SAGEMAKER_TRAINING_MODULE")
        self._input_dir, self._input_config_dir, self._output_dir = (
            str(input_dir),
            str(config),
            str(base_dir / "output"),
        )
        self._job_name = environ.get("TRAINING_JOB_NAME")
        self._init_groups()
        mp_parameters = environ.get("SM_HP_MP_PARAMETERS")
        self._is_modelparallel_enabled = mp_parameters and mp_parameters != "{}"
        self._is_smddprun_installed = self._is_smddpmprun_installed = smddprun

    def _init_groups(self) -> None:
        """The heterogeneous-cluster part of __init__, with get_* inlined."""
        groups = self._resource_config.get("instance_groups", [])
        self._current_instance_group_hosts = next(
            (g["hosts"] for g in groups if self._current_instance_group == g["instance_group_name"]), []
        )
        self._instance_groups = [g["instance_group_name"] for g in groups]
        self._instance_groups_dict = {g["instance_group_name"]: g for g in groups}
        default_groups = []  # get_distribution_instance_groups_from_resource_config
        flags = ("sagemaker_mpi_enabled", "sagemaker_parameter_server_enabled",
                 "sagemaker_distributed_dataparallel_enabled", "sagemaker_pytorch_ddp_enabled",
                 "sagemaker_pytorch_xla_multi_worker_enabled", "sagemaker_multi_worker_mirrored_strategy_enabled",
                 "sagemaker_torch_distributed_enabled")  # fmt: skip
        if any(self._additional_framework_parameters.get(flag, False) for flag in flags):
            default_groups.append(self._resource_config.get("current_group_name", "homogeneousCluster"))
        self._distribution_instance_groups = self._additional_framework_parameters.get(
            "sagemaker_distribution_instance_groups", default_groups
        )
        if groups:  # get_distribution_hosts
            self._distribution_hosts = [h for g in groups if g["instance_group_name"] in
                                        self._distribution_instance_groups for h in g["hosts"]]  # fmt: skip
        else:
            self._distribution_hosts = self._hosts.copy()
        self._is_hetero = bool(len(self._instance_groups) > 1)
        self._master_hostname = next(iter(self._distribution_hosts or self._hosts))  # get_master_hostname
        self._is_master = self._current_host == self._master_hostname

    # MappingMixin: the properties are the mapping.
    def __getitem__(self, key: str) -> Any:
        return getattr(self, "_" + key) if key not in ("module_name",) else self.module_name

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(TOOLKIT_PROPERTIES))

    def __len__(self) -> int:
        return len(TOOLKIT_PROPERTIES)

    @property
    def module_name(self) -> str | None:
        name = self._module_name
        return name[:-3] if name and name.endswith(".py") else name  # _parse_module_name

    @property
    def additional_framework_parameters(self) -> dict[str, Any]:
        return self._additional_framework_parameters

    def to_env_vars(self) -> dict[str, str]:
        t = self
        env = {
            "hosts": t["hosts"], "network_interface_name": t["network_interface_name"], "hps": t["hyperparameters"],
            "user_entry_point": t["user_entry_point"], "framework_params": t.additional_framework_parameters,
            "resource_config": t["resource_config"], "input_data_config": t["input_data_config"],
            "output_data_dir": t["output_data_dir"], "channels": sorted(t["channel_input_dirs"].keys()),
            "current_host": t["current_host"], "current_instance_type": t["current_instance_type"],
            "current_instance_group": t["current_instance_group"],
            "current_instance_group_hosts": t["current_instance_group_hosts"], "instance_groups": t["instance_groups"],
            "instance_groups_dict": t["instance_groups_dict"],
            "distribution_instance_groups": t["distribution_instance_groups"], "is_hetero": t["is_hetero"],
            "module_name": t.module_name, "log_level": t["log_level"], "framework_module": t["framework_module"],
            "input_dir": t["input_dir"], "input_config_dir": t["input_config_dir"], "output_dir": t["output_dir"],
            "num_cpus": t["num_cpus"], "num_gpus": t["num_gpus"], "num_neurons": t["num_neurons"],
            "model_dir": t["model_dir"], "module_dir": t["module_dir"], "training_env": dict(self),
            "user_args": mapping_to_cmd_args(t["hyperparameters"]),
            "output_intermediate_dir": t["output_intermediate_dir"],
        }  # fmt: skip
        if t["topology"]:
            env["topology"] = t["topology"]
        for name, path in t["channel_input_dirs"].items():
            env[f"channel_{name}"] = path
        for key, value in t["hyperparameters"].items():
            env[f"hp_{key}"] = value
        return mapping_to_env_vars(env)


def toolkit_would_export(node_root: Path, environ: dict[str, str], gpus: int = 0) -> dict[str, str]:
    """What the script gets in a framework container whose /opt/ml is `node_root`: to_env_vars() and the three
    variables __init__ writes to os.environ (trainer.train -> entry_point.run -> environment.write_env_vars)."""
    process = dict(environ)
    env = ToolkitEnvironment(node_root, process, gpus=gpus, cpus=os.cpu_count() or 1, neurons=0)
    return {**env.to_env_vars(), **{k: process[k] for k in ("SAGEMAKER_JOB_NAME", "CURRENT_HOST", "SAGEMAKER_REGION")}}


# The SDK v2 local mode's keys (cloudddp.sagemaker local_mode.container_hyperparameters) and the user's.
DROPIN_HYPERPARAMETERS = {
    "epochs": 3, "lr": 0.01, "layers": [64, 32], "opts": {"b": 1, "a": "x"}, "augment": True, "s": "text",
    "sagemaker_submit_directory": "/home/me/project/src", "sagemaker_program": "train.py",
    "sagemaker_container_log_level": 20, "sagemaker_job_name": "sdk-name", "sagemaker_region": "eu-west-1",
    "sagemaker_torch_distributed_enabled": True, "sagemaker_instance_type": "local",
}  # fmt: skip
USER_HYPERPARAMETERS = {k: v for k, v in DROPIN_HYPERPARAMETERS.items() if not k.startswith("sagemaker_")}


# What the emulation reads from the environment its nodes inherit (this process's, by default).
READ = ("PATH", "CUDA_VISIBLE_DEVICES", "SM_NUM_GPUS", "SM_NUM_NEURONS", "AWS_DEFAULT_REGION", "SAGEMAKER_PROGRAM",
        "SAGEMAKER_TRAINING_MODULE", "SM_HP_MP_PARAMETERS", "TRAINING_JOB_NAME")  # fmt: skip


def two_nodes(tmp_path: Path, environ: Mapping[str, str], **hyperparameters: Any) -> list[EmulatedNode]:
    """A 2-node emulated cluster as the local provider lays it out, this process's environment being `environ`."""
    cluster = EmulatedCluster(nodes=2, job_name="rt-job", run_dir=tmp_path, channels=("train", "my-val"),
                              hyperparameters=hyperparameters or DROPIN_HYPERPARAMETERS)  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        for name in READ:
            patch.delenv(name, raising=False)
        for name, value in environ.items():
            patch.setenv(name, value)
        nodes = sagemaker.emulate(cluster)
    for node in nodes:
        node.write_files()
    return nodes


@pytest.fixture(autouse=True)
def gpu_device_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This machine has no /dev/nvidia*: the tests' machine gets device nodes of its own (files), so that the
    fake nvidia-smi below is asked, as on a machine with GPUs."""
    devices = tmp_path / "dev"
    devices.mkdir()
    (devices / "nvidia0").touch()
    monkeypatch.setattr(sagemaker_toolkit_env, "GPU_DEVICES", str(devices / "nvidia[0-9]*"))
    return devices


def fake_nvidia_smi(folder: Path, output: str, code: int = 0, delay: float = 0) -> str:
    """A PATH with an nvidia-smi printing `output` (and counting its calls in folder/calls); `exec sleep` stands
    for a hung driver (exec: the timeout's kill reaches the sleeper itself)."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / "nvidia-smi"
    hang = f"exec sleep {delay}\n" if delay else ""
    tool.write_text(f"#!/bin/sh\necho x >> '{folder}/calls'\n{hang}printf '%s' '{output}'\nexit {code}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return str(folder)


def calls(folder: Path) -> int:
    return len((folder / "calls").read_text().splitlines()) if (folder / "calls").exists() else 0


# -- the emulation, read back


def test_two_emulated_nodes_get_exactly_what_the_toolkit_exports_and_plan_agrees(tmp_path: Path) -> None:
    environ = {"PATH": "", "AWS_DEFAULT_REGION": "us-east-2"}
    nodes = two_nodes(tmp_path, environ)
    plans = [sagemaker.plan(node.env, DetectOptions()) for node in nodes]
    for node, plan in zip(nodes, plans, strict=True):
        container = {**environ, "TRAINING_JOB_NAME": "rt-job"}  # the node's processes inherit both
        assert {k: v for k, v in node.env.items() if k != "TRAINING_JOB_NAME"} == toolkit_would_export(
            node.root, container
        )
        training = json.loads(node.env["SM_TRAINING_ENV"])
        assert set(training) == TOOLKIT_PROPERTIES
        assert training["hosts"] == plan.hosts == ["algo-1", "algo-2"]
        assert training["current_host"] == node.name == (plan.hosts or [])[plan.node_rank]
        assert training["master_hostname"] == plan.master_addr == "algo-1"
        assert training["is_master"] is (plan.node_rank == 0)
        assert training["distribution_hosts"] == plan.hosts  # sagemaker_torch_distributed_enabled: every host
        assert training["channel_input_dirs"] == {c: str(p) for c, p in node.channels.items()}
        assert training["hyperparameters"] == USER_HYPERPARAMETERS == json.loads(node.env["SM_HPS"])
        assert training["additional_framework_parameters"] == {
            "sagemaker_torch_distributed_enabled": True, "sagemaker_instance_type": "local"}  # fmt: skip
        assert (training["module_name"], training["user_entry_point"]) == ("train", "train.py")
        assert training["module_dir"] == node.env["SM_MODULE_DIR"] == "/home/me/project/src"
        assert training["num_gpus"] == 0 and node.env["SM_NUM_GPUS"] == "0"  # no nvidia-smi on that PATH
        assert training["job_name"] == "rt-job" and training["log_level"] == 20
        assert training["model_dir"] == str(node.model_dir) == node.env["SM_MODEL_DIR"]
        assert json.loads(node.env["SM_RESOURCE_CONFIG"]) == training["resource_config"]
        assert node.env["SM_CURRENT_INSTANCE_GROUP"] == "homogeneousCluster" and node.env["SM_IS_HETERO"] == "false"
        assert node.env["SM_CHANNEL_MY-VAL"] == str(node.channels["my-val"])  # the toolkit upper-cases, no more
        # What Environment.__init__ writes to os.environ: the SDK's job name replaced by this job's, its region.
        assert (node.env["SAGEMAKER_JOB_NAME"], node.env["SAGEMAKER_REGION"]) == ("rt-job", "eu-west-1")
    assert [p.node_rank for p in plans] == [0, 1]


def test_a_job_without_the_sdks_keys_gets_the_toolkits_defaults(tmp_path: Path) -> None:
    """`cloudddp launch -p local --emulate sagemaker`: no sagemaker_* hyperparameters. The toolkit then names the
    module "None" (str(None)), no entry point, module_dir its code folder, no distribution groups, and the region
    boto3 finds (AWS_DEFAULT_REGION)."""
    environ = {"PATH": "", "AWS_DEFAULT_REGION": "us-east-2"}
    nodes = two_nodes(tmp_path, environ, epochs=2)
    for node in nodes:
        assert {k: v for k, v in node.env.items() if k != "TRAINING_JOB_NAME"} == toolkit_would_export(
            node.root, {**environ, "TRAINING_JOB_NAME": "rt-job"}
        )
        training = json.loads(node.env["SM_TRAINING_ENV"])
        assert (training["module_name"], training["user_entry_point"]) == ("None", None)
        assert training["module_dir"] == str(node.root / "code") and training["distribution_instance_groups"] == []
        assert training["master_hostname"] == "algo-1" and training["hyperparameters"] == {"epochs": 2}
        assert (node.env["SM_USER_ENTRY_POINT"], node.env["SM_FRAMEWORK_MODULE"]) == ("", "")
        assert (node.env["SAGEMAKER_JOB_NAME"], node.env["SAGEMAKER_REGION"]) == ("", "us-east-2")


def test_the_process_environment_counts_as_the_toolkit_reads_it(tmp_path: Path) -> None:
    environ = {"PATH": "", "SAGEMAKER_PROGRAM": "entry.py", "SAGEMAKER_TRAINING_MODULE": "pkg.training:main",
               "SM_HP_MP_PARAMETERS": '{"partitions":2}'}  # fmt: skip
    (node, _) = two_nodes(tmp_path, environ)
    assert {k: v for k, v in node.env.items() if k != "TRAINING_JOB_NAME"} == toolkit_would_export(
        node.root, {**environ, "TRAINING_JOB_NAME": "rt-job"}
    )
    training = json.loads(node.env["SM_TRAINING_ENV"])
    assert (training["module_name"], training["user_entry_point"]) == ("entry", "entry.py")
    assert training["framework_module"] == node.env["SM_FRAMEWORK_MODULE"] == "pkg.training:main"
    assert training["is_modelparallel_enabled"] is True


# -- SM_NUM_GPUS: this machine's GPUs, as the toolkit counts them


GPUS = "GPU 0: NVIDIA H100 (UUID: GPU-1)\n  MIG 1g.10gb Device 0: (UUID: MIG-1)\nGPU 1: NVIDIA H100 (UUID: GPU-2)\n"


@pytest.mark.process
def test_the_emulation_counts_this_machines_gpus_once_as_the_toolkit_does(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    environ = {"PATH": fake_nvidia_smi(bin_dir, GPUS)}
    nodes = two_nodes(tmp_path / "run", environ)
    assert calls(bin_dir) == 1, "nvidia-smi runs once per emulated cluster, not once per node"
    for node in nodes:
        assert node.env["SM_NUM_GPUS"] == "2" and json.loads(node.env["SM_TRAINING_ENV"])["num_gpus"] == 2
        assert {k: v for k, v in node.env.items() if k != "TRAINING_JOB_NAME"} == toolkit_would_export(
            node.root, {**environ, "TRAINING_JOB_NAME": "rt-job"}, gpus=2
        )
        assert sagemaker.plan(node.env, DetectOptions()).nproc_per_node == 2  # one process per GPU, as before


@pytest.mark.process
@pytest.mark.parametrize(
    ("extra", "expected", "runs"),
    [
        ({"CUDA_VISIBLE_DEVICES": "1"}, "1", 1),  # the processes see only that one
        ({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, "2", 1),  # never more than nvidia-smi lists
        ({"CUDA_VISIBLE_DEVICES": ""}, "0", 0),  # none visible: nvidia-smi is not asked
        ({"SM_NUM_GPUS": "0"}, "0", 0),  # the caller's pin
        ({"SM_NUM_GPUS": "4"}, "4", 0),
    ],
)
def test_visible_devices_and_the_callers_pin_win(
    tmp_path: Path, extra: dict[str, str], expected: str, runs: int
) -> None:
    bin_dir = tmp_path / "bin"
    (node, _) = two_nodes(tmp_path / "run", {"PATH": fake_nvidia_smi(bin_dir, GPUS), **extra})
    assert node.env["SM_NUM_GPUS"] == expected and json.loads(node.env["SM_TRAINING_ENV"])["num_gpus"] == int(expected)
    assert calls(bin_dir) == runs


@pytest.mark.process
def test_no_usable_nvidia_smi_means_no_gpus(tmp_path: Path) -> None:
    failing = fake_nvidia_smi(tmp_path / "bin", "NVIDIA-SMI has failed", code=9)
    assert two_nodes(tmp_path / "a", {"PATH": failing})[0].env["SM_NUM_GPUS"] == "0"
    assert two_nodes(tmp_path / "b", {"PATH": str(tmp_path / "empty")})[0].env["SM_NUM_GPUS"] == "0"


def test_a_machine_without_gpu_device_nodes_never_runs_nvidia_smi(tmp_path: Path, gpu_device_nodes: Path) -> None:
    # Before: every local launch (--dry-run too) and every bring-your-own node's start ran nvidia-smi.
    (gpu_device_nodes / "nvidia0").unlink()
    bin_dir = tmp_path / "bin"
    assert two_nodes(tmp_path / "run", {"PATH": fake_nvidia_smi(bin_dir, GPUS)})[0].env["SM_NUM_GPUS"] == "0"
    assert calls(bin_dir) == 0


@pytest.mark.process
def test_a_hung_nvidia_smi_costs_a_bounded_wait_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a 30 s silent stall (the toolkit itself waits forever).
    monkeypatch.setattr(sagemaker_toolkit_env, "NVIDIA_SMI_SECONDS", 0.5)
    hung = fake_nvidia_smi(tmp_path / "bin", GPUS, delay=60)
    assert sagemaker_toolkit_env.gpu_count({"PATH": hung}) == 0
    assert "`nvidia-smi --list-gpus` did not answer within 0.5 s; SM_NUM_GPUS=0" in capsys.readouterr().err


def test_an_environment_given_is_read_instead_of_this_processes(tmp_path: Path) -> None:
    cluster = EmulatedCluster(nodes=1, job_name="j", run_dir=tmp_path / "run")
    (node,) = sagemaker.emulate(cluster, {"PATH": fake_nvidia_smi(tmp_path / "bin", GPUS), "SM_NUM_GPUS": "3"})
    assert node.env["SM_NUM_GPUS"] == "3" and calls(tmp_path / "bin") == 0


# -- bring-your-own images: the same variables from the config files


def test_bring_your_own_images_get_the_toolkits_variables_from_the_files(tmp_path: Path) -> None:
    """A heterogeneous job as the SDK submits it (fixtures/sagemaker_upstream.py): the data host too gets the
    toolkit's view, master and distribution groups included."""
    for host in ("algo-1", "algo-2"):
        root = tmp_path / host
        config = root / "input" / "config"
        config.mkdir(parents=True)
        (config / "resourceconfig.json").write_text(json.dumps(hetero_resource_config(host)))
        (config / "inputdataconfig.json").write_text(json.dumps({"train": {"TrainingInputMode": "File"}}))
        (config / "hyperparameters.json").write_text(json.dumps(HETERO_HYPERPARAMETERS))
        environ = {"SM_INPUT_CONFIG_DIR": str(config), "PATH": "", "TRAINING_JOB_NAME": "byo-job"}
        derived = sagemaker.framework_environment(environ)
        expected = toolkit_would_export(root, environ)
        assert {k: derived.get(k, environ.get(k)) for k in expected} == expected  # set ones: left
        training = json.loads(derived["SM_TRAINING_ENV"])
        assert training["master_hostname"] == "algo-2" and training["is_hetero"] is True
        assert training["distribution_hosts"] == ["algo-2", "algo-3"] and training["job_name"] == "byo-job"
        assert derived["SM_DISTRIBUTION_INSTANCE_GROUPS"] == '["train"]' and derived["SM_MODULE_NAME"] == "train"


@pytest.mark.process
def test_bring_your_own_images_leave_set_variables_alone_and_skip_the_counting_where_the_toolkit_ran(
    tmp_path: Path,
) -> None:
    (node, _) = two_nodes(tmp_path / "run", {"PATH": ""})
    bin_dir = tmp_path / "bin"
    config = {"SM_INPUT_CONFIG_DIR": node.env["SM_INPUT_CONFIG_DIR"], "PATH": fake_nvidia_smi(bin_dir, GPUS)}
    assert sagemaker.framework_environment({**node.env, **config}) == {}  # a framework container: all set
    assert calls(bin_dir) == 0
    derived = sagemaker.framework_environment({**config, "SM_NUM_GPUS": "8", "SM_MODULE_DIR": "/mine"})
    assert "SM_NUM_GPUS" not in derived and "SM_MODULE_DIR" not in derived
    assert json.loads(derived["SM_TRAINING_ENV"])["num_gpus"] == 8 and calls(bin_dir) == 0
    assert sagemaker.framework_environment(config)["SM_NUM_GPUS"] == "2" and calls(bin_dir) == 1


# -- a real run: the script reads SM_TRAINING_ENV

SCRIPT = """\
import json, os
env = json.loads(os.environ["SM_TRAINING_ENV"])
report = {"hosts": env["hosts"], "current_host": env["current_host"], "hps": env["hyperparameters"],
          "channels": env["channel_input_dirs"], "num_gpus": env["num_gpus"], "SM_NUM_GPUS": os.environ["SM_NUM_GPUS"],
          "master": env["master_hostname"], "rank": os.environ["RANK"]}
with open(os.path.join(os.environ["SM_MODEL_DIR"], "env-rank" + os.environ["RANK"] + ".json"), "w") as f:
    json.dump(report, f)
"""


@pytest.mark.slow
def test_a_local_sagemaker_run_can_read_its_training_environment(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "read_env.py").write_text(SCRIPT)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "part-0.csv").write_text("1,2\n")
    result = run_cli("launch", "-p", "local", "--emulate", "sagemaker", "--nodes", "2", "--runs-dir",
                     str(tmp_path / "runs"), "-i", f"train={tmp_path / 'data'}", "-H", "epochs=4", "-H", "lr=0.5",
                     "--source-dir", str(source), "read_env.py", timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    reports = sorted((tmp_path / "runs").glob("*/nodes/*/model/env-rank*.json"))
    assert len(reports) == 2, result.stdout[-3000:]
    seen = [json.loads(path.read_text()) for path in reports]
    for report in seen:
        assert report["hosts"] == ["algo-1", "algo-2"] and report["master"] == "algo-1"
        assert report["hps"] == {"epochs": "4", "lr": "0.5"}  # -H keeps text, as hyperparameters.json holds it
        assert list(report["channels"]) == ["train"]
        assert str(report["num_gpus"]) == report["SM_NUM_GPUS"]
    assert sorted(r["current_host"] for r in seen) == ["algo-1", "algo-2"]
