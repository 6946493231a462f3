NAME = "arena_hard"
SUFFIXES = ()
