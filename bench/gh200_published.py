#!/usr/bin/env python3
"""The model's GH200 predictions against the published figures (Fusco et al. Figs. 5 and 7, Schieffer et al.
Figs. 3 and 11): writes docs/model-gh200.md from python/umscope/model/published_gh200.py. CPU only, about
10 s (the simulator's Schieffer sweep). Usage: python3 bench/gh200_published.py [--out FILE] [--json]"""
import argparse
import json
import sys
from pathlib import Path

from umscope.model import published_gh200

ROOT = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "model-gh200.md"))
    ap.add_argument("--json", action="store_true", help="print the cells as JSON too")
    a = ap.parse_args()
    res = published_gh200.cells(progress=lambda m: print(f"  sweep: {m}", file=sys.stderr))
    Path(a.out).write_text(published_gh200.markdown(res, "python3 bench/gh200_published.py"))
    if a.json:
        print(json.dumps(res, indent=1))
    print(f"{a.out}: {res['predicted_cells']} numeric cells, median |error| {res['median_abs_error']:.1%}, "
          f"{len(res['above_50'])} above 50% "
          f"({', '.join(c['what'] + ': ' + c['missing'] for c in res['above_50'])}); "
          f"direction cells agreeing: {sum(c['agrees'] for c in res['shapes'])} of {len(res['shapes'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
