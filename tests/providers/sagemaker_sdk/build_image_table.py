"""Regenerate `cloudddp/providers/sagemaker/image_table.py` from the SageMaker SDK v2's own image table.

    .venv/bin/python tests/providers/sagemaker_sdk/build_image_table.py PYTORCH_JSON

PYTORCH_JSON is `src/sagemaker/image_uri_config/pytorch.json` of aws/sagemaker-python-sdk
(tag v2.257.6, commit fc582aaa46faf7b7e16ab1e13840869712174cd0; identical in the sagemaker
2.257.7 wheel). Only the `training` scope is kept; registries shared by several versions are
stored once.
"""

from __future__ import annotations

import json
import pprint
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parents[3] / "cloudddp" / "providers" / "sagemaker" / "image_table.py"
HEADER = '''"""PyTorch training images as the SageMaker SDK v2 resolves them (generated; do not edit).

From aws/sagemaker-python-sdk `src/sagemaker/image_uri_config/pytorch.json`, scope
`training`, tag v2.257.6 (commit fc582aaa46faf7b7e16ab1e13840869712174cd0), by
tests/providers/sagemaker_sdk/build_image_table.py.
"""

# fmt: off
'''


def main() -> None:
    training = json.loads(Path(sys.argv[1]).read_text())["training"]
    registries: list[dict[str, str]] = []
    versions = {}
    for version, config in training["versions"].items():
        if config["registries"] not in registries:
            registries.append(config["registries"])
        versions[version] = {
            "py_versions": config["py_versions"],
            "repository": config["repository"],
            "registries": registries.index(config["registries"]),
        }
    body = (
        f"PROCESSORS = {training['processors']!r}\n"
        f"VERSION_ALIASES = {pprint.pformat(training['version_aliases'], width=118, sort_dicts=False)}\n"
        f"VERSIONS = {pprint.pformat(versions, width=118, sort_dicts=False)}\n"
        f"REGISTRIES = {pprint.pformat(registries, width=118, sort_dicts=False)}\n"
    )
    TARGET.write_text(HEADER + body)
    print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
