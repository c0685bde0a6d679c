# Scoring outside the agent's budget: the base model before the run, the selected submission
# after it (with the run's summary and exported model).


rule measure_baseline:
    input:
        manifest=str(PREPARED.manifest),
        model=model_of_task,
    output:
        baseline=str(BASELINE),
    log:
        str(PATHS.log("measure_baseline", "{task}")),
    params:
        overrides=overrides_of_task,
    resources:
        **resources_of("measure_baseline"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/measure_baseline.py"


# After the run, one job per cell (Snakemake's planning costs about the same per job, whatever
# the job does, so a cell is two jobs: run_agent and this): the final grade (final.json), the
# selected model exported for DVC, and the run's summary with its integrity checks. Its
# resources are the final grade's (the task's, for one evaluation) with the other two stages'
# time added (a2rl.pipeline.resources).
rule finish_run:
    input:
        run=str(RUN.run_json),
        baseline=str(BASELINE),
        # the sealed splits the contamination check compares the agent's files with
        manifest=str(PREPARED.manifest),
    output:
        final=str(RUN.final),
        model=directory(str(PATHS.selected_model(*CELL))),
        json=str(RUN.summary_json),
        md=report(
            str(RUN.summary_md),
            category="Runs",
            subcategory="{task}",
            labels={"agent": "{agent}", "driver": "{driver}", "seed": "{seed}"},
        ),
        integrity=str(RUN.integrity),
    log:
        str(PATHS.log("finish_run", CELL_PATH)),
    params:
        overrides=overrides_of_cell,
    resources:
        **resources_of("finish_run"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/finish_run.py"
