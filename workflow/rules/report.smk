# What a grid leaves for people: a leaderboard and a static HTML report (each run's summary
# and exported model come from run_cell, run.smk).
# `snakemake --cores 1 --report report.zip` collects the outputs marked with report() (a zip,
# because the HTML report is a folder).


rule build_leaderboard:
    input:
        summaries=RUN_SUMMARIES,
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
        summaries=RUN_SUMMARIES,
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
