"""A node with some of a platform's variables and not the rest: exit 2, one paragraph naming a missing variable,
never a one-node standalone run (cloudddp/cluster/claims.py, the one rule for every platform).

TABLE below is each platform's contracts as upstream writes them, and the test checks that every module in
cloudddp.cluster declares exactly these (`CLAIMS`); the table test then runs `cloudddp-launch --dry-run` (its
main(), in process) on every proper subset of every contract's variables. Sources:

- sagemaker: aws/sagemaker-training-toolkit @ 33839372faf8017edb7dafc6290c1ef63557b404,
  src/sagemaker_training/environment.py (framework containers export SM_HOSTS and SM_CURRENT_HOST together;
  bring-your-own images get resourceconfig.json instead).
- oci: oracle/accelerated-data-science @ 0e785b9fd36fb354019e0924b94ac2b0ec6f235a:
  native multi-node, ads/jobs/templates/driver_pytorch.py Runner.__init__ (NODE_RANK, INITIAL_CLUSTER_SIZE else
  NODE_COUNT, CLUSTER_NODES_METADATA_FILE); ADS's multi-run jobs, ads/jobs/builders/runtimes/base.py
  MultiNodeRuntime.run (every run NODE_RANK=i and NODE_COUNT=N; every run after the first MAIN_JOB_RUN_OCID, the
  first run's OCID: the first run has no MAIN_JOB_RUN_OCID, which is how driver_pytorch.py knows it is the host);
  `ads opctl` clusters, ads/opctl/distributed/common/cluster_config_helper.py (OCI__WORKER_COUNT on every node,
  OCI__MODE per run).
- kubeflow: tests/cluster/fixtures/kubeflow_upstream.py (training-operator 078ec30f..., trainer 8c0f5059...).
- awsbatch: https://docs.aws.amazon.com/batch/latest/userguide/mnp-env-vars.html (no source is public).
- skypilot: skypilot-org/skypilot @ 75ae2b426cf43ccbd66dd4f87db96e0c5ff2588c, sky/skylet/executor/slurm.py main()
  (SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES and SKYPILOT_NODE_IPS set together for every run).
- slurm: SchedMD/slurm @ 284c3b95f08a2dc2478499837b03355e1b9c5c75, src/common/env.c (and the captured
  tests/cluster/fixtures/slurm/*.env).
- pbs: openpbs/openpbs @ cd7ab5edaf03dcac2f1cb9e2f42d75eb117d468a, src/resmom/start_exec.c (PBS_JOBID and
  PBS_NODEFILE; a job whose node file cannot be written does not start).
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import clean_env

from cloudddp.cluster import ENVIRONMENTS, DetectOptions, detect_provider, oci, resolve_plan, standalone
from cloudddp.errors import CloudDDPError
from cloudddp.launcher import cli


@dataclass(frozen=True)
class Contract:
    platform: str
    needs: tuple[str, ...]  # all set on every node of a multi-node job
    markers: tuple[str, ...]  # names only this platform sets: one of them claims the node
    stand_ins: dict[str, tuple[str, ...]] = field(default_factory=dict)  # another name that supplies a need


TABLE = [
    Contract("sagemaker", ("SM_HOSTS", "SM_CURRENT_HOST"), ("SM_HOSTS", "SM_CURRENT_HOST")),
    Contract("oci", ("NODE_RANK", "INITIAL_CLUSTER_SIZE", "CLUSTER_NODES_METADATA_FILE"),
             ("INITIAL_CLUSTER_SIZE", "CLUSTER_NODES_METADATA_FILE"), {"INITIAL_CLUSTER_SIZE": ("NODE_COUNT",)}),
    Contract("oci", ("NODE_RANK", "NODE_COUNT"), ("NODE_COUNT", "MAIN_JOB_RUN_OCID")),
    Contract("oci", ("OCI__MODE", "OCI__WORKER_COUNT"), ("OCI__MODE", "OCI__WORKER_COUNT"),
             {"OCI__WORKER_COUNT": ("INITIAL_CLUSTER_SIZE", "NODE_COUNT")}),
    Contract("kubeflow", ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR"),
             ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR"),
             {"PET_NNODES": ("WORLD_SIZE",), "PET_NODE_RANK": ("RANK",), "PET_MASTER_ADDR": ("MASTER_ADDR",)}),
    Contract("kubeflow", ("PET_NNODES", "PET_RDZV_ENDPOINT"), ("PET_NNODES", "PET_RDZV_ENDPOINT")),
    Contract("awsbatch", ("AWS_BATCH_JOB_NODE_INDEX", "AWS_BATCH_JOB_NUM_NODES", "AWS_BATCH_JOB_MAIN_NODE_INDEX"),
             ("AWS_BATCH_JOB_NODE_INDEX", "AWS_BATCH_JOB_NUM_NODES", "AWS_BATCH_JOB_MAIN_NODE_INDEX")),
    Contract("skypilot", ("SKYPILOT_NODE_RANK", "SKYPILOT_NODE_IPS"),
             ("SKYPILOT_NODE_RANK", "SKYPILOT_NODE_IPS", "SKYPILOT_NUM_NODES")),
    Contract("slurm", ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"),
             ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"),
             {"SLURM_JOB_NODELIST": ("SLURM_STEP_NODELIST", "SLURM_NODELIST")}),
    Contract("pbs", ("PBS_JOBID", "PBS_NODEFILE"), ("PBS_JOBID", "PBS_NODEFILE")),
]  # fmt: skip

# Node 1 of a 2-node job, each value as its platform writes it ({tmp}: the test's folder).
VALUES = {
    "SM_HOSTS": '["algo-1","algo-2"]', "SM_CURRENT_HOST": "algo-2",
    "NODE_RANK": "1", "INITIAL_CLUSTER_SIZE": "2", "CLUSTER_NODES_METADATA_FILE": "{tmp}/cluster.json",
    "NODE_COUNT": "2", "MAIN_JOB_RUN_OCID": "ocid1.datasciencejobrun.oc1.iad.amaaaaaarun0",
    "OCI__MODE": "WORKER", "OCI__WORKER_COUNT": "1",
    "PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "job-master-0", "PET_RDZV_ENDPOINT": "job-worker-0:23456",
    "AWS_BATCH_JOB_NODE_INDEX": "1", "AWS_BATCH_JOB_NUM_NODES": "2", "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
    "SKYPILOT_NODE_RANK": "1", "SKYPILOT_NODE_IPS": "10.0.0.4\n10.0.0.5", "SKYPILOT_NUM_NODES": "2",
    "SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODELIST": "n[1-2]",
    "PBS_JOBID": "4567.pbs-server", "PBS_NODEFILE": "{tmp}/nodes",
}  # fmt: skip


def subsets(contract: Contract) -> list[tuple[str, ...]]:
    names = tuple(dict.fromkeys((*contract.needs, *contract.markers)))
    return [s for size in range(1, len(names)) for s in itertools.combinations(names, size)]


CASES = [
    pytest.param(contract, subset, id=f"{contract.platform}-{'+'.join(subset)}")
    for contract in TABLE
    for subset in subsets(contract)
]


def launch(env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`cloudddp-launch --dry-run train.py` in this process with exactly `env` (plus the test process's own
    non-platform variables): (exit code, stdout, stderr)."""
    script = tmp_path / "train.py"
    script.write_text("print('hello')\n")
    target = clean_env({"SM_INPUT_CONFIG_DIR": str(tmp_path / "no-sagemaker-here"), **env})
    for name in list(os.environ):
        if name not in target:
            monkeypatch.delenv(name)
    for name, value in target.items():
        monkeypatch.setenv(name, value)
    code = cli.main(["--dry-run", str(script)])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_paragraph_naming(code: int, err: str, names: list[str]) -> str:
    assert code == 2, err
    assert "Traceback" not in err
    message = err.strip()
    assert message.startswith("cloudddp-launch: error: ") and "\n" not in message, message
    assert any(f"{name} is not set" in message or f"{name} and " in message or f"{name} (or" in message
               for name in names), f"none of {names} named as missing in {message!r}"  # fmt: skip
    return message


def test_every_platform_module_declares_its_contracts_as_upstream_writes_them() -> None:
    declared = [
        Contract(module.NAME, claim.needs, claim.claimed_by, dict(claim.stand_ins))
        for module in ENVIRONMENTS
        for claim in module.CLAIMS
    ]
    assert declared == TABLE


@pytest.mark.parametrize(("contract", "subset"), CASES)
def test_a_partial_platform_environment_is_refused_never_a_one_node_run(
    contract: Contract, subset: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    (tmp_path / "nodes").write_text("n1\nn2\n")
    (tmp_path / "cluster.json").write_text(
        '[{"Rank": 0, "IPAddress": "10.0.0.5"}, {"Rank": 1, "IPAddress": "10.0.0.6"}]'
    )
    env = {name: VALUES[name].replace("{tmp}", str(tmp_path)) for name in subset}
    missing = [n for n in contract.needs if not any(s in subset for s in (n, *contract.stand_ins.get(n, ())))]
    code, out, err = launch(env, tmp_path, monkeypatch, capsys)
    if not set(subset) & set(contract.markers):
        # Generic names alone (NODE_RANK) claim nothing: nothing of this platform is set.
        assert code == 0, err
        assert json.loads(out)["provider"] == "standalone"
    elif missing:
        message = assert_one_paragraph_naming(code, err, missing)
        assert f"{contract.platform}: " in message
    elif code == 0:  # every need set, only another marker absent: this platform's two nodes
        plan = json.loads(out)
        assert (plan["provider"], plan["nnodes"], plan["node_rank"]) == (contract.platform, 2, 1)
    else:  # the platform's own rule for these values (ADS's multi-run job without MASTER_ADDR, a Slurm batch script)
        assert code == 2 and "Traceback" not in err and "\n" not in err.strip(), err


# ---------------------------------------------------------------- the two cases the checks found


def ads_multi_run_node(rank: int, count: int) -> dict[str, str]:
    """One job run of ADS's multi-run job (base.py MultiNodeRuntime.run at the commit above), with the variables the
    OCI service gives every job run (JOB_OCID shared, JOB_RUN_OCID its own; driver_pytorch.py reads both)."""
    env = {
        "NODE_RANK": str(rank),
        "NODE_COUNT": str(count),
        "JOB_OCID": "ocid1.datasciencejob.oc1.iad.amaaaaaajob",
        "JOB_RUN_OCID": f"ocid1.datasciencejobrun.oc1.iad.amaaaaaarun{rank}",
        "OCI__LAUNCH_CMD": "torchrun train.py",
    }
    if rank > 0:
        env["MAIN_JOB_RUN_OCID"] = "ocid1.datasciencejobrun.oc1.iad.amaaaaaarun0"
    return env


def test_an_ads_multi_run_node_without_master_addr_names_the_missing_main_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: standalone, node 0 of 1, exit 0 on every run: each trained alone. A worker run now searches the main
    run's log first, as ADS's runner does (test_ads_multi_run_finds_the_main_run_through_logging.py, which also
    covers the main run); here its OCI config file is missing, so the search cannot start."""
    env = {**ads_multi_run_node(1, 2), "OCI_CONFIG_LOCATION": str(tmp_path / "no-oci-config")}
    code, _, err = launch(env, tmp_path, monkeypatch, capsys)
    message = assert_one_paragraph_naming(code, err, ["MASTER_ADDR"])
    assert "main node's address" in message and "MASTER_ADDR supplies" in message
    assert "OCI Logging" in message  # what ADS's own runner does instead


def test_an_ads_multi_run_job_with_master_addr_is_one_cluster() -> None:
    plans = [resolve_plan({**ads_multi_run_node(r, 3), "MASTER_ADDR": "10.0.0.5"}, None, DetectOptions()) for r in (0, 1, 2)]  # fmt: skip
    assert [(p.provider, p.nnodes, p.node_rank) for p in plans] == [("oci", 3, 0), ("oci", 3, 1), ("oci", 3, 2)]
    assert {(p.master_addr, p.master_port) for p in plans} == {("10.0.0.5", oci.MASTER_PORT)}  # ADS: RDZV_PORT 29400
    assert {p.rdzv_id for p in plans} == {"ocid1.datasciencejobrun.oc1.iad.amaaaaaarun0"}  # the main run's OCID


def test_an_ads_job_of_one_run_is_one_node_without_an_address() -> None:
    plan = resolve_plan(ads_multi_run_node(0, 1), None, DetectOptions())
    assert (plan.provider, plan.nnodes, plan.master_addr) == ("oci", 1, "127.0.0.1")


def test_a_skypilot_node_without_its_node_ips_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: rank 1 of 2 planned itself standalone, node 0 of 1, exit 0."""
    env = {"SKYPILOT_NODE_RANK": "1", "SKYPILOT_NUM_NODES": "2", "SKYPILOT_NUM_GPUS_PER_NODE": "0"}
    code, _, err = launch(env, tmp_path, monkeypatch, capsys)
    assert_one_paragraph_naming(code, err, ["SKYPILOT_NODE_IPS"])


def test_a_partial_environment_is_the_platforms_node_not_a_standalone_one() -> None:
    env = {"PBS_JOBID": "4567.pbs-server"}
    assert detect_provider(env).NAME == "pbs"
    with pytest.raises(CloudDDPError, match="PBS_NODEFILE is not set"):
        resolve_plan(env, None, DetectOptions())
    assert detect_provider({"NODE_RANK": "1"}) is standalone  # a generic name alone claims nothing
    assert resolve_plan(env, "standalone", DetectOptions()).nnodes == 1  # the way out the message names
