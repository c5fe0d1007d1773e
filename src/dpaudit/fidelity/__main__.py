"""``python -m dpaudit.fidelity``: list the reproduction profiles or run one into reproductions/."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dpaudit.fidelity.profile import write_profile_result
from dpaudit.fidelity.profiles import PROFILE_MODULES, get_profile


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpaudit.fidelity", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("list", help="the profiles, with their paper and minutes on two cores")
    run = sub.add_parser("run", help="run one profile and write reproductions/<name>.json")
    run.add_argument("name", choices=sorted(PROFILE_MODULES))
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--out", default="reproductions", help="directory of the result file")
    args = parser.parse_args(argv)
    if args.action == "list":
        for name in sorted(PROFILE_MODULES):
            profile = get_profile(name)
            print(f"{name:24s} {profile.paper:12s} ~{profile.minutes:g} min  {profile.description}")
        return 0
    profile = get_profile(args.name)
    path = write_profile_result(args.out, profile.run(args.seed))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
