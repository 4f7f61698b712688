"""The starter files `hivemind init` writes: README, example agent, knowledge note."""

from __future__ import annotations

ASSISTANT_ROM = """\
---
# This front matter configures the agent; every field is optional.
# Any [agents] setting of hive.toml can be overridden here for this agent.
role: General assistant of this hive
skills: [writing, summary, research, planning]   # routes unassigned tasks that mention these
heartbeat: 0                # time between unprompted cycles (90s, 5m, 1h); 0 = tasks and mail only
knowledge: ["**/*.md"]      # notes of knowledge/ to keep in view
max_output_tokens: 2048
---
# Assistant

You are the general assistant of this hive. People give you work as task files
and as messages; other agents may too.

## How you work
- Do the task you are given. Put what you produce under `workspace/` (you cannot
  write anywhere else except `knowledge/`).
- When a task is done, call `complete_task` with a short result: what you did and
  where the output is. If you cannot do it, call `fail_task` with the reason, so a
  person can fix the task and drop it again.
- Answer messages with `send_message`; people read the `human` mailbox.
- Split large work into smaller tasks with `create_task`, naming an assignee when
  another agent is better suited.
- Write down what others will need again (decisions, conventions, facts found) as
  a short note in `knowledge/`.

## Style
Be brief and concrete. Say what you are unsure about instead of guessing.
"""

KNOWLEDGE_NOTE = """\
# Hive conventions

Notes in `knowledge/` are read by every agent (each agent's ROM `knowledge:` globs
choose which). Keep each note short and about one topic; its first `# heading` is
its topic.

- Outputs go to `workspace/<task id>/`.
- Task ids are short and descriptive: `fix-login-timeout`, not `task1`.
- When a decision is made, record it here with the date and who made it.
"""

GITIGNORE = """\
# runtime state of the daemon (lock, status, memory database, audit logs)
.hivemind/
"""

HIVE_README = """\
# This hive

A team of LLM agents works in this folder. Everything they know and do is an
ordinary file: you can read and edit all of it with any editor.

```
hive.toml                  settings (every default is listed there, commented out)
agents/<name>/ROM.md       an agent: its configuration (front matter) and instructions
knowledge/                 notes every agent can read
mailboxes/<name>/new/      unread messages of an agent, or of `human` (you)
tasks/                     drop a task file here
tasks/active/<agent>/      tasks being worked on
tasks/done/  tasks/failed/ finished tasks, with the result or the reason appended
tasks/rejected/            files that could not be read, each with a .reason file
workspace/                 what the agents produce
.hivemind/                 the daemon's own state (do not edit)
```

Start the agents with `hivemind run` (in this folder, or `hivemind run DIR`), and
see what is going on with `hivemind status`. Claude needs `ANTHROPIC_API_KEY` (or
`ANTHROPIC_AUTH_TOKEN`) in the environment; `hivemind run --offline` tries the hive
without a model.

## Give the team a task

Drop a Markdown file into `tasks/`, or use `hivemind task add "Title"`.
A plain Markdown file is a valid task: its first `# heading` is the title and its
file name the id. Optional front matter:

```markdown
---
assignee: assistant        # who should do it (else: the agent whose skills match best)
priority: high             # critical, high, medium (default) or low
depends_on: [draft-intro]  # ids of tasks that must be done first
max_attempts: 3            # failures before it goes to tasks/failed/
---
# Write the project summary

Two paragraphs for the README, based on workspace/notes.md.
```

Exactly one agent claims the task (it moves to `tasks/active/<agent>/`); the
result is appended to the file when it moves to `tasks/done/`.

If a file cannot be read (bad YAML, a wrong value such as `priority: urgent`), it
is moved unchanged to `tasks/rejected/` next to a `.reason` file that says what to
fix, line number included. Fix it and drop it into `tasks/` again.

## Send a message

`hivemind send --to assistant "Please also check the links"`, or write a file into
`mailboxes/<agent>/new/` (write it elsewhere first and move it in, so it is never
read half-written). Agents answer in `mailboxes/human/new/`.

## Change an agent

Edit `agents/<name>/ROM.md`: the body is the agent's instructions, the front
matter its settings (`role`, `model`, `skills`, `heartbeat`, `tools`, `knowledge`,
`watch`, `max_context_tokens`, ...). Changes apply at the agent's next cycle. An
invalid edit never stops the agent: it keeps its last good configuration and
`hivemind status` shows what is wrong.

Add an agent by creating `agents/<new-name>/ROM.md`; remove one by deleting its
folder.
"""
