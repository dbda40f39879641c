from pulsarctl.cli.entry import main

main()
