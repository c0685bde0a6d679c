# What a run leaves for people: a summary per run (with its integrity checks), the selected
# model exported for DVC, a leaderboard and a static HTML report per grid.
# `snakemake --cores 1 --report report.zip` collects the outputs marked with report() (a zip,
# because the HTML report is a folder).


rule summarize_run:
    input:
        run="results/runs/{task}/{agent}/{driver}/seed{seed}/run.json",
        final="results/runs/{task}/{agent}/{driver}/seed{seed}/final.json",
        baseline="results/baseline/{task}/baseline.json",
        # the sealed splits the contamination check compares the agent's files with
        manifest="results/prepared/{task}/prepared.json",
    output:
        json="results/runs/{task}/{agent}/{driver}/seed{seed}/summary.json",
        md=report(
            "results/runs/{task}/{agent}/{driver}/seed{seed}/summary.md",
            category="Runs",
            subcategory="{task}",
            labels={"agent": "{agent}", "driver": "{driver}", "seed": "{seed}"},
        ),
        integrity="results/runs/{task}/{agent}/{driver}/seed{seed}/integrity.json",
    log:
        "results/logs/summarize_run/{task}/{agent}/{driver}/seed{seed}.log",
    params:
        overrides=overrides_of_cell,
    resources:
        **resources_of("summarize_run"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/summarize_run.py"


rule export_model:
    input:
        final="results/runs/{task}/{agent}/{driver}/seed{seed}/final.json",
    output:
        model=directory("results/models/{task}/{agent}/{driver}/seed{seed}"),
    log:
        "results/logs/export_model/{task}/{agent}/{driver}/seed{seed}.log",
    params:
        overrides=overrides_of_cell,
    resources:
        **resources_of("export_model"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/export_model.py"


rule build_leaderboard:
    input:
        summaries=run_summaries,
    output:
        csv=report("results/leaderboard.csv", category="Leaderboard"),
        md="results/leaderboard.md",
        json="results/leaderboard.json",
        levels=report("results/leaderboard_levels.csv", category="Leaderboard"),
    log:
        "results/logs/build_leaderboard/leaderboard.log",
    params:
        overrides=GRID_OVERRIDES,
    resources:
        **resources_of("build_leaderboard"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/build_leaderboard.py"


rule build_report:
    input:
        summaries=run_summaries,
        leaderboard="results/leaderboard.csv",
    output:
        report=report(
            directory("results/report"),
            htmlindex="index.html",
            category="Report",
        ),
    log:
        "results/logs/build_report/report.log",
    params:
        overrides=GRID_OVERRIDES,
    resources:
        **resources_of("build_report"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/build_report.py"
