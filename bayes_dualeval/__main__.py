from bayes_dualeval.cli import main

main()
