"""``python -m a2rl_tasks.alpacaeval.score --annotations FILE [--glm NAME] [--hub-file NAME=PATH]
[--data DIR]``
(also ``a2rl score alpacaeval --annotations FILE``): AlpacaEval 2.0's leaderboard numbers for an
annotations file in alpaca_eval's own format (``results/<model>/weighted_alpaca_eval_gpt4_turbo/
annotations.json``), printed as one JSON object: win_rate, standard_error,
length_controlled_winrate, n_total, avg_length (and the counts). When the length-controlled GLM
cannot get a Hub file, length_controlled_winrate is null and length_controlled_error names it.
The Hub files `a2rl data fetch alpacaeval` installed under ``--data`` (default $A2RL_DATA, else
./data) are used unless ``--hub-file`` names others.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .metric import GLMS, installed_hub_files, score_annotations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="a2rl score alpacaeval")
    parser.add_argument("--annotations", required=True, help="alpaca_eval annotations.json")
    parser.add_argument("--glm", default="length_controlled_v1", choices=GLMS)
    parser.add_argument("--hub-file", action="append", default=[], metavar="NAME=PATH",
                        help="a local copy of a file the GLM fetches from the Hub, e.g. "
                             "df_gamed.csv=/data/df_gamed.csv")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("A2RL_DATA", "data")),
                        help="paths.data, where `a2rl data fetch alpacaeval` installs the Hub "
                             "files (default: $A2RL_DATA, else ./data)")
    args = parser.parse_args(argv)
    hub = installed_hub_files(args.data) | dict(item.split("=", 1) for item in args.hub_file)
    try:
        out = score_annotations(args.annotations, args.glm, hub)
    except (OSError, ValueError) as err:
        print(f"a2rl score alpacaeval: {err}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
