"""The `kudusql shell` SQL shell (docs/shell.md), built on prompt_toolkit.

    main.py         command line: DSN | --data-dir, -c, -f, stdin, exit status
    repl.py         Shell: the REPL and the script runner (one path for both)
    statements.py   input -> statements and backslash commands (psql's splitting rules)
    commands.py     the backslash-command registry (\\? is generated from it)
    completion.py   keywords, tables, columns, functions; background metadata refresh
    format.py       results and errors as text: pure functions
    backend.py      EmbeddedBackend (session/) and RemoteBackend (psycopg 3)
"""
