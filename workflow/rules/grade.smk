# Scoring outside the agent's budget: the base model before the run, the selected submission
# after it.


rule measure_baseline:
    input:
        manifest="results/prepared/{task}/prepared.json",
        model=model_of_task,
    output:
        baseline="results/baseline/{task}/baseline.json",
    log:
        "results/logs/measure_baseline/{task}.log",
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
        run="results/runs/{task}/{agent}/{driver}/seed{seed}/run.json",
        baseline="results/baseline/{task}/baseline.json",
    output:
        final="results/runs/{task}/{agent}/{driver}/seed{seed}/final.json",
    log:
        "results/logs/final_grade/{task}/{agent}/{driver}/seed{seed}.log",
    params:
        overrides=overrides_of_cell,
    resources:
        **resources_of("final_grade"),
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/final_grade.py"
