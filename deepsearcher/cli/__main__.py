from deepsearcher.cli import main

main()
