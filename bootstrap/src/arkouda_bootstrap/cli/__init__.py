"""The command line: the parser, the option tables and the dispatch to each subcommand."""
