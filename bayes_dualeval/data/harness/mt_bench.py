NAME = "mt_bench"
SUFFIXES = ()
