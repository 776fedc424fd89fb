"""The harness's subcommands, one module each (``add_parser(subparsers)``)."""
