# Scoring outside the agent's budget: the base model before the run (the selected submission is
# scored after it by the cell's own job, run_cell in run.smk).


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
    threads: evaluation_threads
    resources:
        **resources_of("measure_baseline"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/measure_baseline.py"

