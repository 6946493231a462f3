NAME = "alpaca_eval"
SUFFIXES = ()
