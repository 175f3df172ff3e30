from infctl.cli.entry import run

run()
