"""MkDocs hooks (docs/mkdocs/mkdocs.yml): what the site adds to the pages of docs/, at build time and offline.

- ``api.md``, the API reference, rendered from the OpenAPI document of the service itself (``create_app``, no
  server started), and that document as ``openapi.json``;
- the repository's files outside docs/ that the pages link to (benchmark results, the container's README),
  published under ``repo/``: a page links to them as on GitHub (``../benchmarks/results/networkx.md``) and the
  link is pointed at the published copy; a link to a file outside docs/ that is not published is a warning,
  which ``mkdocs build --strict`` turns into a failure, like every broken link and anchor.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.grail")

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
# Files and folders of the repository, outside docs/, that the site publishes (under SITE_FOLDER).
PUBLISHED = ("benchmarks/results", "docker/README.md")
SITE_FOLDER = "repo"
API_PAGE = "api.md"
OPENAPI_FILE = "openapi.json"
# A Markdown link or image target: ](target#anchor)
_LINK = re.compile(r"(\]\()([^)\s#]+)(#[^)\s]*)?(\))")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    document = openapi_document()
    files.append(File.generated(config, API_PAGE, content=render_api(document)))
    files.append(File.generated(config, OPENAPI_FILE, content=json.dumps(document, indent=2)))
    for path in published_files():
        uri = f"{SITE_FOLDER}/{path.relative_to(REPO).as_posix()}"
        files.append(File.generated(config, uri, abs_src_path=str(path), inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri.startswith(f"{SITE_FOLDER}/") or page.file.abs_src_path is None:
        return markdown
    folder = Path(page.file.abs_src_path).parent
    page_folder = posixpath.dirname(page.file.src_uri)

    def pointed(match: re.Match[str]) -> str:
        target = match.group(2)
        if ":" in target or target.startswith("/"):
            return match.group(0)  # a URL (MkDocs checks absolute paths itself)
        path = Path(posixpath.normpath((folder / target).as_posix()))
        if path.is_relative_to(DOCS):
            return match.group(0)  # a page or file of the site: MkDocs checks it
        relative = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else None
        if relative is None or not is_published(relative) or not path.is_file():
            log.warning("%s links to %s, which is not a file the site publishes", page.file.src_uri, target)
            return match.group(0)
        site_path = posixpath.relpath(f"{SITE_FOLDER}/{relative}", page_folder or ".")
        return f"{match.group(1)}{site_path}{match.group(3) or ''}{match.group(4)}"

    return _LINK.sub(pointed, markdown)


def is_published(relative: str) -> bool:
    return any(relative == entry or relative.startswith(entry + "/") for entry in PUBLISHED)


def published_files() -> Iterator[Path]:
    for entry in PUBLISHED:
        path = REPO / entry
        yield from sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def openapi_document() -> dict[str, Any]:
    """The document a server on this machine serves at /openapi.json (the app is made, not started)."""
    from service.app import create_app
    from service.settings import Settings

    with tempfile.TemporaryDirectory() as data_dir:
        return create_app(Settings(data_dir=Path(data_dir))).openapi()


def render_api(document: dict[str, Any]) -> str:
    lines = [
        "# API reference",
        "",
        "Every route of the HTTP API, rendered from the OpenAPI document the server serves at `/openapi.json`",
        f"([this build's copy]({OPENAPI_FILE})); a running server also serves it as Swagger UI at `/docs` and",
        "ReDoc at `/redoc`. The document was made on the machine that built this site: a server with a GPU also",
        "offers `cuda` where a backend is chosen. Every error answer is a [problem details](errors.md) document.",
        "",
    ]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            lines += _operation(method.upper(), path, operation)
    lines += ["## Schemas", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        lines += _schema(name, schema)
    return "\n".join(lines) + "\n"


def _operation(method: str, path: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"## `{method} {path}`", "", operation.get("summary", ""), ""]
    if operation.get("description"):
        lines += [operation["description"].strip(), ""]
    rows = list(_parameter_rows(operation.get("parameters", [])))
    if rows:
        lines += ["| parameter | in | type | description |", "|---|---|---|---|", *rows, ""]
    body = operation.get("requestBody")
    if body:
        lines += ["| request body | schema |", "|---|---|"]
        lines += [f"| `{media}` | {_type(content.get('schema', {}))} |" for media, content in body["content"].items()]
        lines.append("")
    lines += ["| status | answer | content |", "|---|---|---|"]
    for status, response in sorted(operation.get("responses", {}).items()):
        media = ", ".join(_media(name, content) for name, content in response.get("content", {}).items())
        lines.append(f"| {status} | {_cell(response.get('description', ''))} | {media} |")
    return [*lines, ""]


def _parameter_rows(parameters: list[dict[str, Any]]) -> Iterator[str]:
    for parameter in parameters:
        schema = parameter.get("schema", {})
        where = parameter["in"]
        if "oneOf" in schema and all(option.get("type") == "object" for option in schema["oneOf"]):
            # A set of query parameters in several shapes (form, exploded): one row per parameter of each shape.
            for option in schema["oneOf"]:
                for name, field in option.get("properties", {}).items():
                    required = "required" if name in option.get("required", []) else "optional"
                    text = _joined(f"{option.get('title', '')}: {required}", field.get("description", ""))
                    yield f"| `{name}` | {where} | {_type(field)} | {_cell(text)} |"
            continue
        required = "required" if parameter.get("required") else "optional"
        text = _joined(required, parameter.get("description") or schema.get("description", ""))
        yield f"| `{parameter['name']}` | {where} | {_type(schema)} | {_cell(text)} |"


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name}", ""]
    if schema.get("description"):
        lines += [_cell(schema["description"]), ""]
    properties = schema.get("properties", {})
    if properties:
        lines += ["| field | type | description |", "|---|---|---|"]
        required = set(schema.get("required", []))
        for field, value in properties.items():
            mark = "" if field in required else " (optional)"
            lines.append(f"| `{field}`{mark} | {_type(value)} | {_cell(value.get('description', ''))} |")
    elif schema.get("enum") or schema.get("type"):
        lines.append(_type(schema))
    return [*lines, ""]


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_type(option) for option in schema[key] if option.get("type") != "null")
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(value)}`" for value in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        kind = f"array of {_type(schema.get('items', {}))}"
    elif kind == "object" and "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
        kind = f"object of {_type(schema['additionalProperties'])}"
    if kind == "string" and schema.get("format"):
        kind = f"string ({schema['format']})"
    bounds = [f"{word} {schema[key]}" for key, word in (("minimum", "≥"), ("maximum", "≤")) if key in schema]
    if "default" in schema:
        bounds.append(f"default `{json.dumps(schema['default'])}`")
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _media(name: str, content: dict[str, Any]) -> str:
    schema = content.get("schema")
    return f"`{name}` {_type(schema)}" if schema and "$ref" in schema else f"`{name}`"


def _joined(*parts: str) -> str:
    return "; ".join(part for part in parts if part)


def _cell(text: str) -> str:
    """Text that stays in its table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")
