"""ADS train.yaml findings: the environment's precedence as ADS applies it, and a `logId` without `logGroupId`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import cli
from helpers.ads_yaml import ads_yaml
from helpers.oci_loopback_server import COMPARTMENT, IMAGE, LOG, PROJECT

from cloudddp.errors import CloudDDPError
from cloudddp.job_spec import load_spec
from cloudddp.providers.oci.provider import OCIProvider

# One variable set at every level ADS reads. What ADS does with them, from oracle/accelerated-data-science at
# 0e785b9fd36fb354019e0924b94ac2b0ec6f235a:
# - ads/opctl/distributed/common/cluster_config_helper.py, ClusterConfigToJobSpecConverter.job_def_info: the job
#   definition's envVars are cluster.spec.config.env, then `job["envVars"].update(self.cluster_info.runtime.envVars)`
#   (runtime.spec.env wins over the cluster's); job_run_info: each job run's envVars are its role's config.env.
# - ads/opctl/backend/ads_ml_job.py, MLJobDistributedBackend.run: `job.run(conf["name"], env_var=conf["envVars"])`,
#   and its docstring: "The Job Run will have overrides provided by the user under
#   cluster/spec/{main|worker}/config section": main/worker win over both.
PRECEDENCE_YAML = ads_yaml(
    project=PROJECT,
    compartment=COMPARTMENT,
    display_name="precedence",
    infrastructure="shapeName: VM.Standard.E4.Flex\nblockStorageSize: 50\n",
    cluster=f"""\
image: {IMAGE}
workDir: oci://bkt@ns/cloudddp
config:
  env:
    - name: EVERYWHERE
      value: from-cluster
    - name: CLUSTER_AND_RUNTIME
      value: from-cluster
main:
  replicas: 1
  config:
    env:
      - name: EVERYWHERE
        value: from-role
worker:
  replicas: 1
  config:
    env:
      - name: EVERYWHERE
        value: from-role
""",
    runtime="""\
entryPoint: train.py
env:
  - name: EVERYWHERE
    value: from-runtime
  - name: CLUSTER_AND_RUNTIME
    value: from-runtime
""",
)


def write_ads(tmp_path: Path, text: str) -> Path:
    (tmp_path / "train.py").write_text("print('training')\n")
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return path


def node_environment(spec_path: Path) -> dict[str, str]:
    parts = OCIProvider(environ={}).render(load_spec(spec_path)).parts
    (group,) = parts.create_job.job_node_configuration_details.job_node_group_configuration_details_list
    return group.job_configuration_details.environment_variables


def test_main_and_worker_env_win_over_runtime_env_which_wins_over_the_clusters_as_in_ads(tmp_path: Path) -> None:
    env = node_environment(write_ads(tmp_path, PRECEDENCE_YAML))
    assert env["EVERYWHERE"] == "from-role"  # the job run's override, as ADS sends it
    assert env["CLUSTER_AND_RUNTIME"] == "from-runtime"  # the job definition: runtime updates the cluster's


def test_the_dry_run_shows_the_roles_value(tmp_path: Path) -> None:
    path = write_ads(tmp_path, PRECEDENCE_YAML)
    result = cli("launch", "-p", "oci", "-f", str(path), "--dry-run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = yaml.safe_load(result.stdout)
    group = document["request"]["create_job"]["job_node_configuration_details"]
    (node_group,) = group["job_node_group_configuration_details_list"]
    variables = node_group["job_configuration_details"]["environment_variables"]
    assert (variables["EVERYWHERE"], variables["CLUSTER_AND_RUNTIME"]) == ("from-role", "from-runtime")


LOG_ONLY_YAML = PRECEDENCE_YAML.replace(
    "      displayName: precedence\n", f"      displayName: precedence\n      logId: {LOG}\n"
)


def test_a_log_id_without_log_group_id_names_the_ads_fields_and_the_fix(tmp_path: Path) -> None:
    path = write_ads(tmp_path, LOG_ONLY_YAML)
    with pytest.raises(CloudDDPError) as caught:
        OCIProvider(environ={}).render(load_spec(path))
    message = str(caught.value)
    assert message.startswith(
        f"{path}: spec.infrastructure.spec.logId={LOG!r} is set without spec.infrastructure.spec.logGroupId."
    )
    assert "Add spec.infrastructure.spec.logGroupId: <the OCID of the log group that holds this log>" in message
    assert "oci.log_group_id" not in message and "\n" not in message


def test_a_log_id_without_log_group_id_from_the_cli_is_one_paragraph_exit_2(tmp_path: Path) -> None:
    path = write_ads(tmp_path, LOG_ONLY_YAML)
    result = cli("launch", "-p", "oci", "-f", str(path), "--dry-run", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "spec.infrastructure.spec.logId=" in result.stderr and "add" in result.stderr.lower()
    assert "Add spec.infrastructure.spec.logGroupId" in result.stderr
