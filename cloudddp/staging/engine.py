"""The one staging algorithm, for every object store: list -> compare -> upload -> verify -> publish.

1. Scan the local folder and hash every file (content, not mtime). In the shard layout a file not
   hashed before is hashed from the bytes packed into its shard: one read of it for both.
2. The version name follows from the hashes. If `<prefix>/_cloudddp_manifest.json` already
   names it, nothing is written (a no-op re-stage costs one GET). A first stage of several
   shards is the exception: its version is named from the scan, and each shard hashed while
   built and sent (stage_shards_in_one_pass), each file read once; unless the prefix holds an unfinished
   shard version of another name, which an interrupted run may have named from the content: hashed first.
3. Otherwise list `<prefix>/<version>/`: objects an interrupted run already finished are
   kept (an object only appears once its upload completed with a verified checksum).
4. Objects whose content the previously published version holds are copied server-side
   where the store can; the rest are uploaded in parallel, each verified by the store. Shards are
   built one at a time while the ones before them are sent, and deleted once sent.
5. Once every object is accounted for, and listed under the version (one LIST: another stage's `--delete`
   may have removed some since), the manifest is written: from this moment jobs see the new version, never
   a partial one.
6. `delete=True` then removes every other object under the prefix (older versions,
   abandoned partial ones); without it they stay, since a running job may read them.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic, TypeVar, cast

from rich.filesize import decimal  # "2 bytes", "1.2 MB": what rich's progress bar shows

from cloudddp.errors import CloudDDPError
from cloudddp.staging import hash_cache, local_files, shards
from cloudddp.staging.hash_cache import HashCache
from cloudddp.staging.manifest import (
    MANIFEST_NAME,
    PLAIN,
    SHARDS,
    FileEntry,
    Manifest,
    ObjectEntry,
    scan_version_of,
    version_of,
)
from cloudddp.staging.store import ObjectStore, Upload
from cloudddp.staging.work_folder import ShardWorkFolder

T = TypeVar("T")
VERSION_FOLDER = re.compile(r"^v-[0-9a-f]{16}/")  # what version_of() names
SHARD_OBJECT = re.compile(r"^shard-[0-9]{6}\.tar$")  # what shards.shard_name() names
VERSION_LIKE = "v-" + "0" * 16  # as long as every version folder's name (manifest.version_of, scan_version_of)


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

    def changes(self) -> str:
        """What this stage wrote, in words: one wording for `cloudddp stage` and the providers."""
        if self.unchanged:
            return "unchanged"
        parts = [f"{counted(len(self.uploaded), 'object')} uploaded ({decimal(self.bytes_uploaded)})"]
        if self.copied:
            parts.append(f"{len(self.copied)} copied from the previous version")
        if self.resumed:
            parts.append(f"{len(self.resumed)} already there from an interrupted run")
        return ", ".join(parts)


def counted(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


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
    if options.layout == PLAIN:  # in shards, the names are tar members' and the index's, not object names
        local_files.check_keys(files, lambda relative: store.location.key(VERSION_LIKE, relative), Path(local))
    store.check_bucket(options.create_bucket)
    # The published manifest needs nothing local: fetched while the files are hashed (a round trip less to wait
    # for). The store is not used here again before its result is taken.
    published = InBackground(lambda: read_manifest(store))
    cache = HashCache(options.hash_cache, Path(local)) if options.hash_cache else None
    work = ShardWorkFolder.create(options.shard_dir) if options.layout == SHARDS else None
    try:
        return stage_files(files, store, options, progress, cache, work.path if work else None, published)
    finally:
        if work:
            work.remove()


def stage_files(
    files: list[local_files.LocalFile], store: ObjectStore, options: StageOptions, progress: Progress,
    cache: HashCache | None, work: Path | None, fetching: InBackground[Manifest | None],
) -> StageResult:  # fmt: skip
    """Steps 1 to 6 for the scanned `files`; shards are built in `work` (None: the plain layout); `fetching` the
    published manifest."""
    known = local_files.recall(files, store.md5_part_size, cache)
    groups = shards.plan_shards(known, options.shard_size) if work else []
    unhashed = any(isinstance(f, local_files.LocalFile) for f in known)
    if work and len(groups) > 1 and unhashed and all_settled(files) and not may_be_published(fetching.result(), files):
        scanned = scan_version_of(files, options.shard_size)
        folders = version_folders(store)  # one LIST, which also serves as the Sender's listing of `scanned`
        if scanned in folders or not unfinished_shard_versions(folders):
            sent = folders.get(scanned, {})
            return stage_shards_in_one_pass(files, known, store, options, progress, cache, work, fetching.result(),
                                            (scanned, sent))  # fmt: skip
        # Else an interrupted stage may have named its version from the content (its files were too fresh for the
        # scan's name): hashing first finds that name, and its finished shards are kept, not sent again.
    built: list[shards.Built] | None = None
    if work and len(groups) == 1 and unhashed:
        # One shard and files to hash: both from one read of each file (shards.copy_member). Should the version
        # turn out published already, the build was wasted.
        progress.phase("hashing and building shards")
        (shard,), hashed = shards.build_shards(known, work, options.shard_size, store.md5_part_size)
        built = [(shard, hashed)]
        if cache:
            cache.save(hashed, store.md5_part_size)
    else:  # plain, or several shards whose content needs its name first (it may be the published one, or files just written)
        progress.phase("hashing")
        hashed = local_files.hash_known(known, store.md5_part_size, cache)
    entries = [FileEntry(h.file.relative, h.file.size, h.sha256) for h in hashed]
    version = version_of(options.layout, entries, options.shard_size if work else None)
    published = fetching.result()
    if published and published.content_name == version:  # its prefix may be named from a scan: that one
        result = StageResult(uri=store.location.uri(published.version, folder=True), version=published.version,
                             layout=options.layout, files=len(files), unchanged=True)  # fmt: skip
        if options.delete:
            result.deleted = delete_others(store, published.version)
        return result
    result = StageResult(uri=store.location.uri(version, folder=True), version=version, layout=options.layout,
                         files=len(files))  # fmt: skip
    sender = Sender(store, version, published, result, progress)
    if work:
        manifest, _ = send_shards(sender, hashed, built, options.shard_size, work)
    else:
        manifest = Manifest(version, PLAIN, entries, [ObjectEntry(e.path, e.size, e.sha256) for e in entries])
        sender.send_all([upload_of(h, store.location.key(version, h.file.relative)) for h in hashed])
    publish(store, manifest, result, options.delete)
    return result


def stage_shards_in_one_pass(
    files: list[local_files.LocalFile], known: list[local_files.Hashed | local_files.LocalFile], store: ObjectStore,
    options: StageOptions, progress: Progress, cache: HashCache | None, work: Path, published: Manifest | None,
    named: tuple[str, dict[str, int]],
) -> StageResult:  # fmt: skip
    """Several shards, files to hash, and content that cannot be the published one (may_be_published): the version
    is named from the scan (manifest.scan_version_of), so each shard is sent as soon as it is built, its files
    hashed from the bytes packed into it: each file is read once, and sending starts with the first shard instead
    of after a hashing pass over the whole dataset. A shard byte-identical to one of `published` is copied
    server-side. The manifest records the content's name beside the version, so a later stage of the same
    content finds it published whatever the prefix is called. An interrupted run resumes under the same name
    while the files are untouched (its finished shards are built again to hash their files, not sent). `named`:
    the version (scan_version_of) and its objects listed (key -> size)."""
    version, already = named
    result = StageResult(uri=store.location.uri(version, folder=True), version=version, layout=SHARDS,
                         files=len(files))  # fmt: skip
    sender = Sender(store, version, published, result, progress, already)
    manifest, hashed = send_shards(sender, known, None, options.shard_size, work)
    manifest.content = version_of(SHARDS, manifest.files, options.shard_size)
    if cache:
        cache.save(hashed, store.md5_part_size)
    publish(store, manifest, result, options.delete)
    return result


def may_be_published(published: Manifest | None, files: list[local_files.LocalFile]) -> bool:
    """Whether these files' content name could be `published`'s, as far as the scan can tell. Each file's path and
    size go into that name (manifest.version_of), so other paths or sizes, or another layout, rule it out without
    reading a byte: a changed dataset (files added, removed or resized) is then staged in one pass, like a first
    stage. Where they match, only the content can tell (a file rewritten at the same size), so it is hashed first:
    an unchanged dataset is found published without a shard built or sent."""
    if published is None:
        return False
    scanned = [(f.relative, f.size) for f in files]  # list_files sorts by relative path
    return published.layout == SHARDS and sorted((f.path, f.size) for f in published.files) == scanned


def version_folders(store: ObjectStore) -> dict[str, dict[str, int]]:
    """Every version folder under the prefix -> its objects (key -> size), from one LIST of the prefix."""
    base = store.location.key() + "/" if store.location.key() else ""
    folders: dict[str, dict[str, int]] = {}
    for key, size in store.list_sizes(base).items():
        if VERSION_FOLDER.match(key[len(base) :]):
            folders.setdefault(key[len(base) :].split("/", 1)[0], {})[key] = size
    return folders


def unfinished_shard_versions(folders: dict[str, dict[str, int]]) -> list[str]:
    """Folders holding shards but no index: a shard stage interrupted before its last batch (the index goes with
    the last shard). Versions that were published once hold their index, plain ones no shard."""
    unfinished = []
    for version, objects in folders.items():
        names = [key.rsplit("/", 1)[-1] for key in objects]
        if shards.INDEX_NAME not in names and any(SHARD_OBJECT.match(name) for name in names):
            unfinished.append(version)
    return unfinished


def all_settled(files: list[local_files.LocalFile]) -> bool:
    """No file written so recently that its stat might not show a write yet (hash_cache.settled)."""
    now = time.time_ns()
    return all(hash_cache.settled(f, now) for f in files)


def publish(store: ObjectStore, manifest: Manifest, result: StageResult, delete: bool) -> None:
    """Steps 5 and 6: the manifest once every object is there, then (with `delete`) the other versions."""
    check_accounted(store, manifest, result)
    check_present(store, manifest)
    # A window remains: a `--delete` whose DELETEs land after check_present's LIST (sent between that LIST and
    # this PUT, or from a listing it took earlier, while its batches run) still removes objects of the version
    # just published. It is that short interval, no longer the whole upload. Closing it needs --delete to spare
    # unpublished versions, or a lock the stores do not offer.
    store.write(store.location.key(MANIFEST_NAME), manifest.to_json())  # the publication
    if delete:
        result.deleted = delete_others(store, manifest.version)


class InBackground(Generic[T]):
    """`call()` on a daemon thread, started at once; `result()` waits and returns (or raises) what it did.

    A daemon thread, so an interrupted stage never waits for a round trip still under way."""

    def __init__(self, call: Callable[[], T]) -> None:
        self.done = threading.Event()
        self.value: T | None = None
        self.error: BaseException | None = None
        threading.Thread(target=self.run, args=(call,), name="cloudddp-in-background", daemon=True).start()

    def run(self, call: Callable[[], T]) -> None:
        try:
            self.value = call()
        except BaseException as exc:  # handed to result(), raised in the caller's thread
            self.error = exc
        finally:
            self.done.set()

    def result(self) -> T:
        self.done.wait()
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


def read_manifest(store: ObjectStore) -> Manifest | None:
    key = store.location.key(MANIFEST_NAME)
    data = store.read(key)
    return Manifest.from_json(data, store.location.uri(MANIFEST_NAME)) if data is not None else None


def send_shards(
    sender: Sender, items: Sequence[shards.Packable], built: list[shards.Built] | None, shard_size: int, work: Path
) -> tuple[Manifest, list[local_files.Hashed]]:
    """Send the shards (`built`, else each built from `items` while the one before is sent), then their index;
    return the manifest and every file's hashes (from the builds: hashed while packed where not hashed before).

    A sent shard is deleted at once: with the background builder the shard folder never holds more than
    three, so staging 50 GB does not need 50 GB of temporary disk, and building overlaps sending."""
    store, version, progress = sender.store, sender.version, sender.progress
    key = store.location.key
    groups = shards.plan_shards(items, shard_size)
    sizes = [s.size for s, _ in built] if built is not None else [shards.planned_size(g) for g in groups]  # ~4 ms
    waiting = [size for n, size in enumerate(sizes) if sender.already.get(key(version, shards.shard_name(n))) != size]
    progress.phase("uploading")
    progress.start(len(waiting) + 1, sum(waiting))  # + 1: the index
    sent: list[shards.Shard] = []
    hashed: list[local_files.Hashed] = []
    objects: list[ObjectEntry] = []
    builder = shards.BackgroundBuilder(groups, work, store.md5_part_size, shard_size) if built is None else None
    try:
        with builder if builder is not None else nullcontext(built or []) as ready:
            for shard, members in ready:
                sent.append(shard)
                hashed += members
                objects.append(ObjectEntry(shard.name, shard.size, shard.sha256))
                batch = [shard_upload(shard, key(version, shard.name), store.md5_part_size)]
                if len(sent) == len(groups):  # the last one: the index is known now and goes beside it, in parallel
                    index = write_index(work, sent, store.md5_part_size)
                    batch.append(upload_of(index, key(version, shards.INDEX_NAME), source=False))
                    objects.append(ObjectEntry(shards.INDEX_NAME, index.file.size, index.sha256))
                sender.send(batch)
                if shard.name in sender.result.copied:  # copied server-side: done as much as an uploaded one
                    progress.advance(shard.size)
                shard.path.unlink(missing_ok=True)
    finally:
        progress.finish()
    membership = {m.path: s.name for s in sent for m in s.members}
    files = [FileEntry(h.file.relative, h.file.size, h.sha256, membership[h.file.relative]) for h in hashed]
    return Manifest(version, SHARDS, files, objects), hashed  # content: the version's, unless the caller names it


def write_index(work: Path, sent: list[shards.Shard], md5_part_size: int | None) -> local_files.Hashed:
    index_path = work / shards.INDEX_NAME
    index_path.write_bytes(shards.index_json(sent))
    return local_files.hash_file(local_files.describe(index_path, shards.INDEX_NAME), md5_part_size)


def shard_upload(shard: shards.Shard, key: str, md5_part_size: int | None) -> Upload:
    upload = Upload(key, shard.path, shard.size, shard.sha256, crc32=shard.crc32)
    if md5_part_size:  # OCI checks MD5s: one more read of the shard
        md5 = local_files.hash_file(local_files.describe(shard.path, shard.name), md5_part_size).md5
        upload = replace(upload, md5=md5)
    return upload


def upload_of(hashed: local_files.Hashed, key: str, source: bool = True) -> Upload:
    """The upload of a scanned file to `key`; `source`: the user's own file, checked for changes after it lands."""
    h = hashed
    return Upload(key, h.file.path, h.file.size, h.sha256, h.md5, h.file if source else None, h.crc32)


class Sender:
    """Step 4 for one version: each object is resumed (listed with its size), copied server-side from the
    published version (same content) or uploaded, in as many batches as the caller has."""

    def __init__(self, store: ObjectStore, version: str, published: Manifest | None, result: StageResult,
                 progress: Progress, already: dict[str, int] | None = None) -> None:  # fmt: skip
        self.store, self.version, self.published, self.result, self.progress = (
            store, version, published, result, progress,
        )  # fmt: skip
        self.prefix = store.location.key(version) + "/"
        self.already = store.list_sizes(self.prefix) if already is None else already  # given: listed by the caller
        self.reusable = published.objects_by_hash() if published and store.can_copy else {}

    def sort(self, uploads: list[Upload]) -> tuple[list[tuple[str, str]], list[Upload]]:
        """What to copy (source key, key) and what to upload; resumed objects are recorded and dropped."""
        to_copy: list[tuple[str, str]] = []
        to_send: list[Upload] = []
        for upload in uploads:
            name = upload.key[len(self.prefix) :]
            if self.already.get(upload.key) == upload.size:
                self.result.resumed.append(name)
            elif upload.sha256 in self.reusable and self.published is not None:
                source = self.store.location.key(self.published.version, self.reusable[upload.sha256].name)
                to_copy.append((source, upload.key))
                self.result.copied.append(name)
            else:
                to_send.append(upload)
        return to_copy, to_send

    def send(self, uploads: list[Upload]) -> None:
        to_copy, to_send = self.sort(uploads)
        if to_copy:
            self.store.copy(to_copy)
        self.store.upload(to_send, self.landed)

    def send_all(self, uploads: list[Upload]) -> None:
        """Every object of the version at once, with its own progress phases and totals."""
        to_copy, to_send = self.sort(uploads)
        if to_copy:
            self.progress.phase("copying unchanged objects")
            self.store.copy(to_copy)
        self.progress.phase("uploading")
        self.progress.start(len(to_send), sum(u.size for u in to_send))
        try:
            self.store.upload(to_send, self.landed)
        finally:
            self.progress.finish()

    def landed(self, upload: Upload) -> None:
        if upload.source and not local_files.unchanged_since_scan(upload.source):
            raise CloudDDPError(
                f"{str(upload.path)!r} changed while it was being uploaded (size or modification time differs from "
                f"the scan). Nothing was published; stage again once nothing writes to it."
            )
        self.result.uploaded.append(upload.key[len(self.prefix) :])
        self.result.bytes_uploaded += upload.size
        self.progress.advance(upload.size)


def check_accounted(store: ObjectStore, manifest: Manifest, result: StageResult) -> None:
    """Every object of the version was resumed (listed with its size), copied or uploaded (checksum verified).

    From this stage's own bookkeeping (each upload was verified by the store as it landed); that the objects are
    still there is check_present's one LIST."""
    done = set(result.resumed) | set(result.copied) | set(result.uploaded)
    missing = [o.name for o in manifest.objects if o.name not in done]
    if missing:
        raise CloudDDPError(
            f"{len(missing)} objects of {store.location.uri(manifest.version)} were not uploaded (first: {missing[0]!r})."
            f" Nothing was published; stage again."
        )


def check_present(store: ObjectStore, manifest: Manifest) -> None:
    """Every object the manifest names is listed under the version, with its size, just before publishing.

    The uploads were verified as they landed, but another stage's `--delete` to the same prefix removes every
    other version's objects, this one's too while it is unpublished: one LIST of the version (a few objects in
    the shard layout) keeps a version with objects missing from ever being published."""
    prefix = store.location.key(manifest.version) + "/"
    listed = store.list_sizes(prefix)
    # SeaweedFS lists a key holding a backslash with a slash there instead (S3 and OCI list keys as written).
    missing = [o.name for o in manifest.objects if o.size not in listed_sizes(listed, prefix + o.name)]
    if missing:
        raise CloudDDPError(
            f"{len(missing)} of the {len(manifest.objects)} objects of version {manifest.version} "
            f"({store.location.uri(manifest.version, folder=True)}) are missing or have another size (first: "
            f"{missing[0]!r}), though this stage uploaded or found every one of them: something removed them "
            f"since, most likely a concurrent `cloudddp stage --delete` to the same prefix. Nothing was published. "
            f"Run the same command again once that is done: it resends only what is missing."
        )


def listed_sizes(listed: dict[str, int], key: str) -> set[int | None]:
    return {listed.get(key), listed.get(key.replace("\\", "/"))}


def delete_others(store: ObjectStore, version: str) -> list[str]:
    """Objects of every other version under the prefix (never anything cloudddp did not write)."""
    stale = sorted(key for name, objects in version_folders(store).items() if name != version for key in objects)
    store.delete(stale)
    return stale


def copy_folder(local: str | Path, store: ObjectStore) -> StageResult:
    """Upload the folder (or file) `local` as is under the store's prefix: no version, no manifest, no delete.

    For places a job reads by their exact name (a checkpoint folder to resume from, the source archive),
    each a fresh prefix per job. Every object is verified like a staged one."""
    files = local_files.list_files(Path(local))
    local_files.check_keys(files, store.location.key, Path(local))
    hashed = local_files.hash_files(files, md5_part_size=store.md5_part_size)
    uploads = [upload_of(h, store.location.key(h.file.relative)) for h in hashed]
    result = StageResult(uri=store.location.uri(folder=True), version="", layout=PLAIN, files=len(files))

    def landed(upload: Upload) -> None:
        result.uploaded.append(upload.key)
        result.bytes_uploaded += upload.size

    store.upload(uploads, landed)
    return result
