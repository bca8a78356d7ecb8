"""The name tables against a dict: interning in order of first appearance, lookups of every input form,
unknown names, growth across chunks, the files, and the edge cases (NUL, empty, surrogates, booleans, int64)."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core import GraphFormatError, IndexFileError, UnknownNodeError
from grail_core import names as module
from grail_core.names import NameInterner, NameTokens, NodeNames, intern_integers, intern_strings, utf8_error

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INT64 = st.integers(-(2**63), 2**63 - 1)
EXTREMES = st.sampled_from([-(2**63), -(2**63) + 1, -1, 0, 1, 2**31, 2**63 - 2, 2**63 - 1])
KEYS = st.lists(st.one_of(INT64, EXTREMES, st.integers(-50, 50)), min_size=1, max_size=300)
# Any code point but surrogates (names are UTF-8), NUL and the empty string included.
TEXT = st.one_of(st.text(max_size=12), st.sampled_from(["", "\0", "a", "a\0", "\0a", "é", "e\u0301", "東京", "😀"]))


def first_appearance(values: list) -> dict:
    table: dict = {}
    for value in values:
        table.setdefault(value, len(table))
    return table


def saved_and_loaded(names: NodeNames) -> NodeNames:
    return NodeNames.from_arrays(names.size, names.metadata(), names.to_arrays())


@SETTINGS
@given(values=KEYS, probes=st.lists(st.one_of(INT64, EXTREMES), max_size=50), chunk=st.integers(1, 40))
def test_integer_names_match_a_dict(values: list[int], probes: list[int], chunk: int) -> None:
    expected = first_appearance(values)
    interner = NameInterner()
    ids = np.concatenate([interner.add_integers(np.array(values[i : i + chunk])) for i in range(0, len(values), chunk)])
    names = interner.finish()
    assert ids.tolist() == [expected[v] for v in values]
    assert names.size == len(expected) and names.names_of(range(names.size)) == list(expected)
    for table in (names, saved_and_loaded(names)):
        known = list(expected)
        assert table.lookup(np.array(known)).tolist() == list(range(len(known)))
        assert table.lookup(NameTokens.from_strings([str(v) for v in known])).tolist() == list(range(len(known)))
        assert table.lookup(np.array([str(v) for v in known])).tolist() == list(range(len(known)))
        assert table.lookup(known).tolist() == list(range(len(known)))
        for probe in probes:
            if probe in expected:
                assert table.lookup_one(probe) == table.lookup_one(str(probe)) == expected[probe]
            else:
                with pytest.raises(UnknownNodeError) as caught:
                    table.lookup(np.array([known[0], probe]))
                assert caught.value.name == probe
                with pytest.raises(UnknownNodeError):
                    table.lookup_one(str(probe))


@SETTINGS
@given(values=st.lists(TEXT, min_size=1, max_size=200), probes=st.lists(TEXT, max_size=30), chunk=st.integers(1, 40))
def test_string_names_match_a_dict(values: list[str], probes: list[str], chunk: int) -> None:
    interner = NameInterner()
    if "" in values:  # an empty name is never interned: the readers refuse it, naming the line
        first_empty = values.index("")
        with pytest.raises(GraphFormatError, match="empty") as caught:
            interner.add_strings(NameTokens.from_strings(values), lines=lambda position: position + 1)
        assert caught.value.line == first_empty + 1
        return
    expected = first_appearance(values)
    parts = [values[i : i + chunk] for i in range(0, len(values), chunk)]
    ids = np.concatenate([interner.add_strings(NameTokens.from_strings(part)) for part in parts])
    names = interner.finish()
    assert ids.tolist() == [expected[v] for v in values]
    assert names.names_of(range(names.size)) == list(expected)
    assert names.nbytes < 64 * names.size + 2 * sum(len(v.encode()) for v in expected) + 1024
    for table in (names, saved_and_loaded(names)):
        known = list(expected)
        assert table.lookup(NameTokens.from_strings(known)).tolist() == list(range(len(known)))
        assert table.lookup(known).tolist() == list(range(len(known)))
        # numpy's str arrays drop trailing NULs, so only names without one come through them intact.
        plain = [v for v in known if not v.endswith("\0")]
        assert table.lookup(np.array(plain, dtype=str)).tolist() == [expected[v] for v in plain]
        for probe in probes:
            if probe in expected:
                assert table.lookup_one(probe) == expected[probe]
            else:
                with pytest.raises(UnknownNodeError) as caught:
                    table.lookup([known[0], probe])
                assert caught.value.name == probe


def test_tables_grow_past_many_rehashes() -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(-(2**63), 2**63 - 1, size=50_000, dtype=np.int64)
    stream = values[rng.integers(0, values.size, size=200_000)]
    names, ids = intern_integers(stream)
    assert np.array_equal(names.keys[ids], stream)
    assert names.slots.shape[0] >= 4 * names.size / 3  # a load of at most 3/4
    words = [f"w{v:x}" for v in values[:20_000]]
    tokens = NameTokens.from_strings(words + words[::-1])
    strings, ids = intern_strings(tokens)
    assert strings.size == len(set(words)) and ids[: len(words)].tolist() == ids[len(words) :][::-1].tolist()
    assert strings.names_of(ids[:5]) == words[:5]


def test_integer_columns_naming_exactly_0_to_n_minus_1_are_the_range() -> None:
    names, ids = intern_integers(np.array([3, 0, 2, 1, 3]))
    assert names.kind == "range" and ids.tolist() == [3, 0, 2, 1, 3]
    assert intern_integers(np.array([3, 0, 2]))[0].kind == "int"  # 1 is missing
    assert intern_integers(np.array([1, 2]))[0].kind == "int"


def test_trailing_nul_makes_another_name() -> None:
    names, ids = intern_strings(NameTokens.from_strings(["a", "a\0", "a\0\0", "\0a", "a"]))
    assert ids.tolist() == [0, 1, 2, 3, 0]
    assert [names.lookup_one(n) for n in ("a", "a\0", "a\0\0", "\0a")] == [0, 1, 2, 3]
    with pytest.raises(UnknownNodeError):
        names.lookup_one("a\0\0\0")


def test_booleans_are_never_names() -> None:
    integers = intern_integers(np.array([1, 0, 5]))[0]
    strings = intern_strings(NameTokens.from_strings(["True", "1"]))[0]
    for table in (integers, strings):
        for query in (True, np.bool_(False)):
            with pytest.raises(UnknownNodeError) as caught:
                table.lookup_one(query)
            assert caught.value.name is bool(query)
        with pytest.raises(UnknownNodeError) as caught:
            table.lookup([[1, True]])  # not np.asarray's [[1, 1]] nor [['1', 'True']]
        assert caught.value.name is True
        with pytest.raises(UnknownNodeError):
            table.lookup(np.array([True]))
    assert strings.lookup([1, "True"]).tolist() == [1, 0]  # an integer is read as its decimal string


@pytest.mark.parametrize("kind", ["range", "int", "str"])
def test_integers_outside_int64_are_unknown_names(kind: str) -> None:
    table = {
        "range": NodeNames.identity(3),
        "int": intern_integers(np.array([2**63 - 1, -(2**63), 0]))[0],
        "str": intern_strings(NameTokens.from_strings(["0", "9223372036854775807"]))[0],
    }[kind]
    for outside in (2**63, -(2**63) - 1, 2**64, 10**30):
        with pytest.raises(UnknownNodeError) as caught:
            table.lookup([[0, outside]])
        assert caught.value.name == outside
        with pytest.raises(UnknownNodeError):
            table.lookup_one(outside)
        with pytest.raises(UnknownNodeError) as caught:
            table.lookup(NameTokens.from_strings(["0", str(outside)]))
        assert caught.value.name == str(outside)
    with pytest.raises(UnknownNodeError) as caught:
        table.lookup(np.array([0, 2**64 - 1], dtype=np.uint64))
    assert caught.value.name == 2**64 - 1


def test_decimal_strings_are_an_optional_sign_and_ascii_digits() -> None:
    table = intern_integers(np.array([7, -7, 0, 12]))[0]
    assert table.lookup(NameTokens.from_strings(["+7", "-7", "007", "-0", "12"])).tolist() == [0, 1, 0, 2, 3]
    for text in (" 7", "7 ", "7.0", "1_2", "\u0667", "0x7", "", "+", "-", "++7"):
        with pytest.raises(UnknownNodeError) as caught:
            table.lookup(NameTokens.from_strings(["7", text]))
        assert caught.value.name == text
        with pytest.raises(UnknownNodeError):
            table.lookup_one(text)
    assert table.lookup(np.array([7.0, 12.0])).tolist() == [0, 3]  # integral floats, as numpy files hold them
    with pytest.raises(UnknownNodeError):
        table.lookup(np.array([7.5]))


def test_lone_surrogates_and_invalid_utf8_are_unknown_names() -> None:
    table = intern_strings(NameTokens.from_strings(["a", "\ufffd"]))[0]
    with pytest.raises(UnknownNodeError) as caught:
        table.lookup(["a", "\ud801"])
    assert caught.value.name == "\ud801"
    with pytest.raises(UnknownNodeError):
        table.lookup_one("\ud801")
    raw = NameTokens(np.frombuffer(b"a\xff", dtype=np.uint8), np.array([0, 1]), np.array([1, 2]))
    with pytest.raises(UnknownNodeError) as caught:
        table.lookup(raw)
    assert caught.value.name == "\ufffd"  # reported readably; it did not match the name U+FFFD
    assert utf8_error(raw.data) == 1


def test_interning_refuses_long_and_invalid_names_naming_the_line() -> None:
    tokens = NameTokens.from_strings(["ok", "x" * 5000, "fine"])
    with pytest.raises(GraphFormatError, match=r"5000 bytes.*4096") as caught:
        intern_strings(tokens, lines=np.array([10, 11, 12]))
    assert caught.value.line == 11
    assert intern_strings(tokens, max_name_bytes=5000)[0].size == 3
    bad = NameTokens(np.frombuffer(b"ok\xc3(", dtype=np.uint8), np.array([0, 2]), np.array([2, 4]))
    with pytest.raises(GraphFormatError, match="UTF-8") as caught:
        intern_strings(bad, lines=lambda position: 40 + position)
    assert caught.value.line == 41


def test_arrow_layout_and_int32_offsets() -> None:
    data = np.frombuffer(b"xxalphabetagamma", dtype=np.uint8)
    offsets = np.array([2, 7, 11, 16], dtype=np.int32)  # a sliced Arrow array: offsets need not start at 0
    names, ids = intern_strings(NameTokens.from_offsets(data, offsets))
    assert names.names_of(ids) == ["alpha", "beta", "gamma"]
    backwards = NameTokens(data, offsets[:-1][::-1], offsets[1:][::-1])  # strided int32 spans
    assert names.lookup(backwards).tolist() == [2, 1, 0]


def test_an_interner_takes_one_kind_and_finishes_once() -> None:
    interner = NameInterner()
    interner.add_integers(np.array([1, 2]))
    with pytest.raises(ValueError, match="integers or all strings"):
        interner.add_strings(NameTokens.from_strings(["a"]))
    assert interner.finish().size == 2
    with pytest.raises(ValueError):
        interner.add_integers(np.array([3]))


def test_damaged_name_arrays_are_refused() -> None:
    names = intern_strings(NameTokens.from_strings(["a", "bb", "ccc"]))[0]
    arrays = names.to_arrays()
    for name, damaged in (
        ("names_slots", arrays["names_slots"][:-1]),
        ("names_offsets", arrays["names_offsets"][:-1]),
        ("names_data", arrays["names_data"][:-1]),
    ):
        with pytest.raises(IndexFileError):
            NodeNames.from_arrays(names.size, names.metadata(), arrays | {name: damaged})
    with pytest.raises(IndexFileError):
        NodeNames.from_arrays(names.size, names.metadata() | {"kind": "float"}, arrays)


@pytest.mark.parametrize(
    "array", [np.array([5, -3, 2**40]), np.array(["b", "a", "ab", "é"]), np.empty(0, dtype=np.int64)]
)
def test_sorted_arrays_of_format_version_1_keep_their_ranks(array: np.ndarray) -> None:
    size = array.size or 4
    names = NodeNames.from_sorted_array(size, np.sort(array))
    assert names.names_of(range(size)) == (np.sort(array).tolist() if array.size else list(range(size)))
    assert names.lookup(np.sort(array) if array.size else np.arange(size)).tolist() == list(range(size))


# The kernels' byte-level helpers against Python: a wrong answer here would hide behind the 64-bit hashes.

BYTES = st.binary(max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    a=BYTES,
    change=st.none() | st.tuples(st.integers(0, 39), st.integers(1, 255)),
    pads=st.tuples(*[st.integers(0, 9)] * 2),
)
def test_byte_comparison_and_hash_match_python(a: bytes, change: tuple[int, int] | None, pads: tuple[int, int]) -> None:
    from grail_core.names import _hash_bytes, _same_bytes

    b = bytearray(a)
    if change is not None and a:
        b[change[0] % len(a)] ^= change[1]  # the same length, one byte different (or none)
    pad_a, pad_b = pads
    buffer_a = np.frombuffer(b"\xaa" * pad_a + a + b"\xbb" * 9, dtype=np.uint8)
    buffer_b = np.frombuffer(b"\xcc" * pad_b + bytes(b) + b"\xdd" * 9, dtype=np.uint8)
    assert _same_bytes(buffer_a, pad_a, buffer_b, pad_b, len(a)) == (a == b)
    seed = np.uint64(12345)
    hash_a = _hash_bytes(buffer_a, pad_a, pad_a + len(a), seed)
    # The hash depends on the bytes alone, not on where they lie; equal bytes hash alike.
    assert hash_a == _hash_bytes(np.frombuffer(a + b"\x00" * 8, dtype=np.uint8), 0, len(a), seed)
    assert (hash_a == _hash_bytes(buffer_b, pad_b, pad_b + len(a), seed)) == (a == b)


@settings(max_examples=500, deadline=None)
@given(raw=st.one_of(st.binary(max_size=12), st.text(max_size=6).map(lambda t: t.encode())))
def test_utf8_check_matches_python(raw: bytes) -> None:
    data = b"ascii text, then " + raw + b" and more"
    try:
        data.decode("utf-8")
        error = None
    except UnicodeDecodeError as caught:
        error = caught.start
    assert utf8_error(np.frombuffer(data, dtype=np.uint8)) == error


@settings(max_examples=200, deadline=None)
@given(
    text=st.one_of(
        st.from_regex(r"[+-]?[0-9]{1,22}", fullmatch=True),
        st.text(alphabet="+-0123456789 _.x", max_size=8),
        st.integers(-(2**64), 2**64).map(str),
    ),
    size=st.integers(1, 30),
)
def test_decimal_text_matches_python_int(text: str, size: int) -> None:
    digits = text[1:] if text[:1] in "+-" else text
    value = int(text) if digits.isdigit() and -(2**63) <= int(text) < 2**63 else None
    for table in (intern_integers(np.array([value if value is not None else 1, 1]))[0], NodeNames.identity(size)):
        tokens = NameTokens.from_strings([text])
        known = value is not None and (table.kind == "int" or 0 <= value < table.size)
        if known:
            expected = 0 if table.kind == "int" else value
            assert table.lookup(tokens).tolist() == [expected] and table.lookup_one(text) == expected
        else:
            with pytest.raises(UnknownNodeError):
                table.lookup(tokens)
            with pytest.raises(UnknownNodeError):
                table.lookup_one(text)


def test_a_lookup_uses_no_more_threads_than_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup of a few names (one per update or request) runs on the calling thread alone: on a loaded
    machine, waiting for numba's pool to be scheduled costs far more than the lookup."""
    table = NodeNames.from_sorted_array(5000, np.array([f"n{i}" for i in range(5000)]))
    threads_seen: list[int] = []
    kernel = module._lookup_tokens

    def spy(*args: object) -> int:
        threads_seen.append(numba.get_num_threads())
        return kernel(*args)

    monkeypatch.setattr(module, "_lookup_tokens", spy)
    few = ["n3", "n4999"]
    many = [f"n{i}" for i in range(module._BLOCK + 1)]
    assert list(table.lookup_list(few)) == [table.lookup_one(name) for name in few]
    assert table.lookup_list(many).size == len(many)
    assert threads_seen == [1, min(2, numba.get_num_threads())]
    assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS
