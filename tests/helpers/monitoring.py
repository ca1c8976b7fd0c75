"""The Grafana dashboard and the Prometheus alert rules of deploy/, and the series their queries select."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import yaml

from .paths import REPO

DASHBOARD = REPO / "deploy" / "grafana" / "nbstream.json"
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
SELECTOR = re.compile(r"\b(?P<name>nbstream_[a-z_]+)(?:\{(?P<matchers>[^}]*)\})?")
MATCHER = re.compile(r'\s*(?P<label>[a-z_]+)\s*(?P<op>=~|!~|!=|=)\s*"(?P<value>[^"]*)"\s*')
# Labels Prometheus adds when it scrapes (and the dashboard's variable for them): not the service's.
SCRAPE_LABELS = ("job", "instance")


@dataclass(frozen=True)
class Selector:
    """A series selector of a query: a metric name and its label matchers (label, op, value)."""

    name: str
    matchers: tuple[tuple[str, str, str], ...]

    def matches(self, name: str, labels: dict[str, str]) -> bool:
        if name != self.name:
            return False
        for label, op, value in self.matchers:
            if label in SCRAPE_LABELS:
                continue
            have = labels.get(label, "")
            found = {"=": have == value, "!=": have != value, "=~": re.fullmatch(value, have) is not None,
                     "!~": re.fullmatch(value, have) is None}[op]
            if not found:
                return False
        return True


def selectors(expr: str) -> list[Selector]:
    """Every series selector of a PromQL expression (metric names of nbstream only)."""
    found = []
    for match in SELECTOR.finditer(expr):
        matchers = []
        for part in filter(str.strip, (match["matchers"] or "").split(",")):
            parsed = MATCHER.fullmatch(part)
            assert parsed, f"a label matcher this reader does not know: {part!r} in {expr!r}"
            matchers.append((parsed["label"], parsed["op"], parsed["value"]))
        found.append(Selector(match["name"], tuple(matchers)))
    return found


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def queries() -> dict[str, str]:
    """Every query of the dashboard and the alerts, by where it is (panel title or alert name)."""
    found = {f"panel {panel['title']!r} {target['refId']}": target["expr"]
             for panel in dashboard()["panels"] for target in panel.get("targets", [])}
    found.update({f"alert {rule['alert']}": rule["expr"] for rule in alert_rules()})
    return found


def samples(text: str) -> list[tuple[str, dict[str, str]]]:
    """(name, labels) of every sample of a Prometheus text exposition."""
    found = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series = line.rsplit(" ", 1)[0]
        name, _, labels = series.partition("{")
        found.append((name, dict(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', labels))))
    return found
