"""From a `ClusterPlan` to the exact torchrun command line and its environment."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cloudddp.cluster.plan import NPROC_GPUS_OR_ONE, ClusterPlan

RDZV_CONF = ("--rdzv-conf=", "--rdzv_conf=")


@dataclass
class Target:
    """What each worker runs: a script path or a module, with its arguments."""

    program: str
    args: list[str] = field(default_factory=list)
    is_module: bool = False

    def python_argv(self) -> list[str]:
        return (["-m", self.program] if self.is_module else [self.program]) + self.args


def visible_gpu_count(environ: Mapping[str, str], dev_dir: str = "/dev") -> int:
    """GPUs this node may use, without importing torch (which costs seconds)."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        return len(entries)
    try:
        return sum(1 for name in os.listdir(dev_dir) if re.fullmatch(r"nvidia\d+", name))
    except OSError:
        return 0


def resolve_nproc(value: int | str, environ: Mapping[str, str]) -> int | str:
    """Our default ("gpus-or-1") becomes a number; torchrun's own words pass through."""
    if value == NPROC_GPUS_OR_ONE:
        return visible_gpu_count(environ) or 1
    return value


def local_process_count(nproc: int | str, environ: Mapping[str, str]) -> int:
    """How many workers will share this node's cores (for OMP_NUM_THREADS)."""
    if isinstance(nproc, int):
        return nproc
    if nproc == "cpu":
        return os.cpu_count() or 1
    return visible_gpu_count(environ) or (os.cpu_count() or 1 if nproc == "auto" else 1)


# torchrun's options in their underscore spelling: every torchrun takes it (torch 2.x keeps it as an alias for
# backward compatibility: pytorch/pytorch#65052), while the hyphenated one arrived with torch 2.0 and an older
# torchrun refuses it ("unrecognized arguments: --nproc-per-node=1", pytorch-image-models#1742): the SageMaker
# SDK's PyTorch 1.x images would fail at the first line.
def torchrun_argv(
    plan: ClusterPlan,
    target: Target,
    *,
    extra_args: Sequence[str] = (),
    rdzv_timeout: float | None = None,
    inherited_conf: str = "",
    python: str = sys.executable,
) -> list[str]:
    """The `python -m torch.distributed.run ...` command line for this node.

    `inherited_conf`: the environment's PET_RDZV_CONF (Kubeflow's operator sets it from elasticPolicy.rdzvConf).
    torchrun reads it only as the default of --rdzv-conf, which any --rdzv-conf given replaces
    (torch/distributed/argparse_util.py env), so it goes into the merged --rdzv-conf, below every other key."""
    argv = [
        python, "-m", "torch.distributed.run",
        f"--nnodes={plan.nnodes}",
        f"--nproc_per_node={plan.nproc_per_node}",
        f"--rdzv_backend={plan.rdzv_backend}",
        f"--rdzv_id={plan.rdzv_id}",
        f"--max_restarts={plan.max_restarts}",
    ]  # fmt: skip
    if plan.rdzv_backend == "static":
        argv += [
            f"--node_rank={plan.node_rank}",
            f"--master_addr={plan.master_addr}",
            f"--master_port={plan.master_port}",
        ]
    else:
        argv.append(f"--rdzv_endpoint={plan.endpoint}")
    if plan.local_addr:
        argv.append(f"--local_addr={plan.local_addr}")
    items = inherited_conf.split(",")
    if rdzv_timeout is not None:
        # The static handler reads "timeout"; the dynamic ones (c10d, etcd-v2) "join_timeout". Both take
        # whole seconds (int(...) in static_tcp_rendezvous.py, get_as_int in dynamic_rendezvous.py): round
        # a fraction up, so 0.5 s does not become 0. cli.py has refused values that are not positive and finite.
        seconds = math.ceil(rdzv_timeout)
        items.append(f"{'timeout' if plan.rdzv_backend == 'static' else 'join_timeout'}={seconds}")
    # torchrun keeps only its last --rdzv-conf: merge them all into one, a later key replacing an earlier one.
    items += [item for arg in extra_args if arg.startswith(RDZV_CONF) for item in arg.split("=", 1)[1].split(",")]
    conf: dict[str, str] = {}
    for item in filter(None, items):
        key = item.split("=", 1)[0]
        conf.pop(key, None)
        conf[key] = item
    if conf:
        argv.append(f"--rdzv_conf={','.join(conf.values())}")
    argv += [arg for arg in extra_args if not arg.startswith(RDZV_CONF)]
    if target.is_module:
        argv.append("--module")
    # Always a "--" before the script: without it torchrun's argparse takes a script named like an option for
    # one, swallows the script's own leading "--", and reads a script option that abbreviates one of torchrun's
    # as torchrun's (`train.py --log x`: "ambiguous option: --log could match --log-dir, ..."; argparse's prefix
    # matching reaches into training_script_args, a REMAINDER, torch/distributed/run.py). After it, the script
    # and every argument pass through as they are.
    argv.append("--")
    argv.append(target.program)
    return argv + target.args


def direct_argv(target: Target, python: str = sys.executable) -> list[str]:
    """Already under torchrun (TORCHELASTIC_RUN_ID set): run the script itself, no nesting."""
    return [python, *target.python_argv()]


def job_environment(plan: ClusterPlan, environ: Mapping[str, str], local_procs: int) -> dict[str, str]:
    """The workers' environment: the user's, plus sensible defaults only where unset."""
    env = dict(environ)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    # torchrun would force OMP_NUM_THREADS=1 (and warn); share the cores out instead.
    env.setdefault("OMP_NUM_THREADS", str(max(1, cores // max(1, local_procs))))
    if plan.network_interface:
        env.setdefault("NCCL_SOCKET_IFNAME", plan.network_interface)
        env.setdefault("GLOO_SOCKET_IFNAME", plan.network_interface)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if plan.rdzv_backend != "static":
        # torchrun shares its c10d rendezvous store with the workers by default, but each agent counts
        # restarts on its own, so after a node is lost the survivors' next worker group can read the
        # previous group's addresses (gloo: "Connection refused") or wait forever (pytorch/pytorch#135712).
        # torch's own opt-out: a fresh store per rendezvous round.
        env.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    env["CLOUDDDP_PROVIDER_DETECTED"] = plan.provider
    return env
