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


@schemathesis.hook
def filter_query(context: Any, query: Any) -> bool:
    """No object, and no list of fewer than two items, for a query parameter that is not an array: the query
    string writes ``{}`` as the text ``{}`` and ``["a"]`` as ``a``, requests the schema allows, which the
    negative phase would count as invalid ones accepted."""
    if not query or context.operation is None:
        return True
    parameters = context.operation.definition.raw.get("parameters", [])
    arrays = {p["name"] for p in parameters if p.get("in") == "query" and _is_array(p.get("schema", {}))}
    for name, value in query.items():
        if name in arrays:
            continue
        if isinstance(value, dict) or (isinstance(value, list) and len(value) < 2):
            return False
    return True


def _is_array(schema: dict[str, Any]) -> bool:
    options = [schema, *schema.get("anyOf", []), *schema.get("oneOf", [])]
    return any(option.get("type") == "array" for option in options)
