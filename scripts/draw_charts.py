"""Redraw the charts of docs/performance.md and the README from their committed figure records:
docs/figures/NAME.json to docs/images/performance/NAME.png (scripts/bench/charts.py; the benchmark
scripts write the records with --record). Needs the plots extra (matplotlib).

    python scripts/draw_charts.py              # every record
    python scripts/draw_charts.py spark kafka-service
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.bench import charts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="the records to draw (default: every one in docs/figures)")
    args = parser.parse_args()
    paths = [charts.FIGURES / f"{name}.json" for name in args.names] or sorted(charts.FIGURES.glob("*.json"))
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        sys.exit(f"draw_charts.py: no record {', '.join(missing)}")
    for path in paths:
        image = charts.draw(charts.read_record(path), charts.image_path(path))
        print(f"{image.relative_to(charts.REPO)}  {image.stat().st_size / 1024:,.0f} KiB")


if __name__ == "__main__":
    main()
