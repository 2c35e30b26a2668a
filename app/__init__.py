"""The application layer: what a user runs, wiring every other layer together.

`cli.py` and `commands/` (one module per subcommand group), the demo (`demo.py`, its report in
`demo_report.py`). The only layer that may import all the others (tests/unit/test_import_rules.py);
nothing below it imports it.
"""
