"""The documentation site as mkdocs.yml declares it: it opens from the file system, it names its
address and repository, its home page lists every page, and the hooks that bring the CHANGELOG
and CONTRIBUTING onto it rewrite their links. (scripts/docs.sh builds it strictly in CI, which
checks every link and anchor.)"""

from __future__ import annotations

import doctest
import re

import yaml

from tests.helpers.paths import REPO, script

CONFIG = yaml.safe_load((REPO / "mkdocs.yml").read_text())


def nav_pages(entries) -> list[str]:
    found = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += nav_pages(value) if isinstance(value, list) else [value]
    return found


def test_the_site_opens_from_the_file_system_and_names_its_address_and_repository():
    assert CONFIG["use_directory_urls"] is False  # page.html: links work from file:// too
    assert CONFIG["site_url"].startswith("https://") and CONFIG["repo_url"].startswith("https://")
    assert "javascripts/file-worker.js" in CONFIG["extra"]["polyfills"]  # search from file://
    assert (REPO / "docs" / "javascripts" / "file-worker.js").is_file()


def test_every_page_is_in_the_navigation_and_the_home_page_links_every_page():
    pages = nav_pages(CONFIG["nav"])
    files = sorted(path.relative_to(REPO / "docs").as_posix() for path in (REPO / "docs").rglob("*.md"))
    assert sorted(pages) == files
    home = (REPO / "docs" / "index.md").read_text()
    linked = set(re.findall(r"\]\(([^)#]+\.md)", home))
    assert sorted(set(pages) - linked - {"index.md"}) == []


def test_the_top_folder_s_pages_are_on_the_site_with_their_links_rewritten():
    hooks = script("docs_hooks")
    assert doctest.testmod(hooks).failed == 0
    for page, source in hooks.FROM_TOP.items():
        assert (REPO / "docs" / page).is_file() and (REPO / source).is_file()
        rewritten = hooks.site_links((REPO / source).read_text(), CONFIG["repo_url"])
        assert "](docs/" not in rewritten
