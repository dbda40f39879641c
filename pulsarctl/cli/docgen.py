"""Completion scripts and man pages generated from the command tree (placeholder until the
generator lands)."""
SHELLS = ("bash", "zsh", "fish")


def completion(shell: str) -> str:
    return ""
