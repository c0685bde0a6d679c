"""The pipeline's stages as plain functions; Snakemake rules, DVC stages and the ``a2rl run``
Hydra app all call these and nothing else.

prepare_model -> prepare_task -> measure_baseline -> run_agent -> final_grade -> summarize_run
-> build_leaderboard
"""
# IMPLEMENTATION: lead (prepare/baseline/run/final); summarize_run and build_leaderboard live in
# a2rl.summary and a2rl.leaderboard.
