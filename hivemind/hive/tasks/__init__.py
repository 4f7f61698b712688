"""The task board: tasks/ (pending), active/<agent>/, done/, failed/, rejected/.

A task's state is the folder it is in. `board.TaskBoard` moves task files (claim,
complete, fail, release, create) and answers from its `index.TaskIndex`, which
reads the board as it is on disk. Which agent a task goes to is `routing`; a
finished task's text is `file`; folder listings that move nothing are `listing`.
"""
