"""OS-level file machinery: durable writes, flushes, paths, file names, watching.

Everything here knows about files and the kernel, nothing about what a hive is
(tasks, agents, mailboxes, its layout): `hive/` builds the file protocol on it, and
nothing here imports `hive/`.

    writing    atomic (temp names, whole-file writes) -> noreplace (moves that never
               replace) ; steps (run a durable operation here or on the loop) ->
               flush (group commit, syncfs) <- loopflusher (one trip per loop turn) ;
               diskspace (the one write seam, a full disk told apart)
    reading    regular (bounded settings files) ; statcache (parse once per stat)
    naming     paths (confinement, links out) ; globs ; filenames (non-UTF-8 names) ;
               treewalk (bounded walks)
    watching   inotify (on the loop) -> osevents (observers, the raw path queue) ;
               settling (still and whole: the Settler)
    other      flocks (who holds a lock) ; sayonce (a warning said once)
"""
