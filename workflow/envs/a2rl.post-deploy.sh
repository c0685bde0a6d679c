#!/usr/bin/env bash
# Install the a2rl package (and its pinned dependencies) into the rule environment.
# Snakemake runs this from its working directory, which must be the repository root.
set -euo pipefail
python -m pip install --editable .
