"""Fetch a job's code and s3:// inputs with presigned GET URLs: standard library only, no cloudddp, no keys.

The Kubernetes init container `pull-inputs` runs this file's text as `python -c` in a stock image (`kubernetes.code`,
cloudddp/providers/kubernetes/presigned.py): nothing of cloudddp is there yet. The plan, a JSON file from the pod's
Secret volume, lists every object with its size and a GET URL presigned at submit:
    {"code": {"uri": "s3://b/p/v-../sourcedir.tar.gz", "size": N, "url": "..."} or null,
     "inputs": {"train": {"uri": "s3://b/p", "files": [{"path": "a/b.csv", "size": N, "url": "..."}]}}}
The code archive is unpacked into `--code`, channel CHANNEL lands in `<--into>/CHANNEL/`. A channel or the code
fetched in full leaves a record (`.cloudddp-pulled-CHANNEL.json`, as cloudddp.launcher.pull_inputs writes): run
again in the same pod, whole copies are kept without a request, so an init container re-run after the URLs
expired still starts. A problem (an expired or refused URL, a short download) is one line, exit 2.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

PROG = "cloudddp pull"
PARALLEL = 8
TIMEOUT = 60  # seconds without a byte, per request
CHUNK = 1 << 20


EXPIRED_HINT = (
    " (kubernetes.url_lifetime after submit); submit the job again, with a longer kubernetes.url_lifetime (at most "
    "604800 s) if it waits long to start"
)


class PullError(Exception):
    pass


def expiry(url: str) -> int | None:
    """When a SigV4 presigned URL stops working (X-Amz-Date + X-Amz-Expires, UTC), else None."""
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))
    try:
        signed = calendar.timegm(time.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))
        return signed + int(query["X-Amz-Expires"])
    except (KeyError, ValueError):
        return None


def check_fresh(uri: str, url: str) -> None:
    ends = expiry(url)
    if ends is not None and time.time() >= ends:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ends))
        raise PullError(f"the presigned URL for {uri} expired at {stamp}{EXPIRED_HINT}")


def download(uri: str, url: str, size: int, target: str) -> None:
    check_fresh(uri, url)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    partial = target + ".partial"
    got = 0
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response, open(partial, "wb") as out:
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                got += len(chunk)
    except urllib.error.HTTPError as exc:
        check_fresh(uri, url)  # it may have expired while the others were fetched
        body = exc.read(2000).decode("utf-8", "replace")
        code = body.split("<Code>")[1].split("</Code>")[0] if "<Code>" in body else ""
        message = body.split("<Message>")[1].split("</Message>")[0] if "<Message>" in body else exc.reason
        hint = EXPIRED_HINT if "expired" in str(message).lower() else ""
        raise PullError(f"GET {uri} (presigned URL) was refused: HTTP {exc.code} {code}: {message}{hint}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise PullError(f"GET {uri} (presigned URL) failed: {getattr(exc, 'reason', exc)}") from None
    if got != size:
        raise PullError(f"{uri} is {size} bytes but {got} arrived")
    os.replace(partial, target)


def kept(record: str, uri: str, folder: str) -> bool:
    """Whether `record` vouches for a whole copy of `uri` in `folder` (every file there at its size)."""
    try:
        with open(record) as handle:
            done = json.load(handle)
        files = done["files"]
        return (
            done["uri"] == uri
            and bool(files)
            and all(
                os.path.isfile(os.path.join(folder, path)) and os.path.getsize(os.path.join(folder, path)) == size
                for path, size in files.items()
            )
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def write_record(record: str, uri: str, files: dict[str, int]) -> None:
    with open(record + ".partial", "w") as handle:
        json.dump({"uri": uri, "files": files}, handle)
    os.replace(record + ".partial", record)


def safe_path(channel: str, path: str) -> str:
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise PullError(f"channel {channel!r}: the object path {path!r} would land outside its folder")
    return os.path.join(*parts)


def pull_channel(name: str, channel: dict[str, Any], into: str) -> None:
    folder, record = os.path.join(into, name), os.path.join(into, f".cloudddp-pulled-{name}.json")
    if kept(record, channel["uri"], folder):
        print(f"cloudddp: kept {channel['uri']} -> {folder} (pulled in full before)", flush=True)
        return
    if os.path.exists(record):
        os.unlink(record)
    started = time.monotonic()
    files = channel["files"]
    jobs = [(f"{channel['uri']} ({f['path']})", f["url"], f["size"], os.path.join(folder, safe_path(name, f["path"])))
            for f in files]  # fmt: skip
    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(lambda job: download(*job), jobs))
    write_record(record, channel["uri"], {f["path"]: f["size"] for f in files})
    total = sum(f["size"] for f in files)
    print(f"cloudddp: pulled {channel['uri']} -> {folder}: {len(files)} file(s), {total} bytes in "
          f"{time.monotonic() - started:.1f} s", flush=True)  # fmt: skip


def pull_code(code: dict[str, Any], folder: str) -> None:
    """Download the source archive and unpack it into `folder` (cloudddp's own archive: the user's files, the
    bundled launcher)."""
    record = os.path.join(folder, ".cloudddp-pulled-code.json")
    archive = os.path.join(folder, ".cloudddp-code.tar.gz")
    if kept(record, code["uri"], folder):
        print(f"cloudddp: kept {code['uri']} -> {folder} (pulled in full before)", flush=True)
        return
    download(code["uri"], code["url"], code["size"], archive)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        if any(name.startswith("/") or ".." in name.split("/") for name in names):
            raise PullError(f"{code['uri']} holds a path outside its folder")
        if hasattr(tarfile, "data_filter"):  # 3.12, and the security releases of 3.8 to 3.11
            tar.extractall(folder, filter="data")
        else:
            tar.extractall(folder)  # the names were checked above
    files = {name: os.path.getsize(os.path.join(folder, name)) for name in names
             if os.path.isfile(os.path.join(folder, name))}  # fmt: skip
    os.unlink(archive)
    write_record(record, code["uri"], files)
    print(f"cloudddp: pulled {code['uri']} -> {folder}: {len(files)} file(s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Fetch code and inputs by presigned URL.")
    parser.add_argument("--plan", required=True, help="the JSON plan (from the pod's Secret)")
    parser.add_argument("--into", required=True, help="the folder that receives one folder per channel")
    parser.add_argument("--code", help="the folder the code archive is unpacked into")
    args = parser.parse_args(argv)
    try:
        with open(args.plan) as handle:
            plan = json.load(handle)
        if plan.get("code") and args.code:
            os.makedirs(args.code, exist_ok=True)
            pull_code(plan["code"], args.code)
        for name, channel in sorted(plan.get("inputs", {}).items()):
            pull_channel(name, channel, args.into)
    except PullError as exc:
        print(f"{PROG}: error: {exc}.", file=sys.stderr)
        return 2
    except (OSError, ValueError, tarfile.TarError) as exc:
        print(f"{PROG}: error: {type(exc).__name__}: {exc}.", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
