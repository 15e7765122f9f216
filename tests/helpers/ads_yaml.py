"""Oracle ADS `opctl` train.yaml texts, as the tests write them (the shape of the ADS guide's example train.yaml)."""

from __future__ import annotations

from textwrap import indent


def ads_yaml(
    *,
    project: str,
    compartment: str,
    display_name: str,
    infrastructure: str,
    cluster: str,
    runtime: str,
    name: str | None = None,
) -> str:
    """A `kind: distributed` train.yaml: `infrastructure`, `cluster` and `runtime` are the lines of each section's
    `spec` after what every copy sets (written unindented, each line ending in a newline); `name` is spec.name."""
    return (
        "kind: distributed\napiVersion: v1.0\nspec:\n"
        + (f"  name: {name}\n" if name is not None else "")
        + "  infrastructure:\n    kind: infrastructure\n    type: dataScienceJob\n    apiVersion: v1.0\n    spec:\n"
        + f"      projectId: {project}\n      compartmentId: {compartment}\n      displayName: {display_name}\n"
        + indent(infrastructure, " " * 6)
        + "  cluster:\n    kind: PYTORCH\n    apiVersion: v1.0\n    spec:\n"
        + indent(cluster, " " * 6)
        + "  runtime:\n    kind: python\n    apiVersion: v1.0\n    spec:\n"
        + indent(runtime, " " * 6)
    )


def guide_ads_yaml(
    *, project: str, compartment: str, log_group: str, subnet: str, image: str, env: dict[str, str], runtime: str
) -> str:
    """The ADS guide's example train.yaml (PyTorch-Distributed, one main and two workers on VM.GPU2.1) with these
    OCIDs, image, cluster environment (values single-quoted) and runtime spec lines."""
    variables = "".join(f"    - name: {key}\n      value: '{value}'\n" for key, value in env.items())
    return ads_yaml(
        name="PyTorch-Distributed",
        project=project,
        compartment=compartment,
        display_name="my_distributed_training",
        infrastructure=f"logGroupId: {log_group}\nsubnetId: {subnet}\nshapeName: VM.GPU2.1\nblockStorageSize: 50\n",
        cluster=(
            f'image: {image}\nworkDir: "oci://my-bucket@my-namespace/path/to/dir/"\nconfig:\n  env:\n{variables}'
            "main:\n  name: PyTorch-Distributed-main\n  replicas: 1\n"
            "worker:\n  name: PyTorch-Distributed-worker\n  replicas: 2\n"
        ),
        runtime=runtime,
    )
