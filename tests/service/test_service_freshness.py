"""min_version and Grail-Min-Version as the middleware reads them (service.freshness); the waiting itself is
tested across real replicas in test_service_roles.py."""

from __future__ import annotations

import pytest

from service.errors import ServiceError
from service.freshness import _wanted


def _scope(query: bytes, *headers: tuple[bytes, bytes]) -> dict:
    return {"type": "http", "path": "/graphs/g/reachable", "query_string": query, "headers": list(headers)}


def test_the_parameter_is_read_and_taken_out_of_the_query_string() -> None:
    wanted, scope = _wanted(_scope(b"source=a&min_version=7&target=b"))
    assert wanted == 7 and scope["query_string"] == b"source=a&target=b"
    wanted, scope = _wanted(_scope(b"min%5Fversion=%209"))
    assert wanted == 9 and scope["query_string"] == b""


def test_the_header_alone_and_the_larger_of_both() -> None:
    assert _wanted(_scope(b"pairs=1,2", (b"grail-min-version", b"4")))[0] == 4
    assert _wanted(_scope(b"min_version=3", (b"grail-min-version", b"5")))[0] == 5
    assert _wanted(_scope(b"min_version=6", (b"grail-min-version", b"5")))[0] == 6


def test_without_either_the_request_is_untouched() -> None:
    scope = _scope(b"source=min_versions&target=b")
    assert _wanted(scope) == (None, scope)


@pytest.mark.parametrize("value", [b"0", b"-1", b"two", b"1.5", b"", b"9" * 19, "\u00b2".encode()])
def test_a_value_that_is_not_a_positive_integer_is_refused(value: bytes) -> None:
    with pytest.raises(ServiceError) as refused:
        _wanted(_scope(b"min_version=" + value))
    assert refused.value.status == 422
    with pytest.raises(ServiceError):
        _wanted(_scope(b"", (b"grail-min-version", value)))
