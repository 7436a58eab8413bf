from compilediag.cli import main

main()
