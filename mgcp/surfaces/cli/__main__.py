"""`python -m mgcp.surfaces.cli ...` is the `mgcp` command."""

from mgcp.surfaces.cli import command

command()
