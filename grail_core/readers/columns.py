"""Which columns of a table hold the sources and the targets: named by the caller, or recognised by their names.

A column is recognised by a word that says its role (``source``, ``from``, ``src``, ``u``, ``caller``,
``parent``, ... and ``target``, ``to``, ``dst``, ``v``, ``callee``, ``child``, ...), alone or with words such
as ``node`` or ``id`` around it (``FromNodeId``, ``source_id``, ``src_node``), or as a numbered pair
(``node1``/``node2``, ``id_1``/``id_2``). The plain role words win over the looser ones (``start``/``end``,
``parent``/``child``, ``subject``/``object``, ...). ``head``/``tail`` are named both ways round (an edge runs
from its tail to its head in graph theory, from head to tail in knowledge-graph triples), so they must be
chosen explicitly. Whatever cannot be told apart is a ``GraphFormatError`` that says what to give: never a
guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import GraphFormatError, InvalidParameterError

__all__ = ["ColumnSpec", "choose_columns", "is_index_name", "role_of", "how_to_choose", "PARAMETERS"]

ColumnSpec = int | str | None

PARAMETERS = ("source_column", "target_column")


def how_to_choose(parameters: tuple[str, str] = PARAMETERS) -> str:
    return f"give {parameters[0]} and {parameters[1]} (a column name or a 0-based position)"


_PLAIN = ({"source", "src", "from", "u"}, {"target", "dst", "dest", "to", "v"})
_LOOSE = (
    {"caller", "parent", "start", "subject", "sender", "origin", "citing", "predecessor", "pred", "referrer"},
    {"callee", "child", "end", "object", "receiver", "destination", "cited", "successor", "succ", "referee"},
)
_BOTH_WAYS = {"head", "tail"}
_QUALIFIERS = {"id", "ids", "node", "nodes", "vertex", "name", "key", "label"}
_NUMBERED = re.compile(r"(?:node|id|n|v|vertex|nodeid)([12])")
# What pandas writes for an unnamed index (to_csv), re-reads it as, and keeps in Parquet files.
_INDEX = re.compile(r"|Unnamed: 0|__index_level_0__")


def is_index_name(name: str) -> bool:
    """Whether a first column's name is that of pandas' index."""
    return _INDEX.fullmatch(name.strip()) is not None


def _words(name: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name.strip())
    words = [w for w in re.split(r"[^0-9a-zA-Z]+", spaced.lower()) if w]
    while words and words[0] in _QUALIFIERS and len(words) > 1:
        words.pop(0)
    while words and words[-1] in _QUALIFIERS and len(words) > 1:
        words.pop()
    return words


def role_of(name: str) -> tuple[str, int] | None:
    """("source" | "target" | "both ways", tier) for a recognised column name; tier 0 is the plainest."""
    words = _words(name)
    if len(words) == 1 or (len(words) == 2 and words[1] in ("1", "2")):
        word = "".join(words)
        for tier, (sources, targets) in enumerate((_PLAIN, _LOOSE)):
            if word in sources:
                return "source", tier
            if word in targets:
                return "target", tier
        numbered = _NUMBERED.fullmatch(word)
        if numbered:
            return ("source" if numbered.group(1) == "1" else "target"), 0
        if word in _BOTH_WAYS:
            return "both ways", 0
    return None


def _listing(names: Sequence[str] | None, count: int) -> str:
    if names is None:
        return f"{count} unnamed columns"
    return "columns " + ", ".join(repr(name) for name in names)


def _resolve(spec: int | str, names: Sequence[str] | None, count: int, parameter: str) -> int:
    if isinstance(spec, bool) or not isinstance(spec, (int, str)):
        raise InvalidParameterError(f"{parameter} must be a column name or a 0-based position, got {spec!r}")
    if isinstance(spec, str) and names is not None:
        exact = [i for i, name in enumerate(names) if name == spec]
        folded = exact or [i for i, name in enumerate(names) if name.strip().lower() == spec.strip().lower()]
        if len(folded) == 1:
            return folded[0]
        if len(folded) > 1:
            raise GraphFormatError(f"{parameter}={spec!r}: {len(folded)} columns have that name; give its position")
    position = spec if isinstance(spec, int) else int(spec) if spec.strip().isdigit() else None
    if position is None:
        where = "the file has no header row" if names is None else f"the {_listing(names, count)}"
        raise GraphFormatError(f"{parameter}={spec!r} names no column ({where}); give a name or a 0-based position")
    if not 0 <= position < count:
        raise GraphFormatError(f"{parameter}={spec}: there is no column {position} ({_listing(names, count)})")
    return position


def choose_columns(
    names: Sequence[str] | None,
    count: int,
    source: ColumnSpec = None,
    target: ColumnSpec = None,
    *,
    skip_first: bool = False,
    parameters: tuple[str, str] = PARAMETERS,
) -> tuple[int, int]:
    """(source, target) positions among ``count`` columns named ``names`` (None: no header, positions only);
    ``skip_first``: the first column is an index, never an end. ``parameters``: what the caller calls the
    source and target columns, for the messages."""
    chosen = {
        role: _resolve(spec, names, count, parameter)
        for role, spec, parameter in (("source", source, parameters[0]), ("target", target, parameters[1]))
        if spec is not None
    }
    how = how_to_choose(parameters)
    if len(chosen) == 2:
        if chosen["source"] == chosen["target"]:
            raise GraphFormatError(f"{parameters[0]} and {parameters[1]} are the same column ({chosen['source']})")
        return chosen["source"], chosen["target"]
    candidates = [i for i in range(count) if not (skip_first and i == 0)]
    if names is not None:
        roles = {i: role_of(names[i]) for i in candidates}
        both_ways = [names[i] for i, role in roles.items() if role and role[0] == "both ways"]
        for tier in (0, 1):
            found = {
                kind: [i for i, role in roles.items() if role == (kind, tier) and i not in chosen.values()]
                for kind in ("source", "target")
                if kind not in chosen
            }
            if not any(found.values()):
                continue
            found |= {kind: [position] for kind, position in chosen.items()}
            if len(found["source"]) == 1 and len(found["target"]) == 1:
                return found["source"][0], found["target"][0]
            raise GraphFormatError(
                f"cannot tell the source and target columns apart among the {_listing(names, count)}: {how}"
            )
        if both_ways:
            raise GraphFormatError(
                f"the {_listing(names, count)} name the ends of an edge by head and tail, which run both ways round "
                f"(graph theory: from tail to head; knowledge-graph triples: from head to tail): {how}"
            )
    if len(candidates) == 2:
        first, second = candidates
        if "source" in chosen:
            return chosen["source"], second if chosen["source"] == first else first
        if "target" in chosen:
            return (second if chosen["target"] == first else first), chosen["target"]
        return first, second
    if names is None and not chosen and count > 2 and not skip_first:
        return 0, 1  # an edge list's first two columns; the rest are its data (weights, labels)
    raise GraphFormatError(f"cannot tell which of the {_listing(names, count)} hold the edges: {how}")
