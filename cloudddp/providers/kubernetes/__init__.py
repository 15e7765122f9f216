"""Kubeflow on Kubernetes: PyTorchJob (training-operator v1) or Trainer v2 TrainJob, through the official
`kubernetes` client (see provider.py). Declares the provider only: the client is imported when it is used.
"""

from cloudddp.providers.kubernetes.settings import KubernetesSettings
from cloudddp.providers.registry import Option, ProviderInfo
from cloudddp.secrets_policy import ARGS, ENVIRONMENT, HYPERPARAMETERS, InClear

PROVIDER = ProviderInfo(
    name="kubernetes",
    summary="Kubeflow PyTorchJob or Trainer v2 TrainJob on Kubernetes (kubernetes client)",
    settings=KubernetesSettings,
    options=(
        Option("--kubeflow-api", "kubeflow_api", help="v1 (PyTorchJob, default) or trainer-v2 (TrainJob)"),
        Option(
            "--trainer-release",
            "trainer_release",
            help="trainer-v2: the cluster's Trainer: v2.2 (and later), v2.1, v2.0",
        ),
        Option("--image", "image", help="training image with cloudddp-launch and the code"),
        Option("--namespace", "namespace", help="default: the kubeconfig context's"),
        Option("--kube-context", "context", help="kubeconfig context (--context is cloudddp's own: config.yaml)"),
        Option("--kubeconfig", "kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"),
        Option("--gpus", "gpus", type=int, help="nvidia.com/gpu per node"),
        Option("--cpu", "cpu", help="CPU per node, e.g. 4 or 500m"),
        Option("--memory", "memory", help="memory per node, e.g. 16Gi"),
        Option("--node-selector", "node_selector", key_value=True, help="K=V (repeatable)"),
        Option("--image-pull-secret", "image_pull_secrets", multiple=True, help="Secret name (repeatable)"),
        Option("--s3-endpoint", "s3_endpoint", help="MinIO/S3 URL for s3:// inputs (default: AWS S3)"),
        Option(
            "--s3-secret",
            "s3_secret",
            help="Secret with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (default: the pod's AWS role)",
        ),
    ),
    interrupt_stops_job=False,
    factory="cloudddp.providers.kubernetes.provider:KubernetesProvider",
    supports_elastic=True,
    # kubernetes.secret_env is the reference: a Secret's key, read by the kubelet.
    in_clear=InClear(
        fields=(ENVIRONMENT, HYPERPARAMETERS, ARGS),
        where="written into the job's manifest",
        by_reference=lambda variable: (
            f"Keep it in a Kubernetes Secret, hand it to the job with kubernetes.secret_env: "
            f"{{{variable}: SECRET/KEY}} and read it from the environment in the script."
        ),
    ),
)
