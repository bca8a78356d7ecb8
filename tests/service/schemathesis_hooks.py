"""What JSON Schema cannot say about a body, taught to schemathesis: a binary body whose schema has
``x-multiple-of-bytes`` (the query batch's int64 pairs, 16 bytes each) is generated as whole pairs where the
data is meant to be valid. Loaded by tests/service/test_service_schemathesis.py (SCHEMATHESIS_HOOKS)."""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.transport.serialization import Binary


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive or not isinstance(case.body, (bytes, Binary)):
        return case
    content = case.operation.definition.raw.get("requestBody", {}).get("content", {})
    unit = content.get(case.media_type or "", {}).get("schema", {}).get("x-multiple-of-bytes")
    if unit:
        data = case.body.data if isinstance(case.body, Binary) else case.body
        case.body = Binary(data[: len(data) - len(data) % unit])
    return case
