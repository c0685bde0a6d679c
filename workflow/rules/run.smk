# The agent's run: workspace, grader and sandboxed agent within the budget. The run directory
# (workspace/, ledger.jsonl, events.jsonl, agent.log) is written next to run.json.
#
# The budget is wall-clock time, so an agent gets the machine to itself: run here, the job takes
# every core Snakemake was given, and no other job (another agent, a baseline) runs beside it;
# on a cluster it gets its agent's CPUs (run_agent_threads). To run agents side by side anyway,
# ask for it: snakemake --set-threads run_agent=1 ...
#
# Retries: only a run the harness failed is run again. Such a run (missing API key, agent CLI
# not installed, provider outage, grader crash, harness out of memory) writes run.json with
# status infra_failed and a reason, and the job fails, so Snakemake retries it, up to
# INFRA_RETRIES more times (--config infra_retries=N, default 2). The last attempt keeps its
# infra_failed run.json and the cell goes on to its summary: the leaderboard counts it apart
# and leaves it out of the scores. An agent's own failure (agent_failed, budget_exhausted,
# llm_budget_exhausted) is a finished run: the job succeeds and is never retried.


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
        infra_retries=INFRA_RETRIES,
    threads: run_agent_threads
    resources:
        a2rl_attempt=lambda wildcards, attempt: attempt,
        **resources_of("run_agent"),
    retries: INFRA_RETRIES
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/run_agent.py"
