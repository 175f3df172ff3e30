from infctl.cli.main import run

run()
