"""One module per `xdp2tc` subcommand, each with `add_parser(sub)` (its options) and
`run(args)` (exit code); offload/cli.py puts them together."""
