#!/usr/bin/env python3
"""Scripts/fuzz-seeds: regenerate Fuzz/Seeds/<Name>/ from a real cast on a local stack.

The capture and the cutting into seeds are castkit.fuzz_seeds (its docstring says what is
captured and how each target's inputs are laid out); this command starts the stack, runs
it, prints the counts and fails when a token survived the scrubbing.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from castkit import fuzz_seeds
from castkit.devstack import devstack_down, devstack_up
from castkit.paths import REPO


def main() -> int:
    ap = argparse.ArgumentParser(prog="Scripts/fuzz-seeds", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / "Fuzz" / "Seeds"))
    ap.add_argument("--seconds", type=float, default=4.0, help="cast time after the first frames")
    args = ap.parse_args()
    stack = devstack_up()
    try:
        counts, summary = fuzz_seeds.generate(stack, Path(args.out), args.seconds)
    finally:
        devstack_down(stack.state_dir)
    print(summary)
    for t, n in counts.items():
        print(f"  {t:22s} {n:3d} seeds")
    bad = fuzz_seeds.leaked_tokens(Path(args.out))
    if bad:
        print("fuzz-seeds: a token survived in", bad, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
