"""`cloudddp stage SRC DEST`: stage a local folder to S3 or OCI Object Storage.

The last line on stdout is the URI a job should read (the published version), so
`URI=$(cloudddp stage ./data s3://bucket/data | tail -1)` works in scripts. Progress goes
to stderr, and only on a terminal.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from cloudddp.errors import CloudDDPError, print_error
from cloudddp.staging.engine import StageOptions, StageResult, counted, stage
from cloudddp.staging.hash_cache import CACHE_VARIABLE, cache_dir
from cloudddp.staging.location import Location, parse_location
from cloudddp.staging.manifest import PLAIN, SHARDS
from cloudddp.staging.progress import for_stream
from cloudddp.staging.shards import DEFAULT_SHARD_SIZE
from cloudddp.staging.store import ObjectStore

if TYPE_CHECKING:
    from cloudddp.staging.oci_object_store import OCIObjectStore

MIB = 1024 * 1024
INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, as a shell reports Ctrl-C
INTERRUPTED = (
    "cloudddp: interrupted. Run the same command again to finish: objects that were uploaded completely are kept "
    "and not sent again, and a version is published only once every object is there."
)


def open_store(location: Location, transport: str) -> ObjectStore:
    if location.scheme == "s3":
        from cloudddp.staging.s3_direct import open_direct_store

        direct = open_direct_store(location) if transport == "auto" else None
        if direct is not None:  # no botocore for files up to 64 MiB: see s3_direct.py
            return direct
        try:
            from cloudddp.staging.s3_store import open_s3_store
        except ImportError:
            raise CloudDDPError("staging to s3:// needs boto3: pip install 'cloudddp[sagemaker]'.") from None
        return open_s3_store(location, transport)
    try:
        return open_oci_store(location)
    except ModuleNotFoundError as exc:
        if exc.name != "oci" and not (exc.name or "").startswith("oci."):
            raise
        raise CloudDDPError("staging to oci:// needs the oci SDK: pip install 'cloudddp[oci]'.") from None


def summary(result: StageResult) -> str:
    files = counted(result.files, "file")
    if result.unchanged:
        return f"cloudddp: {files} unchanged; {result.version} is already published"
    return f"cloudddp: {files} ({result.layout}): {result.changes()}; published {result.version}"


def parser() -> argparse.ArgumentParser:
    """argparse, not typer: typer (0.29) builds a pydantic validator for each option, ~0.14 s of start-up
    measured, a tenth of a `--shards` stage of 2000 files. `cloudddp --help` lists this command (cli.py)."""
    made = argparse.ArgumentParser(
        prog="cloudddp stage", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=STAGE_HELP, epilog=STAGE_EXAMPLES,
    )  # fmt: skip
    made.add_argument("src", type=Path, help="local folder (or file) to stage")
    made.add_argument("dest", help="s3://bucket/prefix or oci://bucket@namespace/prefix")
    made.add_argument("--shards", action="store_true", help="pack small files into tar shards + index")
    made.add_argument("--plain", dest="shards", action="store_false", help="one object per file (the default)")
    made.add_argument("--shard-size", type=int, metavar="MIB",
                      help=f"target shard size, MiB (default: {DEFAULT_SHARD_SIZE // MIB})")  # fmt: skip
    made.add_argument("--shard-dir", type=Path, help="where shards are built (default: temp folder)")
    made.add_argument("--delete", action="store_true", help="remove older versions under the prefix")
    made.add_argument("--create-bucket", action="store_true", help="create the bucket if missing")
    made.add_argument("--transport", default="auto",
                      help="S3 uploads: auto (cloudddp's PUT client up to 64 MiB, boto3 above) or boto3 (all)")  # fmt: skip
    made.add_argument("--progress", action=argparse.BooleanOptionalAction, help="default: on a terminal")
    made.add_argument("--hash-cache", action=argparse.BooleanOptionalAction, default=True,
                      help=f"reuse hashes of unchanged files (${CACHE_VARIABLE}; default: on)")  # fmt: skip
    return made


STAGE_HELP = """Upload a dataset incrementally and verified; print the URI a job should read.

A version (DEST/v-<hash>/) is published only once complete, by writing
DEST/_cloudddp_manifest.json; unchanged data writes nothing; an interrupted run resumes."""
STAGE_EXAMPLES = """examples:
  cloudddp stage ./data s3://my-bucket/datasets/cats
  cloudddp stage ./data oci://my-bucket@my-namespace/datasets/cats --shards"""


def run(args: argparse.Namespace) -> None:
    given = [name for name, value in (("--shard-size", args.shard_size), ("--shard-dir", args.shard_dir)) if value]
    if given and not args.shards:  # never silently ignored
        raise CloudDDPError(f"{' and '.join(given)} apply to --shards only; add --shards, or leave them out.")
    if args.shard_size is None:
        args.shard_size = DEFAULT_SHARD_SIZE // MIB
    if args.shard_size < 1:
        raise CloudDDPError(f"--shard-size {args.shard_size}: expected a size in MiB of at least 1.")
    location = parse_location(args.dest)
    store = open_store(location, args.transport)
    options = StageOptions(layout=SHARDS if args.shards else PLAIN, delete=args.delete,
                           create_bucket=args.create_bucket, shard_size=args.shard_size * MIB,
                           shard_dir=args.shard_dir, hash_cache=cache_dir() if args.hash_cache else None)  # fmt: skip
    reaching = getattr(store, "reaching", None)  # OCI: network failures as one paragraph (oci_object_store.py)
    with reaching("stage") if reaching else contextlib.nullcontext():
        result = stage(args.src, store, options, for_stream(args.progress))
    print(summary(result))
    if result.deleted:
        print(f"cloudddp: removed {len(result.deleted)} objects of older versions")
    print(result.uri, flush=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a CI timeout, `docker stop`, a closed terminal), raised where Ctrl-C would be.

    A KeyboardInterrupt, so every clean-up made for Ctrl-C (the shard build folder above all) runs for it too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Interrupts:
    """The first SIGINT, SIGTERM or SIGHUP is raised in the main thread (KeyboardInterrupt, Terminated), so the
    stage unwinds through its clean-ups, which wait for no upload (store.upload_in_parallel). One more while that
    runs ends the process at once, with the same line and exit code: a second Ctrl-C means "now", and without
    this it would raise inside a clean-up or the exit, a traceback. A signal already ignored (`nohup`, a
    background job of a non-interactive shell) stays ignored."""

    def __init__(self) -> None:
        self.raised: int | None = None  # the signal raised, once one was

    def catch(self) -> None:
        caught = {
            signal.SIGINT: signal.default_int_handler,
            signal.SIGTERM: signal.SIG_DFL,
            signal.SIGHUP: signal.SIG_DFL,
        }
        for signum, default in caught.items():
            if signal.getsignal(signum) == default:
                signal.signal(signum, self.on_signal)

    def on_signal(self, signum: int, _frame: object) -> None:
        if self.raised is not None:
            leave(exit_code(self.raised))
        self.raised = signum
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)


def exit_code(signum: int) -> int:
    """128 + the signal, as a shell reports a process that signal ended: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP."""
    return INTERRUPTED_EXIT_CODE if signum == signal.SIGINT else 128 + signum


def leave(code: int) -> NoReturn:
    """Print the interrupted line and end the process now: no interpreter teardown, which would join threads
    still uploading (ThreadPoolExecutor's exit hook, the SDK's thread pools) and let a further signal raise
    there. Written with os.write: this also runs in a signal handler, possibly while `print` holds stderr."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # the line is printed once, and the exit is not interrupted
    with contextlib.suppress(OSError, ValueError, RuntimeError):  # a closed pipe; a flush the signal interrupted
        sys.stdout.flush()
    os.write(sys.stderr.fileno(), (INTERRUPTED + "\n").encode())
    os._exit(code)


def main(args: list[str]) -> None:
    """`cloudddp stage ARGS` on its own (cloudddp/console.py): the rest of the CLI is never imported. An interrupt
    ends the process (os._exit): call it in a process of its own."""
    Interrupts().catch()
    try:
        run(parser().parse_args(args))
    except CloudDDPError as exc:
        print_error(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:  # true at any moment: the engine publishes only a complete version
        leave(exit_code(exc.signum) if isinstance(exc, Terminated) else INTERRUPTED_EXIT_CODE)


def open_oci_store(location: Location) -> OCIObjectStore:
    """An OCIObjectStore from ~/.oci/config (or the profile/endpoint variables the OCI provider reads)."""
    from cloudddp.providers.oci.provider import OCIProvider
    from cloudddp.staging.oci_object_store import OCIObjectStore

    provider = OCIProvider()
    clients = provider.clients()
    compartment = os.environ.get("OCI_COMPARTMENT_ID") or clients.credentials.config.get("tenancy")
    store = OCIObjectStore(clients.object_storage, location, compartment_id=compartment)
    store.reaching = provider.reaching
    return store
