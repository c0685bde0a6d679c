"""The agent's contract, written once: ``templates/workspace.md.j2`` holds the workspace's
layout, how to submit, how a run is scored, what is forbidden and the budget, and is the only
text that names the budget and the submit command. A task's description (its own part: title,
goal, data, scoring, tips) extends it; the LLM agents' prompt head is its macro. Rendered with
Jinja2; a value the template needs and is not given is an error, never a blank."""

from __future__ import annotations

from typing import Any

import jinja2

TEMPLATE = "workspace.md.j2"


def _environment(undefined: type[jinja2.Undefined] = jinja2.StrictUndefined) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("a2rl", "templates"),
                              undefined=undefined, keep_trailing_newline=True,
                              autoescape=False)


def _contract_module():
    """The template's own names (submit_command, status_command, prompt_head), read without a
    run's values."""
    return _environment(jinja2.Undefined).get_template(TEMPLATE).module


def render_text(source: str, values: dict[str, Any]) -> str:
    """A Jinja2 text (a task's description, a data README) with ``values`` and the contract's
    commands; a missing value raises ``jinja2.UndefinedError``."""
    module = _contract_module()
    names = {"submit_command": module.submit_command, "status_command": module.status_command}
    return _environment().from_string(source).render({**names, **values})


def render_description(task_part: str, values: dict[str, Any]) -> str:
    """description.md: the task's own part (a template that extends workspace.md.j2) inside the
    benchmark's rules, with this run's values."""
    if "{% extends" not in task_part:
        raise ValueError(f"a task's description must extend the workspace template "
                         f'({{% extends "{TEMPLATE}" %}}) and fill its blocks (docs/plugins.md)')
    return render_text(task_part, values)


def prompt_head(workspace: str) -> str:
    """What an LLM agent's prompt starts with, before its description."""
    return str(_contract_module().prompt_head(workspace))
