from trspark.cli import main

main()
