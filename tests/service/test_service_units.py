"""The service's small pure parts: settings, Content-Type mapping, pairs codecs (no server needed)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grail_core.names import NameTokens
from service.client import content_type_for, format_for_path
from service.codecs import answer_type, decode_pairs, encode_answers, parse_get_pairs
from service.context import NO_REQUEST, request_id
from service.errors import ServiceError
from service.formats import format_for
from service.settings import Settings, SettingsError
from service.textscan import json_pairs
from service.update_queue import UpdateQueue, batch_request_id
from service.wire import json_answers, media_type, narrowest_width, pack_answers, unpack_answers


def test_settings_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Defaults < .env in the working directory < GRAIL_* variables < flags."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.upper().startswith("GRAIL_"):
            monkeypatch.delenv(name)
    assert Settings.from_env().port == 8000 and Settings.from_env().log_format == "text"
    (tmp_path / ".env").write_text("GRAIL_PORT=7000\nGRAIL_BACKEND=cpu\nGRAIL_LOG_LEVEL=WARNING\n")
    from_file = Settings.from_env()
    assert (from_file.port, from_file.backend, from_file.log_level) == (7000, "cpu", "warning")
    monkeypatch.setenv("GRAIL_PORT", "9000")
    monkeypatch.setenv("GRAIL_DATA_DIR", "/srv/grail")
    monkeypatch.setenv("GRAIL_MAX_UPLOAD_MB", "5")
    from_env = Settings.from_env()
    assert (from_env.port, from_env.data_dir, from_env.backend, from_env.max_upload_bytes) == (
        9000,
        Path("/srv/grail"),
        "cpu",
        5 * 1024 * 1024,
    )
    flags = Settings.from_args(["--port", "9100", "--host", "0.0.0.0", "--log-format", "json"])
    assert (flags.port, flags.host, flags.data_dir, flags.log_format) == (9100, "0.0.0.0", Path("/srv/grail"), "json")


def test_settings_errors_name_their_source(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRAIL_PORT", "eighty")
    with pytest.raises(SettingsError, match=r"^GRAIL_PORT: .*integer.*'eighty'"):
        Settings.from_env()
    with pytest.raises(SettingsError, match=r"^--build-workers: .*greater than or equal to 1"):
        Settings.from_args(["--build-workers", "0", "--port", "1"])
    monkeypatch.delenv("GRAIL_PORT")
    (tmp_path / ".env").write_text("GRAIL_BACKEND=tpu\n")
    with pytest.raises(SettingsError, match=r"^GRAIL_BACKEND in .*\.env: .*'auto', 'cpu' or 'cuda'"):
        Settings.from_env()
    with pytest.raises(SystemExit):  # argparse's own refusal, with the choices, on stderr
        Settings.from_args(["--backend", "tpu"])


def test_serve_reports_bad_settings_without_a_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "GRAIL_MAX_GET_PAIRS": "-3"}
    done = subprocess.run(
        [sys.executable, "-m", "service.main"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.startswith("grail-serve: GRAIL_MAX_GET_PAIRS:") and "Traceback" not in done.stderr


def test_numba_cache_folder_follows_the_sources(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Kernels compiled from other sources are never loaded: the default cache folder is one per digest of
    the sources, which any change of any file changes (numba itself checks a kernel's own file only)."""
    from service.main import numba_cache_dir, sources_digest

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.py").write_text("y = 2\n")
    before = sources_digest([package])
    assert sources_digest([package]) == before
    (package / "sub" / "b.py").write_text("y = 3\n")
    changed = sources_digest([package])
    assert changed != before
    (package / "sub" / "b.py").rename(package / "b.py")
    assert sources_digest([package]) not in (before, changed)
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    default = numba_cache_dir()
    assert default.parent == tmp_path / "cache" / "grail" / "numba" and len(default.name) == 16
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "given"))
    assert numba_cache_dir() == tmp_path / "given" / default.name
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(numba_cache_dir()))
    assert numba_cache_dir() == tmp_path / "given" / default.name


def test_format_from_content_type() -> None:
    assert format_for(None, "text/x-grail-gra", None) == "gra"
    assert format_for(None, "text/csv; charset=utf-8", "gzip") == "edgelist"
    assert format_for(None, "text/tab-separated-values", None) == "edgelist"
    assert format_for(None, "application/json", None) == "json"
    assert format_for(None, "text/plain", None) is None
    assert format_for("json", "text/csv", None) == "json"
    with pytest.raises(ServiceError) as info:
        format_for(None, "image/png", None)
    assert info.value.status == 415
    with pytest.raises(ServiceError):
        format_for(None, "text/csv", "br")
    assert content_type_for("a/b.gra.gz") == ("text/x-grail-gra", "gzip")
    assert content_type_for("edges.tsv") == ("text/tab-separated-values", None)
    assert content_type_for("edges") == ("text/plain", None)
    # The formats of pyarrow, GraphML and Matrix Market by their media types; DOT and GEXF refused by theirs.
    assert format_for(None, "application/vnd.apache.parquet", None) == "parquet"
    assert format_for(None, "application/vnd.apache.arrow.stream", None) == "arrow"
    assert format_for(None, "application/graphml+xml", None) == "graphml"
    assert format_for(None, "text/x-matrix-market", None) == "mtx"
    for refused in ("text/vnd.graphviz", "application/gexf+xml"):
        with pytest.raises(ServiceError) as info:
            format_for(None, refused, None)
        assert info.value.status == 415 and "parquet, arrow, graphml, mtx, adjlist" in info.value.detail
    assert content_type_for("g.parquet") == ("application/vnd.apache.parquet", None)
    assert content_type_for("G.GraphML.gz") == ("application/graphml+xml", "gzip")
    assert format_for_path("g.adjlist.gz") == "adjlist" and format_for_path("g.csv") is None


def test_pairs_codecs() -> None:
    assert parse_get_pairs("1,2;a,b;", 10) == [("1", "2"), ("a", "b")]
    for bad in ("", "1,2;3", "1,,2", ",2"):
        with pytest.raises(ServiceError):
            parse_get_pairs(bad, 10)
    with pytest.raises(ServiceError):
        parse_get_pairs("1,2;3,4", 1)
    pairs = np.array([[1, 2], [3, 4]], dtype="<i8")
    assert np.array_equal(decode_pairs(pairs.tobytes(), "application/octet-stream"), pairs)
    assert texts(decode_pairs(b'{"pairs": [[1, "x"]]}', "application/json")) == ["1", "x"]
    assert texts(decode_pairs(b"1 2\n x\ty \n", "text/plain")) == ["1", "2", "x", "y"]
    answers = np.array([True, False, True])
    assert encode_answers(answers, "text/plain") == b"1\n0\n1\n"
    assert encode_answers(answers, "application/octet-stream") == b"\x01\x00\x01"
    assert encode_answers(answers, "application/octet-stream; width=1") == b"\xa0"
    assert answer_type("text/plain, application/json") == "text/plain"
    assert answer_type("application/json, text/plain") == "application/json"
    assert answer_type("*/*, application/octet-stream") == "application/json"
    assert answer_type(None) == answer_type("*/*") == "application/json"
    assert answer_type("text/plain;q=0, */*") == "application/json"  # q=0 excludes, even behind a wildcard
    assert answer_type("text/plain;q=0.5, application/octet-stream;q=0.9") == "application/octet-stream"
    for unacceptable in ("image/png", "text/plain;q=0"):
        with pytest.raises(ServiceError) as info:
            answer_type(unacceptable)
        assert info.value.status == 406
    assert answer_type("application/octet-stream") == answer_type("application/octet-stream; width=8; q=0.9")
    assert answer_type("Application/Octet-Stream; Width=1") == "application/octet-stream; width=1"
    for bad in ("application/octet-stream; width=2", "application/octet-stream; width=x"):
        with pytest.raises(ServiceError) as info:
            answer_type(bad)
        assert info.value.status == 406 and "width" in info.value.detail


def test_binary_pairs_of_each_width() -> None:
    pairs = np.array([[0, 5], [-3, 32767], [-32768, 1]])
    for width, dtype in ((16, "<i2"), (32, "<i4"), (64, "<i8")):
        body = pairs.astype(dtype).tobytes()
        decoded = decode_pairs(body, f"application/octet-stream; width={width}")
        assert decoded.dtype == np.dtype(dtype) and np.array_equal(decoded, pairs)
        # One name short of whole pairs: refused with the width and the length in the message.
        with pytest.raises(ServiceError) as info:
            decode_pairs(body[: -width // 8], f"application/octet-stream; width={width}")
        assert info.value.status == 422 and str(len(body) - width // 8) in info.value.detail
    assert np.array_equal(decode_pairs(pairs.astype("<i8").tobytes(), "application/octet-stream"), pairs)
    for bad in ("8", "24", "sixteen"):
        with pytest.raises(ServiceError) as info:
            decode_pairs(b"", f"application/octet-stream; width={bad}")
        assert info.value.status == 415 and "width" in info.value.detail


def test_wire_helpers() -> None:
    assert media_type(' Application/Octet-Stream ; Width="32" ; q=1') == (
        "application/octet-stream",
        {"width": "32", "q": "1"},
    )
    assert narrowest_width(np.array([[0, 32767], [-32768, 1]])) == 16
    assert narrowest_width(np.array([[0, 32768]])) == 32
    assert narrowest_width(np.array([[-(2**31), 2**31 - 1]])) == 32
    assert narrowest_width(np.array([[0, 2**31]])) == 64
    assert narrowest_width(np.array([[0, 2**64 - 1]], dtype=np.uint64)) is None
    assert narrowest_width(np.zeros((0, 2), dtype=np.int64)) == 16
    rng = np.random.default_rng(3)
    for count in (0, 1, 7, 8, 9, 1000):
        answers = rng.random(count) < 0.5
        for width in (1, 8):
            packed = pack_answers(answers, width).tobytes()
            assert len(packed) == ((count + 7) // 8 if width == 1 else count)
            assert np.array_equal(unpack_answers(packed, count, width), answers)
    with pytest.raises(ValueError):
        unpack_answers(b"\x00\x00", 7, 1)
    for count in (0, 1, 2, 1001):
        answers = rng.random(count) < 0.5
        body = json.loads(json_answers(answers, {"pairs": count}))
        assert body == {"reachable": answers.tolist(), "stats": {"pairs": count}}


def texts(tokens: NameTokens) -> list[str]:
    return [tokens.text(i) for i in range(len(tokens))]


def test_text_pairs_are_split_at_ascii_whitespace() -> None:
    assert texts(decode_pairs(b" 1\t2\r\n3 4\n\n", "text/plain")) == ["1", "2", "3", "4"]
    # Names as written: the index reads them (decimal integers on integer graphs) or reports them unknown.
    body = "1.5 2\n0x10 a\u00a0b\n99999999999999999999 \x001\n".encode()
    assert texts(decode_pairs(body, "text/plain")) == ["1.5", "2", "0x10", "a\u00a0b", "99999999999999999999", "\x001"]
    for odd in (b"1 2\n3\n", b"a b\nc\n"):
        with pytest.raises(ServiceError) as info:
            decode_pairs(odd, "text/plain")
        assert info.value.status == 422 and "3 names" in info.value.detail
    with pytest.raises(ServiceError) as info:
        decode_pairs(b"ok \xe9t\xe9\n", "text/plain")
    assert info.value.status == 422 and info.value.kind == "BadText" and "name 2" in info.value.detail


JSON_NAMES = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=6), st.sampled_from(["\0", "\\", '"', "\ud801"]))


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(JSON_NAMES, JSON_NAMES), max_size=6),
    indent=st.sampled_from([None, 0, 2]),
    ensure_ascii=st.booleans(),
)
def test_json_pairs_scanner_agrees_with_the_json_module(pairs: list, indent: int | None, ensure_ascii: bool) -> None:
    body = json.dumps({"pairs": pairs}, indent=indent, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")
    tokens = json_pairs(body)
    if not ensure_ascii and any("\ud801" in str(name) for pair in pairs for name in pair):
        assert tokens is None  # a raw surrogate is not UTF-8: json.loads refuses the body
        return
    assert tokens is not None
    # Integers as their decimal text; strings exactly, lone surrogates included.
    assert texts(tokens) == [str(name) for pair in pairs for name in pair]
    assert texts(decode_pairs(body, "application/json")) == texts(tokens)


def test_json_pairs_other_documents_take_the_json_module() -> None:
    for other in ([[1, "a"], [2.5, 3]], [[1e20, 2]]):
        body = json.dumps({"pairs": other}).encode()
        assert json_pairs(body) is None and decode_pairs(body, "application/json") == json.loads(body)["pairs"]
    for not_names in ([[True, 1]], [[None, 1]], [[[1], 2]]):
        body = json.dumps({"pairs": not_names}).encode()
        assert json_pairs(body) is None
        with pytest.raises(ServiceError) as info:
            decode_pairs(body, "application/json")
        assert info.value.status == 422
    assert json_pairs(b'{"pairs": [[-0, 1]]}') is None  # read by json.loads as 0
    for body in (b'{"pairs": [[1, 2]], "x": 1}', b'{"x": 1, "pairs": [[1, 2]]}', b'\xef\xbb\xbf{"pairs": []}'):
        assert json_pairs(body) is None
    assert len(json_pairs(b' { "pairs" : [ ] } ')) == 0
    for bad in (b'{"pairs": [[1, 2, 3]]}', b'{"pairs": [[1], [2, 3]]}', b'{"pairs": [[[1, 2]]]}', b'{"x": 1}'):
        with pytest.raises(ServiceError):
            decode_pairs(bad, "application/json")
    for broken in (
        b'{"pairs": [["a\xff", "b"]]}',
        b'{"pairs": [["a\x01", "b"]]}',
        b'{"pairs": [["a", "b"]]',
        b'{"pairs": [["\\x", "b"]]}',
    ):
        assert json_pairs(broken) is None
        with pytest.raises(ServiceError) as info:
            decode_pairs(broken, "application/json")
        assert info.value.status == 422


def test_client_sends_string_pairs_as_text_only_where_text_keeps_them_apart() -> None:
    from service.client import _batch

    text = _batch([["a", "b"], ("東京", "x\0")], None)
    assert text.headers["Content-Type"] == "text/plain" and text.body == "a b 東京 x\0\n".encode()
    assert texts(decode_pairs(text.body, "text/plain")) == ["a", "b", "東京", "x\0"]
    assert _batch(np.array([["a", "b"]]), None).headers["Content-Type"] == "text/plain"
    for pairs in ([["a b", "c"]], [["a", ""]], [["", "a"]], [["a\tb", "c"]], [["a\nb", "c"]], [["a\u00a0", "\ud801"]]):
        batch = _batch(pairs, None)
        assert batch.headers["Content-Type"] == "application/json" and json.loads(batch.body)["pairs"] == pairs
    with pytest.raises(ValueError):  # not pairs: numpy refuses the ragged list, as before
        _batch([["a", "b", "c"], ["d"]], None)
    assert _batch([[1, "b"]], None).headers["Content-Type"] == "application/json"


def test_text_logs_escape_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from service.logs import configure_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure_logging("info", "text")
        logging.getLogger("grail.test").info("graph %s uploaded", "x\n2026-01-01 00:00:00,000 INFO forged\u2028y")
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "\\n2026-01-01" in err and "\\u2028" in err


def test_machine_defaults_fit_the_machine() -> None:
    from service.machine import memory_bytes
    from service.settings import machine_defaults

    defaults = machine_defaults()
    memory_mb = memory_bytes() >> 20
    assert defaults["max_build_memory_mb"] <= memory_mb // 2 + 64
    assert defaults["max_graph_mb"] <= defaults["max_build_memory_mb"]
    assert defaults["max_upload_mb"] <= min(defaults["max_graph_mb"], 1024)
    chosen = Settings(max_build_memory_mb=400)
    assert (chosen.max_graph_mb, chosen.max_upload_mb) == (100, 100)  # they follow a given build memory


def test_build_estimates() -> None:
    from grail_core import sizing

    lines = b"0 1\n" * (1 << 18)  # the bomb: two names, short lines
    bomb = sizing.estimate(lines, 256 << 20)
    assert bomb.edges == 64 << 20 and bomb.nodes < 1000 and bomb.bytes > 64 * 100 << 20
    gra = sizing.estimate(b"graph_for_greach\n3\n0: 1 2 #\n1: #\n2: #\n", 36)
    assert (gra.format, gra.nodes, gra.edges) == ("gra", 3, 2)
    json_graph = sizing.estimate(b'{"edges": [[0, 1], [1, 2]]}', 27)
    assert (json_graph.format, json_graph.edges, json_graph.nodes) == ("json", 2, 2)


def test_admission_caps_concurrent_batches_and_uploads() -> None:
    from service.guards import Admission

    admission = Admission(max_uploads=1, batch_memory_bytes=100)
    with admission.batch(60):
        with pytest.raises(ServiceError) as busy:
            with admission.batch(60):
                pass
        assert busy.value.status == 503 and busy.value.headers["Retry-After"] and busy.value.kind == "Overloaded"
        with admission.batch(40):  # what is left fits
            pass
    with admission.batch(100):  # all of it, once the others are done
        pass
    with pytest.raises(ServiceError) as too_large:
        with admission.batch(101):
            pass
    assert too_large.value.status == 413
    with admission.upload():
        with pytest.raises(ServiceError) as busy:
            with admission.upload():
                pass
        assert busy.value.kind == "Overloaded"
    with admission.upload():
        pass


def test_a_streamed_answer_stops_for_a_client_that_does_not_read() -> None:
    """The listing's stream gives up after --send-timeout on a client that reads nothing, and streams all of
    it to one that reads."""
    import anyio

    from service.routers.reach import TimedStream

    chunks = [b"[", b"1", b",2", b"]"]

    async def stream(stall_after: int) -> list[bytes]:
        received: list[bytes] = []

        async def send(message: dict) -> None:
            if len(received) == stall_after:
                await anyio.sleep_forever()
            received.append(message.get("body", b""))

        response = TimedStream(iter(chunks), 0.2, media_type="application/json")
        with anyio.fail_after(20):  # the stalled client would otherwise hold it for ever
            await response.stream_response(send)
        return received

    assert anyio.run(stream, 2) == [b"", b"["]
    assert b"".join(anyio.run(stream, 100)) == b"".join(chunks)


def test_the_update_threads_lines_name_the_requests_of_their_batch() -> None:
    """The batch thread's log lines (its registry calls, the rebuilds it queues) carry the request ids."""
    seen: list[str] = []

    class Registry:
        def update_many(self, updates: list) -> list:
            seen.append(request_id.get())
            return [{"version": 1} for _ in updates]

    async def one_request() -> object:
        queue = UpdateQueue(Registry(), lambda graph_ids: seen.append(request_id.get()))  # type: ignore[arg-type]
        queue.start()
        request_id.set("trace-9")
        try:
            return await queue.submit("g1", [[0, 1]], [])
        finally:
            queue.stop()

    assert asyncio.run(one_request()) == {"version": 1}
    assert seen == ["trace-9", "trace-9"]
    assert batch_request_id(["a", NO_REQUEST, "b", "a"]) == "a+b"
    assert batch_request_id([NO_REQUEST]) == NO_REQUEST
    assert batch_request_id([f"r{i}" for i in range(7)]) == "r0+r1+r2+r3+3 more"


def test_new_request_ids_are_uuid4s() -> None:
    """A request without an id gets a new one in uuid4's hex form (version and variant bits set), never the
    same twice."""
    import uuid

    from service.logs import new_request_id

    made = [new_request_id() for _ in range(2000)]
    assert len(set(made)) == len(made)
    for made_id in made:
        parsed = uuid.UUID(made_id)
        assert parsed.hex == made_id and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_plain_routes_answer_their_routes_and_pass_on_the_rest() -> None:
    """PlainRoutes answers a full match (path and method) itself, with the route in the scope as the router
    puts it and the endpoint's refusal answered by the app's handlers; another method, another path, and an
    exception no handler takes go on as they would without it."""
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    from service.errors import INVALID_PARAMETER, response_for
    from service.plain_routes import PlainRoutes

    async def endpoint(request: Request) -> Response:
        graph_id = request.path_params["graph_id"]
        if graph_id == "refused":
            raise ServiceError(INVALID_PARAMETER, "refused")
        if graph_id == "broken":
            raise KeyError(graph_id)
        return PlainTextResponse(f"plain {graph_id}")

    async def handle(request: Request, exc: Exception) -> Response:
        return response_for(exc)

    passed_on: list[tuple[str, str]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        passed_on.append((scope["method"], scope["path"]))

    route = Route("/graphs/{graph_id}/edges", endpoint, methods=["POST"])
    plain = PlainRoutes(app, [route], {ServiceError: handle, Exception: handle})

    def call(method: str, path: str) -> tuple[dict, list[dict]]:
        scope = {"type": "http", "method": method, "path": path, "headers": [], "query_string": b""}
        sent: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        asyncio.run(plain(scope, receive, send))  # type: ignore[arg-type]
        return scope, sent

    scope, sent = call("POST", "/graphs/g1/edges")
    assert sent[0]["status"] == 200 and sent[1]["body"] == b"plain g1"
    assert scope["route"] is route and scope["endpoint"] is endpoint and scope["path_params"] == {"graph_id": "g1"}
    _, sent = call("POST", "/graphs/refused/edges")
    assert sent[0]["status"] == 422 and json.loads(sent[1]["body"])["error"] == "InvalidParameter"
    with pytest.raises(KeyError):  # the handler of Exception is the outermost layers' (a 500 with the id)
        call("POST", "/graphs/broken/edges")
    assert passed_on == []
    assert call("GET", "/graphs/g1/edges")[1] == [] and call("POST", "/graphs/g1")[1] == []
    assert passed_on == [("GET", "/graphs/g1/edges"), ("POST", "/graphs/g1")]
