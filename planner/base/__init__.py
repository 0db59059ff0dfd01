"""What every layer may use: errors and exit codes, terminal-safe text, the cycle's time
budget (the one clock), signals, kubectl label selectors, and progress on a terminal."""
