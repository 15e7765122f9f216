"""A stage to a real S3 server (SeaweedFS) through a relay that goes down mid-upload: an outage of 0.3 s is
ridden out (retries wait full jitter over 1, 2, 4, ... s, botocore's standard mode's scale for throttling;
before, over 0.1, 0.2, 0.4 ... s, and a 0.3 s outage failed the stage), a long one fails in one paragraph with nothing published,
and the same stage run again sends only what is missing."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.seaweedfs import SeaweedS3
from helpers.tcp_relay import TcpRelay

from cloudddp.errors import CloudDDPError
from cloudddp.staging import s3_http
from cloudddp.staging.engine import StageOptions, stage
from cloudddp.staging.location import parse_location
from cloudddp.staging.s3_direct import DirectS3Store, plain_configuration
from cloudddp.staging.store import Upload

FILES = 60


class GoesDownAfter(DirectS3Store):
    """Takes the relay down once `after` files are uploaded; back up `back_after` seconds later (None: never)."""

    def __init__(self, relay: TcpRelay, after: int, back_after: float | None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.relay, self.after, self.back_after, self.done = relay, after, back_after, 0
        self.single_puts.connections = 2  # two PUTs at a time: the outage comes with most files still to send

    def upload(self, uploads: list[Upload], on_done: Callable[[Upload], None]) -> None:
        def counted(upload: Upload) -> None:
            on_done(upload)
            self.done += 1
            if self.done == self.after:
                self.relay.down()
                if self.back_after is not None:
                    threading.Timer(self.back_after, self.relay.up).start()

        super().upload(uploads, counted)


@pytest.fixture
def relay(seaweed: SeaweedS3) -> Iterator[TcpRelay]:
    with TcpRelay(seaweed.port) as relay:
        yield relay


def data(root: Path) -> Path:
    for i in range(FILES):
        (root / f"c{i % 3}").mkdir(parents=True, exist_ok=True)
        (root / f"c{i % 3}" / f"{i:03d}.bin").write_bytes(os.urandom(2000 + i))
    return root


def store_through(relay: TcpRelay, seaweed: SeaweedS3, prefix: str, after: int, back_after: float | None,
                  tmp_path: Path) -> GoesDownAfter:  # fmt: skip
    plain = plain_configuration({**seaweed.env(), "AWS_ENDPOINT_URL": relay.url}, tmp_path)
    assert plain is not None
    return GoesDownAfter(relay, after, back_after, location=parse_location(f"s3://direct/{prefix}"), plain=plain)


def held(seaweed: SeaweedS3, uri: str) -> dict[str, bytes]:
    location, client = parse_location(uri), seaweed.client()
    found = client.list_objects_v2(Bucket="direct", Prefix=location.prefix + "/").get("Contents", [])
    return {o["Key"][len(location.prefix) + 1 :]: client.get_object(Bucket="direct", Key=o["Key"])["Body"].read()
            for o in found}  # fmt: skip


class Throttled:
    def is_throttling_error_from_context(self, context: object) -> bool:
        return True


@pytest.mark.parametrize("draw", [0.0, 0.37, 1.0])
def test_backoff_waits_as_botocores_standard_mode_waits_on_throttling(
    draw: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore/retries/standard.py ExponentialBackoff (botocore 1.44.8): its 1 s scale, which botocore keeps for
    throttling (50 ms for other errors since 1.44.x); s3_http.py waits so after any retryable failure."""
    from botocore.retries.standard import ExponentialBackoff, RetryContext

    monkeypatch.setattr(s3_http.random, "random", lambda: draw)
    botocore = ExponentialBackoff(random=lambda: draw, throttling_detector=Throttled())  # type: ignore[arg-type]
    for attempt in range(8):
        assert s3_http.backoff(attempt) == botocore.delay_amount(RetryContext(attempt_number=attempt + 1))
    assert s3_http.MAX_ATTEMPTS >= 3


def test_an_outage_of_a_third_of_a_second_is_ridden_out(relay: TcpRelay, seaweed: SeaweedS3, tmp_path: Path) -> None:
    folder = data(tmp_path / "data")
    store = store_through(relay, seaweed, "short-outage", after=10, back_after=0.3, tmp_path=tmp_path)
    result = stage(folder, store, StageOptions(hash_cache=None))
    assert store.done == FILES  # the outage came with 50 files still to send
    assert held(seaweed, result.uri) == {p.relative_to(folder).as_posix(): p.read_bytes()
                                         for p in folder.rglob("*.bin")}  # fmt: skip


def test_a_long_outage_fails_in_one_paragraph_and_the_rerun_sends_only_what_is_missing(
    relay: TcpRelay, seaweed: SeaweedS3, tmp_path: Path
) -> None:
    folder = data(tmp_path / "data")
    down = store_through(relay, seaweed, "long-outage", after=10, back_after=None, tmp_path=tmp_path)
    with pytest.raises(CloudDDPError) as failed:
        stage(folder, down, StageOptions(hash_cache=None))
    message = str(failed.value)
    assert "\n" not in message and "Traceback" not in message
    assert ".bin" in message and "run the same stage again" in message, message
    assert "Contents" not in seaweed.client().list_objects_v2(Bucket="direct", Prefix="long-outage/_cloudddp")
    relay.up()
    again = stage(folder, store_through(relay, seaweed, "long-outage", FILES + 1, None, tmp_path),
                  StageOptions(hash_cache=None))  # fmt: skip
    assert 10 <= len(again.resumed) < FILES and len(again.uploaded) == FILES - len(again.resumed)
    assert held(seaweed, again.uri) == {p.relative_to(folder).as_posix(): p.read_bytes()
                                        for p in folder.rglob("*.bin")}  # fmt: skip
