"""How a call runs, for every package: its steps (:mod:`.steps`: the statements and waits a decision needs,
as data a thread or an event loop carries out), its deadline passed down, and when it tries again
(:mod:`.retry`: one policy per reason, kazoo's ``KazooRetry`` shape, owning its loop).

May import: the standard library only.
"""
