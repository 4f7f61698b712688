"""The task board: tasks/ (pending), active/<agent>/, done/, failed/, rejected/.

A task's state is the folder it is in. `board.TaskBoard` moves task files (claim,
release, create; `ending` completes and fails them) and answers what is where
from its `index.TaskIndex`, which has the drop zone's `pending.PendingTasks`.
Which agent a task goes to is `routing`; a finished task's text is `file`;
folder listings that move nothing are `listing`; a task and its place, `ref`.
"""
