"""The README and the guide against the repository: the README's size and links, its test command and CI's, and
every server setting in docs/configuration.md. (The guide's own links and anchors: `make docs`, strict.)"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from service.settings import Settings, _flag, _variable
from tests.readme import README, REPO, blocks, links, section

README_LIMIT_BYTES = 8 * 1024


def test_the_readme_is_short() -> None:
    assert len(README.read_bytes()) < README_LIMIT_BYTES


def test_the_readmes_links_name_files_of_the_repository() -> None:
    text = README.read_text()
    targets = [target for target in links(text) if not urlsplit(target).scheme]
    assert "docs/examples/packages.csv" in targets and "docs/index.md" in targets
    for target in targets:
        path = REPO / urlsplit(target).path
        assert path.exists(), f"the README links to {target}, which the repository lacks"


def test_the_readmes_test_command_is_what_ci_runs() -> None:
    (commands,) = [block.text for block in blocks(section("Two commands")) if block.language == "sh"]
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^make test\b", commands, re.M) and re.search(r"^make test$", ci, re.M)
    assert re.search(r"^make serve\b", commands, re.M) and re.search(r"^serve:", (REPO / "Makefile").read_text(), re.M)
    assert re.search(r"^(background \S+ )?make (lint )?docs$", ci, re.M)  # beside the tests, or alone


def test_every_setting_is_in_the_configuration_page() -> None:
    page = (REPO / "docs" / "configuration.md").read_text()
    for name in Settings.model_fields:
        assert f"| `{_flag(name)}` | `{_variable(name)}` |" in page, name
