"""Container entry point shipped in the source archive as `cloudddp_bootstrap.py`.

Runs the bundled job-side launcher (in the same folder, standard library only) for the
job described in `cloudddp_job.json` beside it:
    {"entry_point": "train_ddp.py", "module": false, "args": [...], "launcher_args": [...]}
Any arguments given to the bootstrap itself are appended to the script's arguments: this
is how SageMaker's training toolkit passes hyperparameters (`--epochs 3`). In a bring-your-
own container without the toolkit, pass `--hyperparameters-as-args` in launcher_args and
the launcher reads hyperparameters.json itself.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    sys.path.insert(0, HERE)  # the bundled cloudddp wins over any installed copy
    with open(os.path.join(HERE, "cloudddp_job.json")) as handle:
        job = json.load(handle)
    from cloudddp.launcher.cli import main as launch

    os.chdir(HERE)
    argv = list(job.get("launcher_args", []))
    if job.get("module"):
        argv.append("-m")
    argv += [job["entry_point"], *job.get("args", []), *sys.argv[1:]]
    return launch(argv)


if __name__ == "__main__":
    sys.exit(main())
