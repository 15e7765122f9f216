"""What botocore would send: the request it builds and signs, read at `before-send` and never sent."""

from __future__ import annotations

from typing import Any


class Stopped(Exception):
    pass


def request_botocore_sends(client: Any, call: str, **params: Any) -> Any:
    """The prepared request (url, headers, body) of `client.<call>(**params)`."""
    requests: list[Any] = []

    def stop(request: Any, **_: Any) -> None:
        requests.append(request)
        raise Stopped  # nothing leaves this machine

    client.meta.events.register_first("before-send", stop, unique_id="tests-request")
    try:
        getattr(client, call)(**params)
    except Stopped:
        pass
    finally:
        client.meta.events.unregister("before-send", unique_id="tests-request")
    assert requests, f"botocore built no request for {call}"
    return requests[0]


def url_botocore_sends(client: Any, call: str, **params: Any) -> str:
    """The URL of `client.<call>(**params)`, e.g. `url_botocore_sends(s3, "put_object", Bucket=..., ...)`."""
    return str(request_botocore_sends(client, call, **params).url)
