"""The id a mail's context entry goes by: `msg:` and a short digest of its file name.

A mail file is named by its message id (the time to the microsecond, a process, a
sequence and a random part: some 25 tokens), and the entry's id is in every request
the mail is in view. The time is the entry's own `timestamp`; the rest says nothing
the model acts on. It needs a handle to answer by (send_message's `in_reply_to`),
unique among the mail in view and the same from cycle to cycle: ten hex digits of a
digest of the name are (five tokens).
"""

from __future__ import annotations

import hashlib

PREFIX = "msg:"


def mail_entry_id(file_name: str) -> str:
    """`msg:` and 10 hex digits of a digest of the mail's file name (`<id>.md`)."""
    digest = hashlib.blake2b(file_name.encode("utf-8", "surrogatepass"), digest_size=5)
    return PREFIX + digest.hexdigest()
