# Inputs of every run: base models (shared across tasks) and each task's data splits.


rule prepare_model:
    output:
        model=directory(str(PATHS.model("{model}"))),
        done=touch(str(PATHS.model_done("{model}"))),
    log:
        str(PATHS.log("prepare_model", "{model}")),
    params:
        model=model_config,
    resources:
        **resources_of("prepare_model"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/prepare_model.py"


rule prepare_task:
    output:
        manifest=str(PREPARED.manifest),
    log:
        str(PATHS.log("prepare_task", "{task}")),
    params:
        overrides=overrides_of_task,
    resources:
        **resources_of("prepare_task"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/prepare_task.py"
