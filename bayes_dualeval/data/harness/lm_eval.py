NAME = "lm_eval"
SUFFIXES = ()
