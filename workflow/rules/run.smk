# A cell is one job: the agent's run within its budget (workspace, grader and sandboxed agent;
# the run directory's workspace/, ledger.jsonl, events.jsonl, agent.log and run.json), then the
# final grade (final.json), the selected model exported for DVC and the run's summary with its
# integrity checks (a2rl.pipeline.cell). Snakemake's planning costs about the same per job,
# whatever the job does, so one job per cell plans a grid in half the time of two.
#
# The budget is wall-clock time, so an agent gets the machine to itself: run here, the job takes
# every core Snakemake was given, and no other job (another agent, a baseline) runs beside it;
# on a cluster it gets what the largest of its stages needs (cell_threads; resources: the
# agent's, or the task's grading ones where larger, for the sum of the stages' times). To run
# cells side by side anyway, ask for it: snakemake --set-threads run_cell=1 ...
#
# Retries resume. A run the harness failed (missing API key, agent CLI not installed, provider
# outage, grader crash, harness out of memory) writes run.json with status infra_failed and a
# reason, and the job fails, so Snakemake retries it, up to INFRA_RETRIES more times
# (--config infra_retries=N, default 2); the last attempt keeps its infra_failed run.json and
# the cell goes on to its summary: the leaderboard counts it apart and leaves it out of the
# scores. An agent's own failure (agent_failed, budget_exhausted, llm_budget_exhausted) is a
# finished run. A finished run is kept: when the stages after it fail (or the job is cancelled
# there), the retry, or the next snakemake command, only runs them again, never the agent.
# run.json is therefore not a declared output (Snakemake deletes a failed job's outputs); to run
# a finished cell's agent again, delete its run directory.


rule run_cell:
    input:
        manifest=str(PREPARED.manifest),
        model=model_of_task,
        baseline=str(BASELINE),
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
        agent=str(PATHS.log("run_agent", CELL_PATH)),
        finish=str(PATHS.log("finish_run", CELL_PATH)),
    params:
        overrides=overrides_of_cell,
        run_json=str(RUN.run_json),
        infra_retries=INFRA_RETRIES,
    threads: cell_threads
    resources:
        a2rl_attempt=lambda wildcards, attempt: attempt,
        **resources_of("run_cell"),
    retries: INFRA_RETRIES
    conda:
        "../envs/a2rl.yaml"
    script:
        "../scripts/run_cell.py"
