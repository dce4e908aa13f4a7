"""`python -m mgcp ...` is the `mgcp` command."""

from mgcp.surfaces.cli import command

command()
