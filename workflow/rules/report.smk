# What a run leaves for people: a summary per run, a leaderboard per grid.


rule summarize_run:
    input:
        run="results/runs/{task}/{agent}/{driver}/seed{seed}/run.json",
        final="results/runs/{task}/{agent}/{driver}/seed{seed}/final.json",
        baseline="results/baseline/{task}/baseline.json",
    output:
        json="results/runs/{task}/{agent}/{driver}/seed{seed}/summary.json",
        md="results/runs/{task}/{agent}/{driver}/seed{seed}/summary.md",
    log:
        "results/logs/summarize_run/{task}/{agent}/{driver}/seed{seed}.log",
    params:
        overrides=overrides_of_cell,
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/summarize_run.py"


rule build_leaderboard:
    input:
        summaries=run_summaries,
    output:
        csv="results/leaderboard.csv",
        md="results/leaderboard.md",
        json="results/leaderboard.json",
    log:
        "results/logs/build_leaderboard/leaderboard.log",
    params:
        overrides=GRID_OVERRIDES,
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/build_leaderboard.py"
