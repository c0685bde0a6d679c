# What a run leaves for people: a summary per run (with its integrity checks), the selected
# model exported for DVC, a leaderboard and a static HTML report per grid.
# `snakemake --cores 1 --report report.zip` collects the outputs marked with report() (a zip,
# because the HTML report is a folder).


rule summarize_run:
    input:
        run=str(RUN.run_json),
        final=str(RUN.final),
        baseline=str(BASELINE),
        # the sealed splits the contamination check compares the agent's files with
        manifest=str(PREPARED.manifest),
    output:
        json=str(RUN.summary_json),
        md=report(
            str(RUN.summary_md),
            category="Runs",
            subcategory="{task}",
            labels={"agent": "{agent}", "driver": "{driver}", "seed": "{seed}"},
        ),
        integrity=str(RUN.integrity),
    log:
        str(PATHS.log("summarize_run", CELL_PATH)),
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
        final=str(RUN.final),
    output:
        model=directory(str(PATHS.selected_model(*CELL))),
    log:
        str(PATHS.log("export_model", CELL_PATH)),
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
        csv=report(str(PATHS.leaderboard_csv), category="Leaderboard"),
        md=str(PATHS.leaderboard_md),
        json=str(PATHS.leaderboard_json),
        levels=report(str(PATHS.leaderboard_levels_csv), category="Leaderboard"),
        curves=report(str(PATHS.budget_curves_csv), category="Leaderboard"),
    log:
        str(PATHS.log("build_leaderboard", "leaderboard")),
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
        leaderboard=str(PATHS.leaderboard_csv),
    output:
        report=report(
            directory(str(PATHS.report)),
            htmlindex="index.html",
            category="Report",
        ),
    log:
        str(PATHS.log("build_report", "report")),
    params:
        overrides=GRID_OVERRIDES,
    resources:
        **resources_of("build_report"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/build_report.py"
