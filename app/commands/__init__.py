"""CLI subcommand modules: each defines register(subparsers) and lazy handlers."""
