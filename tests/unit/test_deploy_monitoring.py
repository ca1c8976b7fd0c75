"""deploy/grafana/nbstream.json and deploy/prometheus/alerts.yml as Grafana and Prometheus read them,
and as docs/metrics.md describes them. (That the service serves every series they select is checked
against a running service: tests/integration/test_metrics_endpoint.py.)"""

from __future__ import annotations

import itertools
import re

from tests.helpers.monitoring import alert_rules, dashboard, queries, selectors
from tests.helpers.paths import REPO

METRICS_PAGE = (REPO / "docs" / "metrics.md").read_text()


def documented_table(heading: str) -> list[list[str]]:
    """The rows of the first table under a ``### heading`` of docs/metrics.md, cells stripped."""
    lines = METRICS_PAGE.split(f"### {heading}\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    table = list(itertools.takewhile(lambda line: line.startswith("|"), lines[start:]))
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in table[2:]]


def test_the_dashboard_asks_one_prometheus_data_source_for_one_job():
    board = dashboard()
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["job"]["query"]["query"] == "label_values(nbstream_build_info, job)"
    graphs = [panel for panel in board["panels"] if panel["type"] != "row"]
    assert len({panel["id"] for panel in board["panels"]}) == len(board["panels"])
    for panel in graphs:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        for target in panel["targets"]:
            for selector in selectors(target["expr"]):
                assert ("job", "=", "$job") in selector.matchers, (panel["title"], target["expr"])


def test_no_two_panels_of_the_dashboard_overlap():
    taken: set[tuple[int, int]] = set()
    for panel in dashboard()["panels"]:
        box = panel["gridPos"]
        assert box["x"] + box["w"] <= 24, panel["title"]
        cells = {(x, y) for x in range(box["x"], box["x"] + box["w"]) for y in range(box["y"], box["y"] + box["h"])}
        assert not cells & taken, panel["title"]
        taken |= cells


def test_the_dashboard_s_rows_and_panels_are_those_docs_metrics_md_lists():
    board, rows, current = dashboard(), {}, None
    for panel in board["panels"]:
        if panel["type"] == "row":
            current = rows.setdefault(panel["title"], [])
        else:
            current.append(panel["title"])
    documented = {row: panels for row, panels in documented_table("The dashboard")}
    assert list(documented) == list(rows)
    for row, titles in rows.items():
        assert documented[row] == "; ".join(titles), row


def test_every_alert_has_a_severity_a_summary_and_a_description_and_is_documented_with_its_delay():
    rules = alert_rules()
    for rule in rules:
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        assert re.fullmatch(r"\d+m", rule.get("for", "0m")), rule["alert"]
        assert selectors(rule["expr"]), rule["alert"]
    documented = {name.strip("`"): delay for name, _, delay in documented_table("The alerts")}
    assert documented == {rule["alert"]: rule.get("for", "0m") for rule in rules}


def test_every_metric_the_dashboard_and_the_alerts_name_is_documented():
    names = {selector.name for expr in queries().values() for selector in selectors(expr)}
    documented = set(re.findall(r"`(nbstream_[a-z_]+)", METRICS_PAGE))
    missing = {name for name in names if re.sub(r"_(bucket|sum|count)$", "", name) not in documented}
    assert not missing, f"docs/metrics.md does not document {sorted(missing)}"
    for panel_or_alert, expr in queries().items():
        assert expr.count("(") == expr.count(")"), panel_or_alert
