"""Charts of the benchmarks' figures: horizontal grouped bars drawn from a plain figure record.

A figure record holds the numbers a benchmark printed, as JSON (docs/figures/NAME.json), and is
drawn as one chart (docs/images/performance/NAME.png; scripts/draw_charts.py redraws them all):

    {"title": "Training, MNIST",                 # the chart's title
     "unit": "rows/s",                           # the values' unit, the axis's label ("x": ratios)
     "groups": ["bernoulli", "gaussian"],        # the chart's rows, top to bottom
     "series": {"nbstream": [1684908, 1272765],  # one value a group, in the groups' order:
                "scikit-learn": [50184, None]},  # a bar each; None, no figure: no bar ("n/a")
     "note": "python scripts/bench_core.py"}     # the command that printed the numbers

and, optionally:

    "nbstream": ["nbstream"]        the series that are nbstream, in its colour (default: the
                                    series whose names start with "nbstream")
    "previous": ["30b2f7d"]         the series of an earlier version, muted (default: the series
                                    whose names start with "previous")
    "scale": "log" or "linear"      (default: log where the values span more than 50 times)
    "reference": 1                  a dashed line at that value, where the bars start: a ratio's baseline
    "panels": [{"title": "fit", "unit": "s", "series": {...}}, ...]
                                    in place of "unit" and "series": panels side by side, sharing
                                    the groups, each with its own "scale" and "reference" if need be

Every other series is a baseline. ``write_record`` and ``read_record`` keep a record as JSON (checked
by ``check``: a ValueError says what does not add up), ``draw`` writes its chart (PNG at 110 dpi,
8.5 inches wide; ``figure`` is the same chart as a matplotlib Figure, unsaved) and ``publish`` does
both. A benchmark script takes ``--record PATH`` (``add_record_option``) and publishes the record of
the table it printed where ``record_file`` says:

    parser = argparse.ArgumentParser()
    charts.add_record_option(parser)
    args = parser.parse_args()
    ...  # measure, print the table
    if args.record:
        charts.publish({"title": ..., "unit": ..., "groups": ..., "series": ...,
                        "note": charts.command_line()}, charts.record_file(args.record, "parquet-training"))

matplotlib (the ``plots`` extra) is imported only to draw.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import sys
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FIGURES = REPO / "docs" / "figures"  # the committed records
IMAGES = REPO / "docs" / "images" / "performance"  # their charts
REFERENCE = "the baseline"  # the legend's name for the reference line
MISSING_MATPLOTLIB = "charts need matplotlib: pip install 'nbstream[plots]'"

Record = dict[str, Any]

REQUIRED = {"title", "groups", "note"}
ONE_PANEL = {"unit", "series", "scale", "reference"}  # a record of one panel: its panel's keys at the top
OPTIONAL = ONE_PANEL | {"panels", "nbstream", "previous"}
PANEL_KEYS = {"title", "unit", "series", "scale", "reference"}

WIDTH_INCHES = 8.5
DPI = 110
SPAN_FOR_LOG = 50  # a log scale where the largest value is more than this many times the smallest
NBSTREAM_COLOURS = ("#1f5fa8", "#6fa8dc", "#0b3763", "#a9c9ea")
PREVIOUS_COLOURS = ("#a6a6a6", "#cfcfcf")
BASELINE_COLOURS = ("#e08a2c", "#4f9a5a", "#9467bd", "#c2587e", "#8c6d31", "#17becf")


# ---- records ---------------------------------------------------------------------------------------
def check(record: Record) -> None:
    """ValueError naming what is wrong with ``record``, unless it is a figure record as above."""
    if not isinstance(record, dict):
        raise ValueError(f"a figure record is a dict, not {type(record).__name__}")
    keys = set(record)
    if REQUIRED - keys or keys - REQUIRED - OPTIONAL:
        raise ValueError(f"a figure record needs {sorted(REQUIRED)}; missing {sorted(REQUIRED - keys)}, "
                         f"unknown {sorted(keys - REQUIRED - OPTIONAL)}")
    if not isinstance(record["title"], str) or not isinstance(record["note"], str):
        raise ValueError("'title' and 'note' are strings")
    groups = record["groups"]
    if not isinstance(groups, list) or not groups or not all(isinstance(group, str) for group in groups):
        raise ValueError("'groups' is a non-empty list of names")
    given = record.get("panels")
    if (given is None and not {"unit", "series"} <= keys) or (given is not None and keys & ONE_PANEL):
        raise ValueError("a figure record has either 'unit' and 'series' or 'panels' (each with its own)")
    if given is not None and (not isinstance(given, list) or not given
                              or not all(isinstance(panel, dict) for panel in given)):
        raise ValueError("'panels' is a non-empty list of dicts")
    names: set[str] = set()
    for panel in panels(record):
        _check_panel(panel, len(groups))
        names |= set(panel["series"])
    for role in ("nbstream", "previous"):
        named = record.get(role, [])
        if not isinstance(named, list) or not set(named) <= names:
            raise ValueError(f"{role!r} lists names of series; {named!r} names {sorted(set(named) - names)!r}, "
                             f"which are not among {sorted(names)}")


def _check_panel(panel: Record, n_groups: int) -> None:
    unknown = set(panel) - PANEL_KEYS
    if unknown or not isinstance(panel["unit"], str) or not isinstance(panel["series"], dict) \
            or not isinstance(panel["title"], str | None):
        raise ValueError(f"a panel has a 'unit' (a string), 'series' (a dict) and perhaps a 'title' (a string); "
                         f"unknown keys {sorted(unknown)}")
    if not panel["series"]:
        raise ValueError("'series' holds at least one series")
    for name, values in panel["series"].items():
        if not isinstance(values, list) or len(values) != n_groups:
            count = len(values) if isinstance(values, list) else type(values).__name__
            raise ValueError(f"series {name!r} has {count} values for {n_groups} groups: one a group, None for none")
        for value in values:
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not math.isfinite(value) or value < 0):
                raise ValueError(f"series {name!r} holds {value!r}: a value is a finite number >= 0, or None")
    if panel["scale"] not in ("auto", "log", "linear"):
        raise ValueError(f"'scale' is 'log' or 'linear', not {panel['scale']!r}")
    if panel["scale"] == "log" and any(value == 0 for value in _values(panel)):
        raise ValueError("a log scale cannot show a value of 0")
    reference = panel["reference"]
    if reference is not None and (isinstance(reference, bool) or not isinstance(reference, int | float)):
        raise ValueError(f"'reference' is a number, not {reference!r}")


def panels(record: Record) -> list[Record]:
    """The record's panels, each {"title", "unit", "series", "scale", "reference"}: its "panels",
    or the one panel its "unit" and "series" make (title None)."""
    given = record["panels"] if "panels" in record else [{key: record[key] for key in ONE_PANEL if key in record}]
    return [{"title": None, "unit": None, "series": None, "scale": "auto", "reference": None, **panel}
            for panel in given]


def write_record(record: Record, path: Path) -> Path:
    """``record``, checked, as JSON at ``path`` (its folder made if need be)."""
    check(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_json(record) + "\n")
    return path


def _json(record: Record) -> str:
    """``record`` as indented JSON, each list of names or numbers on one line (JSON strings hold no
    newline, so the newlines inside a list are its layout)."""
    text = json.dumps(record, indent=2, ensure_ascii=False)
    return re.sub(r"\[\n\s+([^\[\]{}]*?)\n\s+\]", lambda match: "[" + re.sub(r",\n\s+", ", ", match[1]) + "]", text)


def read_record(path: Path) -> Record:
    """The figure record stored at ``path``, checked."""
    record = json.loads(path.read_text())
    check(record)
    return record


def image_path(record_path: Path) -> Path:
    """Where the chart of the record at ``record_path`` goes: docs/images/performance/NAME.png for a
    record in docs/figures, else beside the record (NAME.png)."""
    if record_path.resolve().parent == FIGURES:
        return IMAGES / f"{record_path.stem}.png"
    return record_path.with_suffix(".png")


# ---- the benchmark scripts' option -------------------------------------------------------------------
def add_record_option(parser: argparse.ArgumentParser) -> None:
    """``--record PATH`` on a benchmark script's ``parser``: where the figure record of what it
    prints goes (``record_file``); the chart is drawn beside it, or into docs/images/performance for
    a record in docs/figures. Given without matplotlib, the script stops at once, in one line."""
    parser.add_argument("--record", type=_record_target, metavar="PATH",
                        help="write the figure record of the table(s) printed to PATH (NAME.json), or into the "
                             "folder PATH as its section's name.json (docs/figures: the docs' own), and draw "
                             "its chart (needs the plots extra)")


def _record_target(text: str) -> Path:
    _require_matplotlib()  # before the benchmark runs, not after it
    return Path(text)


def record_file(given: Path, name: str) -> Path:
    """The record file of the section ``name`` for ``--record given``: ``given`` itself if it names a
    .json file, else ``given/name.json``."""
    return given if given.suffix == ".json" else given / f"{name}.json"


def command_line(argv: list[str] | None = None) -> str:
    """The command that ran, for a record's note: ``python`` and ``argv`` (default: this process's)
    without its ``--record`` option.

    >>> command_line(["scripts/bench_parquet.py", "--rounds", "5", "--record", "docs/figures"])
    'python scripts/bench_parquet.py --rounds 5'
    """
    words = list(sys.argv if argv is None else argv)
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--record":
            skip = True
        elif not word.startswith("--record="):
            kept.append(word)
    return " ".join(["python", *(shlex.quote(word) for word in kept)])


def publish(record: Record, path: Path) -> Path:
    """``record`` written to ``path`` and its chart drawn where ``image_path`` puts it; the chart's path."""
    write_record(record, path)
    image = draw(record, image_path(path))
    print(f"figure record {path}, chart {image}", file=sys.stderr)
    return image


# ---- drawing ---------------------------------------------------------------------------------------
def figure(record: Record) -> Any:
    """The chart of ``record`` as a matplotlib Figure (Agg, not shown): a panel of horizontal bars per
    panel, the groups down the side, each series a bar in every group it has a value for, labelled
    at its end; nbstream in its colour, the previous version muted, the command at the foot."""
    check(record)
    plt = _pyplot()
    parts = panels(record)
    groups = record["groups"]
    n_series = max(len(panel["series"]) for panel in parts)
    height = 1.8 + len(groups) * (0.22 * n_series + 0.3)
    fig, axes = plt.subplots(1, len(parts), figsize=(WIDTH_INCHES, height), sharey=True, squeeze=False,
                             layout="constrained")
    colours = _colours(record, parts)
    for axis, panel in zip(axes[0], parts, strict=True):
        _draw_panel(axis, panel, colours, ticks={1: 8, 2: 5}.get(len(parts), 3))  # fewer as the panels narrow
    axes[0][0].set_yticks(range(len(groups)), [_plain(_wrapped(group, 30)) for group in groups])
    axes[0][0].invert_yaxis()  # the first group on top
    handles = {}
    for axis in axes[0]:
        for handle, name in zip(*axis.get_legend_handles_labels(), strict=True):
            handles.setdefault(name, handle)
    names = sorted(handles, key=lambda name: name == REFERENCE)  # the series, then the baseline's line
    # the title heads the legend: constrained layout keeps the two together above the panels
    fig.legend([handles[name] for name in names], names, loc="outside upper left", ncols=min(len(names), 3),
               frameon=False, fontsize=10, title=_plain(_wrapped(record["title"], 75)), alignment="left",
               title_fontproperties={"size": 13, "weight": "bold"})
    fig.supxlabel(_plain(_wrapped(record["note"], 115)), x=0.01, ha="left", fontsize=8, color="#666666",
                  fontfamily="monospace")
    return fig


def draw(record: Record, path: Path) -> Path:
    """The chart of ``record`` written to ``path`` (PNG, or SVG for a .svg path); ``path``."""
    fig = figure(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata=_reproducible(path))
    _pyplot().close(fig)
    return path


def _draw_panel(axis: Any, panel: Record, colours: dict[str, str], ticks: int) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    series = panel["series"]
    thickness = 0.8 / len(series)
    log = _is_log(panel)
    decimals = decimals_of(_values(panel))
    start = panel["reference"] or 0  # ratios' bars run from their baseline: left of it slower, right faster
    for index, (name, values) in enumerate(series.items()):
        offset = -0.4 + thickness * (index + 0.5)
        present = [(row, value) for row, value in enumerate(values) if value is not None]
        bars = axis.barh([row + offset for row, _ in present], [value - start for _, value in present],
                         left=start, height=thickness, color=colours[name], label=_plain(name))
        axis.bar_label(bars, [label(value, panel["unit"], decimals) for _, value in present], padding=3, fontsize=9)
        for row, value in enumerate(values):
            if value is None:  # at the axis's left edge, whatever its scale
                axis.text(0.01, row + offset, "n/a", transform=axis.get_yaxis_transform(), va="center",
                          fontsize=8, color="#888888")
    present = _values(panel)
    if log:
        axis.set_xscale("log")
        low, high = math.floor(math.log10(min(present) / 2)), math.log10(max(present))  # a decade below the least
        axis.set_xlim(10**low, 10 ** (high + 0.18 * max(high - low, 1)))  # room for the labels
    else:
        axis.set_xlim(0, max(present, default=1) * 1.22 or 1)
        axis.xaxis.set_major_locator(MaxNLocator(nbins=ticks))
    if panel["reference"] is not None:
        axis.axvline(panel["reference"], color="#444444", linestyle="--", linewidth=0.9, label=REFERENCE)
    axis.xaxis.set_major_formatter(FuncFormatter(lambda value, _: tick(value, panel["unit"])))
    axis.set_xlabel(("ratio" if panel["unit"] == "x" else panel["unit"]) + (", log scale" if log else ""), fontsize=10)
    if panel["title"]:
        axis.set_title(_plain(panel["title"]), fontsize=11, loc="left")
    axis.grid(axis="x", alpha=0.3)
    axis.set_axisbelow(True)
    axis.tick_params(labelsize=9)
    axis.tick_params(axis="y", length=0, labelsize=10)
    for side in ("top", "right"):
        axis.spines[side].set_visible(False)


def _colours(record: Record, parts: list[Record]) -> dict[str, str]:
    """Each series' colour: nbstream's blues, the previous version's greys, the baselines' others."""
    names = list(dict.fromkeys(name for panel in parts for name in panel["series"]))
    ours = record.get("nbstream", [name for name in names if name.startswith("nbstream")])
    previous = record.get("previous", [name for name in names if name.startswith("previous")])
    others = [name for name in names if name not in ours and name not in previous]
    colours = {}
    for chosen, palette in ((ours, NBSTREAM_COLOURS), (previous, PREVIOUS_COLOURS), (others, BASELINE_COLOURS)):
        colours.update({name: palette[index % len(palette)] for index, name in enumerate(chosen)})
    return colours


def _values(panel: Record) -> list[float]:
    return [value for values in panel["series"].values() for value in values if value is not None]


def _is_log(panel: Record) -> bool:
    present = _values(panel)
    if not present or panel["scale"] != "auto":
        return bool(present) and panel["scale"] == "log"
    return min(present) > 0 and max(present) > SPAN_FOR_LOG * min(present)


def label(value: float, unit: str, decimals: int) -> str:
    """A bar's label: millions short, anything else thousands separated with ``decimals`` places
    below ten thousand (``decimals_of`` the panel's values: the precision they were printed with).

    >>> label(1_684_908, "rows/s", 0), label(12_345_678, "rows/s", 0), label(50_184.4, "rows/s", 1)
    ('1.68 M', '12.3 M', '50,184')
    >>> label(707.01, "ms", 2), label(0.4, "s", 2), label(4.74, "x", 2), label(21.2, "x", 1)
    ('707.01', '0.40', '4.74x', '21.2x')
    """
    if value >= 1e6:
        text = f"{value / 1e6:.2f} M" if value < 1e7 else f"{value / 1e6:,.1f} M"
    else:
        text = f"{value:,.{decimals if value < 1e4 else 0}f}"
    return text + "x" if unit == "x" else text


def decimals_of(values: list[float]) -> int:
    """The fewest decimal places, up to 3, that write every one of ``values`` exactly.

    >>> decimals_of([5.38, 18.2, 0.4]), decimals_of([39.0, 165.8]), decimals_of([1_684_908, 658]), decimals_of([1 / 3])
    (2, 1, 0, 3)
    """
    return next((places for places in range(3) if all(abs(round(value, places) - value) < 1e-9 for value in values)),
                3)


def tick(value: float, unit: str) -> str:
    """An axis tick: 1 M, 200 k, 2 k, 50, 0.5 (ratios: 2x).

    >>> tick(1e6, "rows/s"), tick(2e5, "rows/s"), tick(2000, "ms"), tick(50, "ms"), tick(0.5, "s"), tick(2, "x")
    ('1 M', '200 k', '2 k', '50', '0.5', '2x')
    """
    text = f"{value / 1e6:g} M" if value >= 1e6 else f"{value / 1e3:g} k" if value >= 1e3 else f"{value:g}"
    return text + "x" if unit == "x" else text


def _wrapped(text: str, width: int) -> str:
    """``text`` on lines of about ``width`` characters, broken between words only."""
    return textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False)


def _plain(text: str) -> str:
    """``text`` shown as it is: matplotlib reads what lies between two dollar signs as mathematics."""
    return text.replace("$", r"\$")


def _reproducible(path: Path) -> dict[str, str | None]:
    """Metadata without a date or a version, so that a chart redrawn from the same record is the same file."""
    return {"Software": None} if path.suffix.lower() == ".png" else {"Date": None, "Creator": None}


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(MISSING_MATPLOTLIB)


def _pyplot() -> Any:
    _require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
