"""`cloudddp stage SRC DEST`: stage a local folder to S3 or OCI Object Storage.

The last line on stdout is the URI a job should read (the published version), so
`URI=$(cloudddp stage ./data s3://bucket/data | tail -1)` works in scripts. Progress goes
to stderr, and only on a terminal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from cloudddp.errors import CloudDDPError, print_error
from cloudddp.staging.engine import StageOptions, StageResult, counted, stage
from cloudddp.staging.hash_cache import CACHE_VARIABLE, cache_dir
from cloudddp.staging.location import Location, parse_location
from cloudddp.staging.manifest import PLAIN, SHARDS
from cloudddp.staging.progress import for_stream
from cloudddp.staging.shards import DEFAULT_SHARD_SIZE
from cloudddp.staging.store import ObjectStore
from cloudddp.terminal import APP_SETTINGS

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


STAGE_HELP = """Upload a dataset incrementally and verified; print the URI a job should read.

A version (DEST/v-<hash>/) is published only once complete, by writing DEST/_cloudddp_manifest.json; \
unchanged data writes nothing; an interrupted run resumes."""
STAGE_EXAMPLES = """Examples:

cloudddp stage ./data s3://my-bucket/datasets/cats

cloudddp stage ./data oci://my-bucket@my-namespace/datasets/cats --shards"""


@dataclass(frozen=True)
class StageArgs:
    """The command line, parsed: what `run` stages."""

    src: Path
    dest: str
    shards: bool = False
    shard_size: int | None = None  # MiB
    shard_dir: Path | None = None
    delete: bool = False
    create_bucket: bool = False
    transport: str = "auto"
    progress: bool | None = None  # None: on a terminal
    hash_cache: bool = True


def stage_command(
    src: Annotated[Path, typer.Argument(metavar="SRC", help="local folder (or file) to stage", show_default=False)],
    dest: Annotated[str, typer.Argument(metavar="DEST", help="s3://bucket/prefix or oci://bucket@namespace/prefix", show_default=False)],
    shards: Annotated[bool, typer.Option("--shards/--plain", help="pack small files into tar shards + index, or one object per file")] = False,
    shard_size: Annotated[int | None, typer.Option(metavar="MIB", help=f"target shard size, MiB (default: {DEFAULT_SHARD_SIZE // MIB})", show_default=False)] = None,
    shard_dir: Annotated[Path | None, typer.Option(help="where shards are built (default: temp folder)", show_default=False)] = None,
    delete: Annotated[bool, typer.Option("--delete", help="remove older versions under the prefix")] = False,
    create_bucket: Annotated[bool, typer.Option("--create-bucket", help="create the bucket if missing (private)")] = False,
    transport: Annotated[str, typer.Option(help="S3 uploads: auto (cloudddp's PUT client up to 64 MiB, boto3 above) or boto3 (all)")] = "auto",
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="a progress bar (default: on a terminal)", show_default=False)] = None,
    hash_cache: Annotated[bool, typer.Option("--hash-cache/--no-hash-cache", help=f"reuse hashes of unchanged files (${CACHE_VARIABLE})")] = True,
) -> None:  # fmt: skip
    execute(StageArgs(src, dest, shards, shard_size, shard_dir, delete, create_bucket, transport, progress, hash_cache))


def register(app: typer.Typer) -> None:
    """Add `stage` to a typer app: cli.py's (`cloudddp --help` lists it) and main's own (console.py)."""
    app.command("stage", help=STAGE_HELP, epilog=STAGE_EXAMPLES)(stage_command)


def run(args: StageArgs) -> None:
    given = [name for name, value in (("--shard-size", args.shard_size), ("--shard-dir", args.shard_dir)) if value]
    if given and not args.shards:  # never silently ignored
        raise CloudDDPError(f"{' and '.join(given)} apply to --shards only; add --shards, or leave them out.")
    shard_size = DEFAULT_SHARD_SIZE // MIB if args.shard_size is None else args.shard_size
    if shard_size < 1:
        raise CloudDDPError(f"--shard-size {shard_size}: expected a size in MiB of at least 1.")
    location = parse_location(args.dest)
    store = open_store(location, args.transport)
    options = StageOptions(layout=SHARDS if args.shards else PLAIN, delete=args.delete,
                           create_bucket=args.create_bucket, shard_size=shard_size * MIB,
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


def execute(args: StageArgs) -> None:
    """Stage, as the command line asked; errors are one paragraph (exit 2), an interrupt ends the process (os._exit:
    run it in a process of its own) with the line that says how to finish."""
    Interrupts().catch()
    try:
        run(args)
    except CloudDDPError as exc:
        print_error(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:  # true at any moment: the engine publishes only a complete version
        leave(exit_code(exc.signum) if isinstance(exc, Terminated) else INTERRUPTED_EXIT_CODE)


def main(args: list[str]) -> None:
    """`cloudddp stage ARGS` (console.py): the command on a typer app of its own, with the CLI's settings, so the
    rest of the CLI (every provider's options) is never imported."""
    app = typer.Typer(**APP_SETTINGS)
    app.callback()(lambda: None)  # a group, so the command is called by its name, as in `cloudddp stage`
    register(app)
    app(args=["stage", *args], prog_name="cloudddp")


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
