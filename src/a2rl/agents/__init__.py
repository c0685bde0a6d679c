"""Reference agents: real agent processes that use only the workspace and the grading API.
Each file here is copied read-only into the sandbox (/opt/a2rl/agents) and run with Python."""
