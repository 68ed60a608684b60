"""The command line: the parser and dispatch (main.py), the option machinery (options.py), one module per
subcommand with its option table and settings builder, and the README's flag tables (docs.py)."""
