"""OS-level file machinery: durable writes, flushes, paths, file names, watching.

Everything here knows about files and the kernel, nothing about what a hive is
(tasks, agents, mailboxes, its layout): `hive/` builds the file protocol on it.
"""
