#!/bin/sh
# Entry point of the cloudddp training image: the cloudddp launcher.
#
#   IMAGE train.py --epochs 2          -> cloudddp-launch train.py --epochs 2
#   IMAGE --dry-run train.py           -> print this node's plan as JSON
#   IMAGE (no arguments) with OCI__ENTRY_SCRIPT set, as in an Oracle ADS docker-compose
#   file or job: run that script with OCI__ENTRY_SCRIPT_ARGS (split on spaces, like ADS).
#
# The launcher detects the platform (OCI, SageMaker, Kubeflow, Slurm, ...) from the
# environment; exec makes it PID 1, so it gets SIGTERM directly and forwards it to torchrun.
set -eu
if [ "$#" -eq 0 ] && [ -n "${OCI__ENTRY_SCRIPT:-}" ]; then
  # shellcheck disable=SC2086  # ADS passes the arguments as one space-separated string
  set -- "$OCI__ENTRY_SCRIPT" ${OCI__ENTRY_SCRIPT_ARGS:-}
fi
if [ "$#" -eq 0 ]; then
  echo "cloudddp-entrypoint: give a training script (IMAGE train.py ARGS...) or set OCI__ENTRY_SCRIPT" >&2
  exit 2
fi
exec "${PYTHON:-python}" -m cloudddp.launcher "$@"
