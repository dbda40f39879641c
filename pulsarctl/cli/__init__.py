"""The command line: parse, make one call, render. Nothing imports this package."""
