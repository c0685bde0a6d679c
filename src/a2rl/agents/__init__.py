"""Reference agents: real agent processes that use only the workspace and the grading API.
Each is an agent plugin (entry-point group a2rl.agents, in pyproject.toml) naming this package:
its config is conf/agent/<name>.yaml here, and every script here is copied read-only into the
sandbox (/opt/a2rl/agents) and run with the agents' Python (a2rl.pipeline.agent_plugins)."""
