# The agent's run: workspace, grader and sandboxed agent within the budget. The run directory
# (workspace/, ledger.jsonl, events.jsonl, agent.log) is written next to run.json.
#
# The budget is wall-clock time, so an agent gets the machine to itself: the job takes every
# core Snakemake was given, and no other job (another agent, a baseline) runs beside it. To run
# agents side by side anyway, ask for it: snakemake --set-threads run_agent=1 ...


rule run_agent:
    input:
        manifest=str(PREPARED.manifest),
        model=model_of_task,
        baseline=str(BASELINE),
    output:
        run=str(RUN.run_json),
    log:
        str(PATHS.log("run_agent", CELL_PATH)),
    params:
        overrides=overrides_of_cell,
    threads: workflow.cores
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/run_agent.py"
