# Inputs of every run: base models (shared across tasks) and each task's data splits.


rule prepare_model:
    output:
        model=directory("resources/models/{model}"),
        done=touch("resources/models/{model}.done"),
    log:
        "results/logs/prepare_model/{model}.log",
    params:
        overrides=overrides_of_model,
    resources:
        **resources_of("prepare_model"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/prepare_model.py"


rule prepare_task:
    output:
        manifest="results/prepared/{task}/prepared.json",
    log:
        "results/logs/prepare_task/{task}.log",
    params:
        overrides=overrides_of_task,
    resources:
        **resources_of("prepare_task"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/prepare_task.py"
