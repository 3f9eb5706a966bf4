"""The `kudusql shell` REPL (issue: shell), built on prompt_toolkit."""
