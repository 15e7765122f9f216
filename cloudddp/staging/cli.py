"""`cloudddp stage SRC DEST`: stage a local folder to S3 or OCI Object Storage.

The last line on stdout is the URI a job should read (the published version), so
`URI=$(cloudddp stage ./data s3://bucket/data | tail -1)` works in scripts. Progress goes
to stderr, and only on a terminal.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from cloudddp.errors import CloudDDPError, print_error
from cloudddp.staging.engine import StageOptions, StageResult, stage
from cloudddp.staging.hash_cache import CACHE_VARIABLE, cache_dir
from cloudddp.staging.location import Location, parse_location
from cloudddp.staging.manifest import PLAIN, SHARDS
from cloudddp.staging.progress import for_stream
from cloudddp.staging.shards import DEFAULT_SHARD_SIZE
from cloudddp.staging.store import ObjectStore

MIB = 1024 * 1024


def open_store(location: Location, transport: str) -> ObjectStore:
    if location.scheme == "s3":
        from cloudddp.staging.s3_direct import open_direct_store

        direct = open_direct_store(location) if transport == "auto" else None
        if direct is not None:  # no botocore, no CRT for files up to 64 MiB: see s3_direct.py
            return direct
        try:
            from cloudddp.staging.s3_store import open_s3_store
        except ImportError:
            raise CloudDDPError("staging to s3:// needs boto3: pip install 'cloudddp[sagemaker]'.") from None
        return open_s3_store(location, transport)
    try:
        from cloudddp.staging.oci_object_store import open_oci_store
    except ImportError:
        raise CloudDDPError("staging to oci:// needs the oci SDK: pip install 'cloudddp[oci]'.") from None
    return open_oci_store(location)


def summary(result: StageResult) -> str:
    if result.unchanged:
        return f"cloudddp: {result.files} files unchanged; {result.version} is already published"
    parts = [f"{len(result.uploaded)} objects uploaded ({result.bytes_uploaded / 1e6:.1f} MB)"]
    if result.copied:
        parts.append(f"{len(result.copied)} copied from the previous version")
    if result.resumed:
        parts.append(f"{len(result.resumed)} already there from an interrupted run")
    return f"cloudddp: {result.files} files ({result.layout}): " + ", ".join(parts) + f"; published {result.version}"


def stage_command(
    src: Annotated[Path, typer.Argument(help="local folder (or file) to stage")],
    dest: Annotated[str, typer.Argument(help="s3://bucket/prefix or oci://bucket@namespace/prefix")],
    shards: Annotated[bool, typer.Option("--shards/--plain", help="pack small files into tar shards + index")] = False,
    shard_size_mib: Annotated[int, typer.Option("--shard-size", help="target shard size, MiB")] = DEFAULT_SHARD_SIZE
    // MIB,
    shard_dir: Annotated[Path | None, typer.Option(help="where shards are built (default: temp folder)")] = None,
    delete: Annotated[bool, typer.Option("--delete", help="remove older versions under the prefix")] = False,
    create_bucket: Annotated[bool, typer.Option("--create-bucket", help="create the bucket if missing")] = False,
    transport: Annotated[
        str, typer.Option(help="S3 uploads: auto (the fastest available), crt (AWS Common Runtime) or boto3")
    ] = "auto",
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="default: on a terminal")] = None,
    hash_cache: Annotated[
        bool, typer.Option("--hash-cache/--no-hash-cache", help=f"reuse hashes of unchanged files (${CACHE_VARIABLE})")
    ] = True,
) -> None:
    """Upload a dataset incrementally and verified; print the URI a job should read.

    A version (DEST/v-<hash>/) is published only once complete, by writing
    DEST/_cloudddp_manifest.json; unchanged data writes nothing; an interrupted run resumes.

    Examples:

      cloudddp stage ./data s3://my-bucket/datasets/cats

      cloudddp stage ./data oci://my-bucket@my-namespace/datasets/cats --shards
    """
    if shard_size_mib < 1:
        raise CloudDDPError(f"--shard-size {shard_size_mib}: expected a size in MiB of at least 1.")
    location = parse_location(dest)
    store = open_store(location, transport)
    options = StageOptions(layout=SHARDS if shards else PLAIN, delete=delete, create_bucket=create_bucket,
                           shard_size=shard_size_mib * MIB, shard_dir=shard_dir,
                           hash_cache=cache_dir() if hash_cache else None)  # fmt: skip
    reaching = getattr(store, "reaching", None)  # OCI: network failures as one paragraph (oci_object_store.py)
    with reaching("stage") if reaching else contextlib.nullcontext():
        result = stage(src, store, options, for_stream(progress))
    typer.echo(summary(result))
    if result.deleted:
        typer.echo(f"cloudddp: removed {len(result.deleted)} objects of older versions")
    typer.echo(result.uri)


def main(args: list[str]) -> None:
    """`cloudddp stage ARGS` on its own (cloudddp/console.py): the rest of the CLI is never imported."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode="rich")
    app.command(context_settings={"help_option_names": ["-h", "--help"]})(stage_command)
    try:
        app(args, prog_name="cloudddp stage")
    except CloudDDPError as exc:
        print_error(exc)
        sys.exit(exc.exit_code)
