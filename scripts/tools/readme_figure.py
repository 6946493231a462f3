"""Regenerate docs/forest.png, the README's picture: the bundled example's forest plot.

Fits data/ with NUTS (the defaults of ``bayes-dualeval fit``) through the Python API and
saves the report's forest plot, small. About a minute on two CPU cores.

    python scripts/tools/readme_figure.py [--out docs/forest.png]
"""

import argparse
from pathlib import Path

import bayes_dualeval as bd

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "forest.png"))
    parser.add_argument("--dpi", type=int, default=80)
    args = parser.parse_args()
    run = bd.fit(ROOT / "data", sampler="nuts")
    fig = run.plot.forest()
    fig.savefig(args.out, dpi=args.dpi, bbox_inches="tight")
    print(f"{run!r}\nwrote {args.out}")


if __name__ == "__main__":
    main()
