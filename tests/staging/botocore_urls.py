"""Where botocore would send a request: the URL it builds and signs, read at `before-send` and never sent."""

from __future__ import annotations

from typing import Any


class Stopped(Exception):
    pass


def url_botocore_sends(client: Any, call: str, **params: Any) -> str:
    """The URL of `client.<call>(**params)`, e.g. `url_botocore_sends(s3, "put_object", Bucket=..., ...)`."""
    urls: list[str] = []

    def stop(request: Any, **_: Any) -> None:
        urls.append(request.url)
        raise Stopped  # nothing leaves this machine

    client.meta.events.register_first("before-send", stop, unique_id="tests-url")
    try:
        getattr(client, call)(**params)
    except Stopped:
        pass
    finally:
        client.meta.events.unregister("before-send", unique_id="tests-url")
    assert urls, f"botocore built no request for {call}"
    return urls[0]
