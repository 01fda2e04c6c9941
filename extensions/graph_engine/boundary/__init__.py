"""Everything the pack reads from outside comes through here: regular files only, bounded, and settings."""
