from bayes_dualeval.cli.commands import main

main()
