# Scoring outside the agent's budget: the base model before the run, the selected submission
# after it.


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


rule final_grade:
    input:
        run=str(RUN.run_json),
        baseline=str(BASELINE),
    output:
        final=str(RUN.final),
    log:
        str(PATHS.log("final_grade", CELL_PATH)),
    params:
        overrides=overrides_of_cell,
    resources:
        **resources_of("final_grade"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/final_grade.py"
