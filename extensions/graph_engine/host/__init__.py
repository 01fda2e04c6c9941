"""The Agent-Zero shell: hooks in, effects out; matching the message, asking the utility model, the audit log."""
