"""The one staging algorithm, for every object store: list -> compare -> upload -> verify -> publish.

1. Scan the local folder and hash every file (content, not mtime). In the shard layout a file not
   hashed before is hashed from the bytes packed into its shard: one read of it for both.
2. The version name follows from the hashes. If `<prefix>/_cloudddp_manifest.json` already
   names it, nothing is written (a no-op re-stage costs one GET).
3. Otherwise list `<prefix>/<version>/`: objects an interrupted run already finished are
   kept (an object only appears once its upload completed with a verified checksum).
4. Objects whose content the previously published version holds are copied server-side
   where the store can; the rest are uploaded in parallel, each verified by the store.
5. Once every object is accounted for, the manifest is written: from this moment
   jobs see the new version, never a partial one.
6. `delete=True` then removes every other object under the prefix (older versions,
   abandoned partial ones); without it they stay, since a running job may read them.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from cloudddp.errors import CloudDDPError
from cloudddp.staging import local_files, shards
from cloudddp.staging.hash_cache import HashCache
from cloudddp.staging.manifest import MANIFEST_NAME, PLAIN, SHARDS, FileEntry, Manifest, ObjectEntry, version_of
from cloudddp.staging.store import ObjectStore, Upload

VERSION_FOLDER = re.compile(r"^v-[0-9a-f]{16}/")  # what version_of() names


@dataclass
class StageResult:
    uri: str  # what a job reads: the published version's prefix
    version: str
    layout: str
    files: int = 0
    uploaded: list[str] = field(default_factory=list)  # object names under the version prefix
    copied: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)  # already there from an interrupted run
    deleted: list[str] = field(default_factory=list)
    bytes_uploaded: int = 0
    unchanged: bool = False  # the version was already published: nothing written


class Progress:
    """Callbacks for a progress display; the default shows nothing."""

    def phase(self, text: str) -> None: ...

    def start(self, files: int, total_bytes: int) -> None: ...

    def advance(self, size: int) -> None: ...

    def finish(self) -> None: ...


@dataclass
class StageOptions:
    layout: str = PLAIN
    delete: bool = False
    create_bucket: bool = False
    shard_size: int = shards.DEFAULT_SHARD_SIZE
    shard_dir: Path | None = None  # where shards are built (default: the system temp folder)
    hash_cache: Path | None = None  # folder remembering content hashes (hash_cache.py); None: hash every file


def stage(
    local: str | Path, store: ObjectStore, options: StageOptions | None = None, progress: Progress | None = None
) -> StageResult:
    """Stage the folder (or file) `local` under the store's location; return what a job should read."""
    options, progress = options or StageOptions(), progress or Progress()
    if options.layout not in (PLAIN, SHARDS):
        raise CloudDDPError(f"the staging layout {options.layout!r} is not one of {PLAIN!r}, {SHARDS!r}.")
    progress.phase("scanning")
    files = local_files.list_files(Path(local))
    if not files:
        raise CloudDDPError(f"the local folder {str(local)!r} to stage holds no files.")
    store.check_bucket(options.create_bucket)
    cache = HashCache(options.hash_cache, Path(local)) if options.hash_cache else None
    work = shard_folder(options.shard_dir) if options.layout == SHARDS else None
    try:
        return stage_files(files, store, options, progress, cache, work)
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)


def stage_files(
    files: list[local_files.LocalFile], store: ObjectStore, options: StageOptions, progress: Progress,
    cache: HashCache | None, work: Path | None,
) -> StageResult:  # fmt: skip
    """Steps 1 to 6 for the scanned `files`; shards are built in `work` (None: the plain layout)."""
    known = local_files.recall(files, store.md5_part_size, cache)
    built: list[shards.Shard] | None = None
    if work and any(isinstance(f, local_files.LocalFile) for f in known):
        # Files to hash and shards to build: both from one read of each file (shards.copy_member). Should the
        # version turn out published already, the build was wasted; with every hash remembered it is skipped.
        progress.phase("hashing and building shards")
        built, hashed = shards.build_shards(known, work, options.shard_size, store.md5_part_size)
        if cache:
            cache.save(hashed, store.md5_part_size)
    else:
        progress.phase("hashing")
        hashed = local_files.hash_files(files, md5_part_size=store.md5_part_size, cache=cache)
    entries = [FileEntry(h.file.relative, h.file.size, h.sha256) for h in hashed]
    version = version_of(options.layout, entries, options.shard_size if work else None)
    result = StageResult(uri=store.location.uri(version, folder=True), version=version, layout=options.layout,
                         files=len(files))  # fmt: skip
    published = read_manifest(store)
    if published and published.version == version:
        result.unchanged = True
        if options.delete:
            result.deleted = delete_others(store, version)
        return result
    if work and built is None:
        progress.phase("building shards")
        built, hashed = shards.build_shards(hashed, work, options.shard_size, store.md5_part_size)
    manifest, uploads = plan_objects(hashed, built, version, store, work)
    transfer(store, manifest, uploads, published, result, progress)
    check_accounted(store, manifest, result)
    store.write(store.location.key(MANIFEST_NAME), manifest.to_json())  # the publication
    if options.delete:
        result.deleted = delete_others(store, version)
    return result


def shard_folder(parent: Path | None) -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix="cloudddp-shards-", dir=parent))
    except OSError as exc:
        where = str(parent) if parent else tempfile.gettempdir()
        raise CloudDDPError(
            f"cannot create a folder for the shards in {where!r} (--shard-dir): {exc.strerror}."
        ) from None


def read_manifest(store: ObjectStore) -> Manifest | None:
    key = store.location.key(MANIFEST_NAME)
    data = store.read(key)
    return Manifest.from_json(data, store.location.uri(MANIFEST_NAME)) if data is not None else None


def plan_objects(
    hashed: list[local_files.Hashed], built: list[shards.Shard] | None, version: str, store: ObjectStore,
    work: Path | None,
) -> tuple[Manifest, list[Upload]]:  # fmt: skip
    """The objects of the new version, and an Upload for each (from the user's file or a built shard)."""
    key = store.location.key
    if built is None or work is None:
        manifest = Manifest(version, PLAIN, [FileEntry(h.file.relative, h.file.size, h.sha256) for h in hashed],
                            [ObjectEntry(h.file.relative, h.file.size, h.sha256) for h in hashed])  # fmt: skip
        uploads = [upload_of(h, key(version, h.file.relative)) for h in hashed]
        return manifest, uploads
    index_path = work / shards.INDEX_NAME
    index_path.write_bytes(shards.index_json(built))
    membership = {m.path: s.name for s in built for m in s.members}
    files = [FileEntry(h.file.relative, h.file.size, h.sha256, membership[h.file.relative]) for h in hashed]
    index = local_files.hash_file(local_files.describe(index_path, shards.INDEX_NAME), store.md5_part_size)
    uploads = [Upload(key(version, s.name), s.path, s.size, s.sha256, crc32=s.crc32) for s in built]  # fmt: skip
    if store.md5_part_size:  # OCI checks MD5s: one more read of each shard
        uploads = [replace(u, md5=local_files.hash_file(local_files.describe(u.path, s.name), store.md5_part_size).md5)
                   for u, s in zip(uploads, built, strict=True)]  # fmt: skip
    uploads.append(upload_of(index, key(version, shards.INDEX_NAME), source=False))
    names = [*(s.name for s in built), shards.INDEX_NAME]
    objects = [ObjectEntry(name, u.size, u.sha256) for name, u in zip(names, uploads, strict=True)]
    return Manifest(version, SHARDS, files, objects), uploads


def upload_of(hashed: local_files.Hashed, key: str, source: bool = True) -> Upload:
    """The upload of a scanned file to `key`; `source`: the user's own file, checked for changes after it lands."""
    h = hashed
    return Upload(key, h.file.path, h.file.size, h.sha256, h.md5, h.file if source else None, h.crc32)


def transfer(
    store: ObjectStore, manifest: Manifest, uploads: list[Upload], published: Manifest | None,
    result: StageResult, progress: Progress,
) -> None:  # fmt: skip
    """Resume, copy or upload each object of the new version."""
    key = store.location.key
    version_prefix = key(manifest.version) + "/"
    already = store.list_sizes(version_prefix)
    reusable = published.objects_by_hash() if published and store.can_copy else {}
    to_copy: list[tuple[str, str]] = []
    to_send: list[Upload] = []
    for upload in uploads:
        name = upload.key[len(version_prefix) :]
        if already.get(upload.key) == upload.size:
            result.resumed.append(name)
        elif upload.sha256 in reusable and published is not None:
            to_copy.append((key(published.version, reusable[upload.sha256].name), upload.key))
            result.copied.append(name)
        else:
            to_send.append(upload)
    if to_copy:
        progress.phase("copying unchanged objects")
        store.copy(to_copy)
    progress.phase("uploading")
    progress.start(len(to_send), sum(u.size for u in to_send))

    def landed(upload: Upload) -> None:
        if upload.source and not local_files.unchanged_since_scan(upload.source):
            raise CloudDDPError(
                f"{str(upload.path)!r} changed while it was being uploaded (size or modification time differs from "
                f"the scan). Nothing was published; stage again once nothing writes to it."
            )
        result.uploaded.append(upload.key[len(version_prefix) :])
        result.bytes_uploaded += upload.size
        progress.advance(upload.size)

    try:
        store.upload(to_send, landed)
    finally:
        progress.finish()


def check_accounted(store: ObjectStore, manifest: Manifest, result: StageResult) -> None:
    """Every object of the version was resumed (listed with its size), copied or uploaded (checksum verified).

    No second listing: each upload was verified by the store as it landed, and listing thousands of keys
    again costs more than the check is worth."""
    done = set(result.resumed) | set(result.copied) | set(result.uploaded)
    missing = [o.name for o in manifest.objects if o.name not in done]
    if missing:
        raise CloudDDPError(
            f"{len(missing)} objects of {store.location.uri(manifest.version)} were not uploaded (first: {missing[0]!r})."
            f" Nothing was published; stage again."
        )


def delete_others(store: ObjectStore, version: str) -> list[str]:
    """Objects of every other version under the prefix (never anything cloudddp did not write)."""
    location = store.location
    base = location.key() + "/" if location.key() else ""
    stale = [
        k
        for k in store.list_sizes(base)
        if VERSION_FOLDER.match(k[len(base) :]) and not k.startswith(f"{base}{version}/")
    ]
    store.delete(sorted(stale))
    return sorted(stale)


def copy_folder(local: str | Path, store: ObjectStore, progress: Progress | None = None) -> StageResult:
    """Upload the folder (or file) `local` as is under the store's prefix: no version, no manifest, no delete.

    For places a job reads by their exact name (a checkpoint folder to resume from, the source archive),
    each a fresh prefix per job. Every object is verified like a staged one."""
    progress = progress or Progress()
    files = local_files.list_files(Path(local))
    hashed = local_files.hash_files(files, md5_part_size=store.md5_part_size)
    uploads = [upload_of(h, store.location.key(h.file.relative)) for h in hashed]
    result = StageResult(uri=store.location.uri(folder=True), version="", layout=PLAIN, files=len(files))
    progress.start(len(uploads), sum(u.size for u in uploads))

    def landed(upload: Upload) -> None:
        result.uploaded.append(upload.key)
        result.bytes_uploaded += upload.size
        progress.advance(upload.size)

    try:
        store.upload(uploads, landed)
    finally:
        progress.finish()
    return result
